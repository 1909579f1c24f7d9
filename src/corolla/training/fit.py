"""Training: compile + fit + checkpoints + resume.

`run(config, plan)` is what `corolla train` and `corolla demo` call: it prepares (settings,
backup, epoch length), builds the model, opens the run folder, fits the phases and saves.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from corolla import config as config_lib
from corolla import files, models
from corolla.data import check
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.errors import Interrupted, UserError
from corolla.evaluation.inference import stop_check
from corolla.runs import identity, paths, rundir
from corolla.runtime import Plan, collective
from corolla.training import budget
from corolla.training import schedule as schedule_lib
from corolla.training.settings import resolve

# Keras is imported when training starts, not with this module: the backend is chosen first.
# So callbacks, checkpoint and optimizer (which import it) are imported in the functions.
if TYPE_CHECKING:
    from corolla.training.checkpoint import BackupState, Checkpoint


@dataclass
class TrainResult:
    run_dir: Path | None  # None on a worker that is not the chief: it writes no run
    model: object
    history: dict


def compile_model(model, plan: Plan, schedule, steps_per_execution: int | None = None,
                  train: config_lib.TrainConfig | None = None) -> None:
    """Compiles for one-hot labels (see pipeline.train_dataset) with the optimizer `train`
    asks for (Adam without it)."""
    import keras

    from corolla.training.optimizer import make_optimizer

    train = train or config_lib.TrainConfig()
    model.compile(optimizer=make_optimizer(train, schedule, model),
                  loss=keras.losses.CategoricalCrossentropy(
                      label_smoothing=train.label_smoothing),
                  metrics=[keras_accuracy()],
                  steps_per_execution=steps_per_execution or plan.steps_per_execution,
                  jit_compile=plan.jit_compile)


@dataclass(frozen=True)
class Phase:
    """Epochs [start, end) trained with the backbone frozen or not, at the schedule x lr_scale,
    on `size` px images (0: the model's input size)."""
    start: int
    end: int
    frozen: bool
    lr_scale: float = 1.0
    size: int = 0

    def same_optimizer(self, other: Phase) -> bool:
        """Whether `other` trains with this phase's compiled model (only its images' size
        differs), so that moving on needs no new optimizer."""
        return (self.frozen, self.lr_scale) == (other.frozen, other.lr_scale)


def phases(train: config_lib.TrainConfig, train_backbone: bool, size: int = 0) -> list[Phase]:
    """Two-phase fine-tuning: the head alone for train.frozen_epochs, then everything at the
    schedule's rate x train.finetune_lr_scale; one phase otherwise. With progressive resizing
    (train.start_size, for a model of `size` px), each is split where the image size changes."""
    n = min(train.frozen_epochs, train.epochs) if train_backbone else 0
    if not n:
        split = [Phase(0, train.epochs, frozen=not train_backbone)]
    else:
        split = [Phase(0, n, frozen=True), Phase(n, train.epochs, False, train.finetune_lr_scale)]
    out = []
    for p in split:
        for epoch in range(p.start, p.end):
            at = schedule_lib.size_at(train, size, epoch)
            if out and out[-1].end == epoch and out[-1].size == at and p.same_optimizer(out[-1]):
                out[-1] = dataclasses.replace(out[-1], end=epoch + 1)
            else:
                out.append(dataclasses.replace(p, start=epoch, end=epoch + 1, size=at))
    return out


def backbone_of(model):
    """The backbone inside a model from models.create_model: its one nested model."""
    import keras

    nested = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    if len(nested) != 1:
        raise UserError(f"model {model.name!r} has no single backbone to freeze "
                        f"(train.frozen_epochs, train.unfreeze_fraction); set "
                        f"train.frozen_epochs = 0 and train.unfreeze_fraction = 1")
    return nested[0]


def batchnorm_layers(model) -> list:
    """Every BatchNormalization layer inside `model`, nested models and blocks included."""
    import keras

    return [layer for layer in models.sublayers(model)
            if isinstance(layer, keras.layers.BatchNormalization)]


def below_unfrozen(backbone, fraction: float) -> list:
    """The layers of `backbone` that stay frozen when only its top `fraction` trains: the
    bottom `1 - fraction` of its weighted layers, in their order from the input (a functional
    model lists them so). No gradient flows below the lowest trained layer."""
    import keras

    weighted = [layer for layer in models.sublayers(backbone)
                if layer.weights and not isinstance(layer, keras.Model)]
    return weighted[:round(len(weighted) * (1 - fraction))]


def batchnorm_inference(config: config_lib.RunConfig) -> bool:
    """Whether a trained (unfrozen) backbone keeps its BatchNorm in inference mode:
    train.batchnorm, whose "auto" means yes for pre-trained weights, no from scratch."""
    mode = config.train.batchnorm
    if mode == "auto":
        return config.model.weights not in ("", "none")
    return mode == "inference"


def _set_determinism(config: config_lib.RunConfig, plan: Plan) -> None:
    import keras

    keras.utils.set_random_seed(config.train.seed)
    if plan.backend == "tensorflow":
        import tensorflow as tf

        # Process-wide: a deterministic run before this one (the Python API) must not leave it
        # on, which would also make Keras drop the plan's XLA without a word.
        if config.train.deterministic:
            tf.config.experimental.enable_op_determinism()
        else:  # not exported by TensorFlow, but its counterpart (tests use it the same way)
            from tensorflow.python.framework import config as tf_config

            tf_config.disable_op_determinism()


def _agree_on_epoch(plan: Plan, state: BackupState, backup_dir: Path,
                    log) -> tuple[BackupState, str | None]:
    """(the state this process continues from, the chief's backup file where the workers take
    the chief's state, else None). Every process must continue from the chief's epoch: a
    worker whose backup is behind it (its private scratch folder lost with a preempted,
    recreated VM, or another TMPDIR) takes the chief's record here and its weights and
    optimizer once the model is built (`_Trainer.restore`), instead of silently training from
    scratch beside the others. A worker ahead of the chief means the chief's backup was
    replaced: refused."""
    import json

    from corolla.training.checkpoint import BackupState

    done = collective.gather(plan, [state.epochs_done])[:, 0].tolist()
    if len(set(done)) == 1:
        return state, None
    if max(done) > done[0]:
        raise UserError(f"the processes restored different epochs ({done} completed, by "
                        f"process), and the chief fewer than a worker; resume from the chief's "
                        f"backup as the run left it (the same command on every host)")
    behind = ", ".join(f"process {i} ({d})" for i, d in enumerate(done) if d < done[0])
    log(f"every process continues from the chief's backup, after epoch {done[0]}: epochs in "
        f"the workers' own backups: {behind} (a lost scratch folder, or another TMPDIR)")
    chiefs = json.loads(collective.chief_bytes(plan, json.dumps(state.__dict__).encode()))
    if plan.backend == "jax" and chiefs["best"]:
        # Every process ends by saving the best epoch's model (`_save`), and on JAX loading its
        # weights is collective, with the same values everywhere: the workers take the chief's
        # file. On TensorFlow the chief's best model stays the chief's: a worker keeps none.
        best = backup_dir / chiefs["best"]
        data = collective.chief_bytes(plan, best.read_bytes() if plan.is_chief else b"")
        if not plan.is_chief:
            backup_dir.mkdir(parents=True, exist_ok=True)
            with files.atomic_path(best) as tmp:
                tmp.write_bytes(data)
    else:
        chiefs["best"] = None
    # (The chief's weights and optimizer state: sent once the model is built.)
    return (state if plan.is_chief else BackupState(**{**chiefs, "weights": None})), \
        chiefs["weights"]


@dataclass
class _Prepared:
    """What training needs before the first epoch, found before any folder is made."""
    config: config_lib.RunConfig  # resolved
    layout: layout_lib.Layout
    run_dir: Path | None  # the run continued (chief), None for a new run or a worker
    backup_dir: Path | None  # a worker's; the chief's is inside its run folder
    state: BackupState
    steps: int  # per epoch
    steps_per_execution: int
    # Where every process takes the chief's weights: the chief's backup file (see
    # _agree_on_epoch), else None.
    chiefs_file: str | None

    @property
    def from_chief(self) -> bool:
        return self.chiefs_file is not None


def run(config: config_lib.RunConfig, plan: Plan, log=print, resume: Path | None = None,
        callbacks=()) -> TrainResult:
    """Trains into a new run directory, or continues the interrupted run `resume` (its
    config, from its last completed epoch). `callbacks` are added to Corolla's own.

    The run's model.keras is its best epoch by val macro F1; last.keras its last epoch."""
    began = time.monotonic()  # a time budget counts from here (`budget`)
    log = log if plan.is_chief else (lambda *args: None)
    ready = _prepare(config, plan, log, resume)
    config, t = ready.config, ready.config.train
    size, num_classes = config.model.input_size, len(ready.layout.class_names)
    plan_phases = phases(t, config.model.train_backbone, size)
    progressive = any(p.size != size for p in plan_phases)
    # A time budget not yet planned (a resumed run continues the plan its config holds): the
    # model may train at other sizes than the recipe's (a ramp over other epochs, a smaller
    # input size), so it is built to take any.
    to_plan = bool(t.time_budget) and not t.time_plan
    any_size = progressive or (to_plan and (bool(t.start_size) or
                                            len(budget.candidates(config)) > 1))
    # Data and model come first: a failure there (a split smaller than one batch, weights that
    # will not load) leaves no empty run behind.
    val_split = check.check_split(ready.layout.split("val"), num_classes,
                                  skip_bad_records=config.data.skip_bad_records)
    val_labels = pipeline.metadata(val_split, config.data.skip_bad_records)["labels"]

    def build():
        return models.create_model(config.model.name, num_classes, size, config.model.weights,
                                   config.model.train_backbone, dropout=config.model.dropout,
                                   any_size=any_size)

    with plan.scope():
        model = build()
    trainer = _Trainer(ready, plan, model, log, callbacks, build)
    if to_plan:
        config = ready.config = _plan_time(trainer, val_split, began, log)
        t, size = config.train, config.model.input_size
        ready.steps = t.time_steps or ready.steps  # whole executions (`_epoch_steps`)
        plan_phases = phases(t, config.model.train_backbone, size)
        progressive = any(p.size != size for p in plan_phases)
    with plan.scope():
        # What the run saves: the model at its input size (the same layers and weights).
        saved = models.at_size(model, size) if any_size else model
    resumed = next((p for p in plan_phases if p.end > ready.state.epochs_done), plan_phases[-1])
    # Built before the folder too: a pipeline that cannot be built leaves no run behind.
    trainer.first_data = trainer._data(ready.state.epochs_done, resumed.size)
    # The phase that saved the backup: its optimizer holds the backed-up state.
    trainer.configure(next(p for p in plan_phases if p.end > max(ready.state.epochs_done - 1, 0)))
    run_dir, backup_dir = _open_folder(ready, plan, log, resume)
    model_path = run_dir / paths.MODEL if plan.is_chief else backup_dir.parent / paths.MODEL
    checkpoint = trainer.callbacks(run_dir, backup_dir, saved, val_split, val_labels, began)
    _log_training(config, plan, ready, plan_phases, progressive, log)
    try:
        trainer.fit_phases(plan_phases, progressive)
        result = _save(model, saved, checkpoint.state, model_path, backup_dir, run_dir,
                       config.output.run_id, log)
        if t.time_budget:
            spent = checkpoint.spent()
            log(f"time {t.time_budget}: trained in {spent / 60:.1f} min "
                f"({spent / config_lib.duration_seconds(t.time_budget):.0%} of the budget)")
        return result
    except KeyboardInterrupt:  # the message says how to continue the run
        raise Interrupted(run_dir) from None


def _prepare(config: config_lib.RunConfig, plan: Plan, log, resume: Path | None) -> _Prepared:
    """Resolves the settings, claims the run to continue and reads its backup, and fixes the
    epoch's length: everything decided before a model is built."""
    from corolla.runtime.hardware import worker_scratch
    from corolla.training.checkpoint import BackupState, read_state

    asked = config.train
    config, layout = resolve(config, plan, resume=resume is not None, log=log)
    if asked.scale_lr == "replicas":
        log(f"peak learning rate {asked.learning_rate:g} x {plan.replicas} replica(s) = "
            f"{config.train.learning_rate:g} (train.scale_lr = replicas)")
    # Every process trains the chief's run: its id keys the workers' scratch folders, so a
    # resumed worker finds its own backup and a new run never meets an old one's.
    run_id = collective.chief_hex(plan, config.output.run_id)
    config = config_lib.apply(config, {"output.run_id": run_id})
    run_dir = Path(resume) if resume and plan.is_chief else None
    if run_dir:
        rundir.claim(run_dir, log)  # before its backup is read: one writer per run
    backup_dir = (run_dir / paths.BACKUP if run_dir else None) if plan.is_chief else \
        worker_scratch(run_id, plan.process_id) / paths.BACKUP
    state = read_state(backup_dir) if resume else BackupState()
    state, chiefs_file = _agree_on_epoch(plan, state, backup_dir, log)
    _set_determinism(config, plan)
    steps, steps_per_execution = _epoch_steps(config.train, plan, log)
    return _Prepared(config, layout, run_dir, backup_dir, state, steps, steps_per_execution,
                     chiefs_file)


def _epoch_steps(t: config_lib.TrainConfig, plan: Plan, log) -> tuple[int, int]:
    """(steps per epoch, steps per execution): whole executions, and with gradient
    accumulation whole accumulations, so that every epoch ends on an optimizer update."""
    asked = t.time_steps or t.steps_per_epoch  # a time plan's shortened epochs, once planned
    steps, steps_per_execution = plan.fit_steps(asked)
    if t.accumulation_steps > 1:
        unit = math.lcm(steps_per_execution, t.accumulation_steps)
        if steps < unit:
            raise UserError(f"an epoch of {steps} steps is shorter than one accumulation of "
                            f"{t.accumulation_steps} batches; lower train.accumulation_steps "
                            f"or raise --steps-per-epoch")
        steps -= steps % unit
    if steps != asked:
        log(f"{asked} steps per epoch rounded to {steps}, a multiple of the "
            f"{steps_per_execution} steps the accelerator runs per call"
            + (f" and of the {t.accumulation_steps} accumulated batches per update"
               if t.accumulation_steps > 1 else ""))
    return steps, steps_per_execution


def _open_folder(ready: _Prepared, plan: Plan, log, resume) -> tuple[Path | None, Path]:
    """(run folder, backup folder): a new run's folder made and recorded by the chief, or the
    continued run's session recorded (with the history its backup holds: a kill may have come
    between the backup and history.csv)."""
    from corolla.training.checkpoint import write_history

    config, run_dir, backup_dir = ready.config, ready.run_dir, ready.backup_dir
    if plan.is_chief and not resume:
        run_dir = rundir.create(config.output.runs_dir, config.output.name,
                                models.short_name(config.model.name))
        rundir.claim(run_dir, log)
        backup_dir = run_dir / paths.BACKUP
        rundir.record(run_dir, config, plan, ready.layout.class_names)
        log(f"run directory: {run_dir}")
    elif plan.is_chief:
        rundir.record_session(run_dir, plan)
        if ready.state.history:
            write_history(ready.state.history, run_dir / paths.HISTORY)
        log(f"resuming {run_dir} after epoch {ready.state.epochs_done} of "
            f"{config.train.epochs}")
        if config.train.time_plan:
            spent = ready.state.history[-1].get("seconds", 0.0) if ready.state.history else 0
            log(f"time {config.train.time_budget}: continuing its plan ({config.train.time_plan})"
                f"; {spent / 60:.1f} min spent before (up to the last completed epoch)")
    return run_dir, backup_dir


class _Trainer:
    """The model through its phases: compiled per phase, fed per phase, with Corolla's
    callbacks."""

    def __init__(self, ready: _Prepared, plan: Plan, model, log, extra_callbacks, build):
        self.ready, self.plan, self.model, self.log = ready, plan, model, log
        self.build = build  # makes another model like `model` (see `_read_alone`)
        self.extra = list(extra_callbacks)
        t = ready.config.train
        # In inference mode, a BatchNorm layer normalises with its moving statistics and
        # leaves them, its scale and its offset alone (Keras 3: `trainable = False` does both).
        self.frozen_bn = batchnorm_inference(ready.config) and ready.config.model.train_backbone
        self.backbone = backbone_of(model) if ready.config.model.train_backbone and \
            (t.frozen_epochs or self.frozen_bn or t.unfreeze_fraction < 1) else None
        self.current: Phase | None = None
        self.own: list = []
        # The frozen-feature path's: (train features, labels, val features) at cached_size px.
        self.head, self.cached, self.cached_size, self.said_slow = None, None, None, False
        self.halves = None  # (features, head) of the model: `_halves`
        self.said_no_cache = False
        self.first_data = None  # the stream the run starts (or resumes) with: see `run`
        self.class_weights = _class_weights(ready.config, ready.layout)

    def configure(self, phase: Phase) -> None:
        """The model compiled for `phase`: backbone frozen or not, a fresh optimizer whose
        schedule continues from the phase's first epoch."""
        with self.plan.scope():
            self._compile(self.model, self.backbone, phase)
        self.current = phase

    def _compile(self, model, backbone, phase: Phase) -> None:
        """`model` (the run's, or a twin of it: `_read_alone`) with its `backbone` frozen, or
        thawed as far as the run says, and compiled for `phase`."""
        t = self.ready.config.train
        if backbone is not None:
            backbone.trainable = not phase.frozen
            if not phase.frozen:
                still_frozen = below_unfrozen(backbone, t.unfreeze_fraction)
                if self.frozen_bn:
                    still_frozen += batchnorm_layers(backbone)
                for layer in still_frozen:
                    layer.trainable = False
        updates = self.ready.steps // t.accumulation_steps  # what schedules count
        schedule = schedule_lib.for_training(t, updates, t.accumulation_steps,
                                             first_epoch=phase.start, scale=phase.lr_scale)
        compile_model(model, self.plan, schedule, self.ready.steps_per_execution, train=t)

    def callbacks(self, run_dir, backup_dir, saved, val_split, val_labels,
                  began: float) -> Checkpoint:
        """Corolla's own callbacks, the backup restored into the model; returns the
        checkpoint, whose state says what was trained (and, from `began`, in how long)."""
        from corolla.training.callbacks import EpochTensorBoard, SwapEMA, ValMacroF1
        from corolla.training.checkpoint import Checkpoint

        config, plan = self.ready.config, self.plan
        t = config.train
        # Validation and the best model use the EMA weights.
        swap = SwapEMA() if t.ema else None
        checkpoint = Checkpoint(backup_dir, self.ready.state,
                                run_dir / paths.HISTORY if plan.is_chief else None, swap=swap,
                                patience=t.early_stopping_patience, log=self.log, saved=saved,
                                chiefs_file=self.ready.chiefs_file, began=began)
        self.restore(checkpoint)
        self.own_f1 = ValMacroF1(val_split, config.model.input_size, val_labels, plan, swap,
                                 config.data.skip_bad_records)
        # F1 first: the checkpoint records it and keeps the best epoch.
        self.own = [self.own_f1, checkpoint]
        if swap is not None:
            self.own.insert(0, swap)
        if plan.is_chief:
            self.own.append(EpochTensorBoard(str(run_dir / paths.LOGS), write_graph=False))
        self.checkpoint = checkpoint
        return checkpoint

    def restore(self, checkpoint: Checkpoint) -> None:
        """The backup restored into the model and its optimizer: this process's own, or on
        every process the chief's (`_agree_on_epoch`)."""
        plan, model = self.plan, self.model
        with plan.scope():
            if not (self.ready.from_chief and plan.backend == "jax"):
                checkpoint.restore(model, for_all=self.ready.from_chief)
                if self.ready.from_chief:
                    collective.take_chiefs_values(plan, [*model.weights,
                                                         *model.optimizer.variables])
                return
            # Keras' JAX loading assigns each variable as one array over all processes, a
            # collective (JAX checks that every process passes the same value), which the
            # workers, with no file to load, cannot mirror: the chief reads its backup alone,
            # into a twin of the model (not into a StatelessScope: every Keras save and load
            # makes a reference optimizer, whose variables no such scope allows).
            if not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)
            collective.take_chiefs_values(plan, [*model.weights, *model.optimizer.variables],
                                          self._read_alone(checkpoint) if plan.is_chief else
                                          None)

    def measure(self, kinds: set, costs: budget.Costs, final: int, val_split,
                cached: bool) -> None:
        """Times what `costs` lacks (`budget`): budget.PROBE_STEPS training steps of each
        kind (frozen, size) after its first (with `cached`, a frozen kind's caching pass
        instead: twice as many batches of it), a validation pass at `final` px, a backup. The
        model's variables are put back afterwards: the probe trains nothing."""
        import tempfile

        import keras

        from corolla.evaluation.inference import predict_probabilities
        from corolla.training.checkpoint import save_backup

        model, plan = self.model, self.plan
        kept = [keras.ops.convert_to_numpy(v) for v in model.variables]
        per_call = self.ready.steps_per_execution
        for frozen, size in sorted(kinds):
            if frozen and cached:
                if size not in costs.cache:
                    self._time_caching(size, costs)
                continue
            if (frozen, size) in costs.step:
                continue
            self.configure(Phase(0, 1, frozen, size=size))
            ends = []
            timer = keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda batch, logs: ends.append(time.monotonic()))
            start = time.monotonic()
            # Not past the input pipeline's read-ahead, as for the caching pass: a training
            # stream's next steps still wait for tf.data's tuning of its decoding (0.51 s a
            # step there, 0.39 in the epochs after, on a 2-core CPU); these err short by less.
            model.fit(self._data(0, size), epochs=1, verbose=0, shuffle=False,
                      steps_per_epoch=per_call * (1 + budget.PROBE_STEPS), callbacks=[timer])
            step, first = _median_and_first(ends, start)
            costs.step[(frozen, size)] = step / per_call
            costs.first[(frozen, size)] = first
        if final not in costs.val:
            start = time.monotonic()
            predict_probabilities(model, val_split, final, plan,
                                  self.ready.config.data.skip_bad_records)
            costs.val[final] = time.monotonic() - start
        if not costs.backup:
            with tempfile.TemporaryDirectory() as folder:
                start = time.monotonic()
                save_backup(model, Path(folder) / "probe.npz")
                costs.backup = time.monotonic() - start
        with plan.scope():
            for variable, value in zip(model.variables, kept):
                variable.assign(value)

    def _time_caching(self, size: int, costs: budget.Costs) -> None:
        """Times batches of the frozen features' caching pass over the training images at
        `size` px (the run's own extractor: the run pays no tracing again)."""
        import keras

        config = self.ready.config
        ds = pipeline.eval_dataset(self.ready.layout.split("train"), size,
                                   self.plan.inference_batch,
                                   skip_bad_records=config.data.skip_bad_records)
        ends = []
        timer = keras.callbacks.LambdaCallback(
            on_predict_batch_end=lambda batch, logs: ends.append(time.monotonic()))
        start = time.monotonic()
        # Twice the batches, the first half's not counted: while the first one traces, the
        # input pipeline decodes the next ones ahead, and a batch it need not wait for is
        # cheaper than one of the pass, where decoding and the model share the CPU.
        self._halves()[0].predict(ds.repeat(), steps=1 + 2 * budget.PROBE_STEPS, verbose=0,
                                  callbacks=[timer])
        costs.cache[size], costs.cache_first[size] = _median_and_first(
            ends, start, settle=budget.PROBE_STEPS)

    def _halves(self):
        """(frozen features, head) of the model (`features.split_model`), made once."""
        from corolla.training import features

        if self.halves is None:
            with self.plan.scope():
                self.halves = features.split_model(self.model)
        return self.halves

    def _read_alone(self, checkpoint: Checkpoint) -> list:
        """The values of the model's and its optimizer's variables in this process's backup,
        in their order, read with no other process: loaded into a twin of the model (built and
        compiled as the model was), on this process's devices alone."""
        import keras

        with self.plan.inference_scope():
            twin = self.build()
            self._compile(twin, backbone_of(twin) if self.backbone is not None else None,
                          self.current)
            checkpoint.restore(twin)
            variables = [*twin.weights, *twin.optimizer.variables]
            if [v.shape for v in variables] != [v.shape for v in
                                                 [*self.model.weights,
                                                  *self.model.optimizer.variables]]:
                raise RuntimeError("the twin of the model holds other variables than it")
            return [keras.ops.convert_to_numpy(v) for v in variables]

    def _data(self, first_epoch: int, size: int):
        """The training stream from `first_epoch` at `size` px: one per `fit` (each iterates
        its dataset from the start), epoch k drawn as k. Each process reads, decodes and
        consumes only its own share of every global batch (see `Plan.input_batch`)."""
        config, plan, t = self.ready.config, self.plan, self.ready.config.train
        per_process = plan.global_batch // plan.num_processes
        split = self.ready.layout.split("train")
        cache = config.data.cache
        if cache:  # each process keeps its own share of the split
            cache, need, budget = pipeline.cache_fits(split.count // plan.num_processes, size)
            if not cache and not self.said_no_cache:  # once: later phases are larger
                self.log(f"data.cache: the training images decoded at {size} px would take "
                         f"{need:.1f} GB, over {pipeline.CACHE_SHARE:.0%} of this host's "
                         f"memory ({budget:.1f} GB): decoded every epoch instead")
                self.said_no_cache = True
        return pipeline.train_dataset(
            split, size, plan.input_batch,
            epoch_examples=self.ready.steps * per_process,
            first_epoch=first_epoch, seed=t.seed, augment=config.data.augment,
            cache=cache, shuffle_buffer=config.data.shuffle_buffer,
            ordered=t.deterministic, shard=plan.input_shard,
            skip_bad_records=config.data.skip_bad_records,
            num_classes=len(self.ready.layout.class_names), class_weights=self.class_weights)

    def fit_phases(self, plan_phases: list[Phase], progressive: bool) -> None:
        """Fits every phase not yet trained (or until early stopping)."""
        from corolla.training.callbacks import RunProgress
        from corolla.training.checkpoint import stops_early
        from corolla.training.optimizer import finalize_ema

        t = self.ready.config.train
        verbose = (1 if sys.stdout.isatty() else 2) if self.plan.is_chief else 0
        for phase in plan_phases:
            done = self.checkpoint.state.epochs_done
            if phase.end <= done or stops_early(self.checkpoint.state,
                                                t.early_stopping_patience):
                continue
            if not phase.same_optimizer(self.current):
                # The model enters the phase as a finished one leaves it: on its EMA weights.
                finalize_ema(self.model)
                self.configure(phase)
            self.current = phase
            if self.backbone is not None:
                trained = "trained" if t.unfreeze_fraction == 1 else \
                    f"trained (its top {t.unfreeze_fraction:.0%})"
                self.log(f"{_epochs(phase)}: backbone "
                         f"{'frozen' if phase.frozen else trained}, learning rate x "
                         f"{phase.lr_scale:g}" + (f", {phase.size} px" if progressive else ""))
            elif progressive:
                self.log(f"{_epochs(phase)} at {phase.size} px")
            first = max(done, phase.start)
            if self._fast(phase):
                self._fit_head(phase, first, verbose)
            else:
                data = self.first_data if first == self.ready.state.epochs_done else \
                    self._data(first, phase.size)
                self.model.fit(data, epochs=phase.end,
                               initial_epoch=first, steps_per_epoch=self.ready.steps,
                               callbacks=self.own + self.extra + [RunProgress(t.epochs),
                                                                  stop_check()],
                               shuffle=False, verbose=verbose)
            if self.model.stop_training:
                break

    def _fast(self, phase: Phase, say: bool = True) -> bool:
        """Whether `phase` trains the head on cached features (training.features): frozen,
        an augmentation they reproduce, one process (a worker's share of the data would need
        its own cache); says why not (with `say`), once, when the backbone is frozen."""
        from corolla.training import features

        if not phase.frozen:
            return False
        augment = self.ready.config.data.augment
        why = "" if features.cacheable(augment) else \
            f"the augmentation ({', '.join(augment)}) changes the images every epoch"
        if self.plan.multi_worker:
            why = "several processes share the data"
        if why and say and not self.said_slow:
            self.log(f"frozen backbone: features computed every epoch ({why}; cached when the "
                     f"augmentation is {' or '.join(['none', *features.ALLOWED])})")
            self.said_slow = True
        return not why

    def _fit_head(self, phase: Phase, first: int, verbose) -> None:
        """Trains the head alone on the backbone's cached features for epochs [first,
        phase.end): computed once per size, with their mirror images' where flips augment a
        phase of more than one epoch (`budget.cached_views`)."""
        import time

        from corolla.training import features
        from corolla.training.callbacks import RunProgress

        config, plan, t = self.ready.config, self.plan, self.ready.config.train
        layout = self.ready.layout
        flips = budget.cached_views("flip" in config.data.augment, phase.end - phase.start) > 1
        if self.cached_size != phase.size:
            began = time.monotonic()
            extractor, self.head = self._halves()
            train_split, val_split = layout.split("train"), self.own_f1.split
            batch = plan.inference_batch
            self.cached = (features.extract(extractor, train_split, phase.size, batch, flips,
                                            config.data.skip_bad_records),
                           pipeline.metadata(train_split,
                                             config.data.skip_bad_records)["labels"],
                           features.extract(extractor, val_split, config.model.input_size,
                                            batch, False, config.data.skip_bad_records))
            self.cached_size = phase.size
            self.log(f"frozen backbone: features of {train_split.count} training images"
                     f"{' and their mirror images' if flips else ''} and {val_split.count} "
                     f"val images cached in {time.monotonic() - began:.0f} s; the head trains "
                     f"on them")
        train_features, labels, val_features = self.cached
        with plan.scope():
            self.head.compile(optimizer=self.model.optimizer, loss=self.model.loss,
                              metrics=[keras_accuracy()],
                              steps_per_execution=self.ready.steps_per_execution,
                              jit_compile=plan.jit_compile)
        data = features.dataset(train_features, labels, len(layout.class_names),
                                plan.global_batch, self.ready.steps, first, phase.end, t.seed,
                                self.class_weights)
        self.own_f1.cached = (self.head, val_features)
        try:
            self.head.fit(data, epochs=phase.end, initial_epoch=first,
                          steps_per_epoch=self.ready.steps,
                          callbacks=[features.OnModel(self.own + self.extra, self.model),
                                     RunProgress(t.epochs), stop_check()],
                          shuffle=False, verbose=verbose)
        finally:
            self.own_f1.cached = None


def _median_and_first(ends: list, start: float, settle: int = 0) -> tuple[float, float]:
    """(the median seconds between consecutive `ends` after the first `settle`, the first's
    beyond that since `start`): a call's time and its first call's tracing. The median: a busy
    moment is not a rule."""
    calls = sorted(b - a for a, b in list(zip(ends, ends[1:]))[settle:])
    median = calls[len(calls) // 2]
    return median, max(ends[0] - start - median, 0.0)


def keras_accuracy():
    """The accuracy metric every compiled model reports (one-hot labels)."""
    import keras

    return keras.metrics.CategoricalAccuracy(name="accuracy")


def _save(model, saved, final: BackupState, model_path: Path, backup_dir: Path, run_dir,
          run_id: str, log) -> TrainResult:
    """last.keras, then model.keras (the best epoch's, or the last), then the backup goes.
    Every worker saves (saving may read mirrored variables collectively); only the chief's copy
    is the run's. The backup goes only once the model is safely written; model.keras last of
    all (it marks the run trained)."""
    from corolla.training.checkpoint import load_model_weights
    from corolla.training.optimizer import finalize_ema

    finalize_ema(model)  # (what fit did already, unless no epoch was left to train)

    def write(model, path: Path) -> None:  # the model, marked as this run's (runs.identity)
        with files.atomic_path(path) as tmp:
            model.save(tmp)
            identity.stamp(tmp, run_id, model.input_shape[1] or 0)

    write(saved, model_path.with_name(paths.LAST))
    last_epoch = final.epochs_done - 1
    if final.best is not None and final.best_epoch != last_epoch:
        log(f"model.keras: epoch {final.best_epoch + 1} (val macro F1 {final.best_f1:.4f}, "
            f"the best); last.keras: epoch {last_epoch + 1}")
        best = backup_dir / final.best
        if best.suffix == ".keras":  # a backup from before bests were weights alone
            with files.atomic_path(model_path) as tmp:
                shutil.copyfile(best, tmp)
                identity.stamp(tmp, run_id, saved.input_shape[1] or 0)
        else:
            load_model_weights(saved, best)
            write(saved, model_path)
        result = None  # the caller loads the best model from the run
    else:
        result = saved
        write(result, model_path)
    shutil.rmtree(backup_dir, ignore_errors=True)
    history = {k: [row.get(k) for row in final.history] for row in final.history for k in row}
    return TrainResult(run_dir=run_dir, model=result, history=history)


def _plan_time(trainer: _Trainer, val_split, began: float, log) -> config_lib.RunConfig:
    """The run's config fitted to its time budget (`budget`): measured by the probe, at the
    largest input size that leaves the recipe train.time_min_epochs (else the smallest it
    allows), its epochs and steps per epoch (`budget.fill`), with the plan's line in
    train.time_plan; a budget too short for one epoch is an error naming the least that would
    do."""
    config = trainer.ready.config
    t, steps = config.train, trainer.ready.steps
    total = config_lib.duration_seconds(t.time_budget)
    costs = budget.Costs()

    def phases_of(train, size):
        return phases(train, config.model.train_backbone, size)

    # Frozen phases on cached features (`_Trainer._fast`): passes over the training images.
    fast = (t.frozen_epochs or not config.model.train_backbone) and \
        trainer._fast(Phase(0, 1, True), say=False)
    # A shortened epoch's steps stay whole executions and accumulations (`_epoch_steps`).
    unit = math.lcm(trainer.ready.steps_per_execution, t.accumulation_steps)
    batch = trainer.plan.inference_batch
    caching = budget.Caching("flip" in config.data.augment,
                             -(-trainer.ready.layout.split("train").count // batch),
                             -(-val_split.count // batch)) if fast else None

    def fitted(size, measure=True):
        sized = config_lib.apply(config, {"model.input_size": size})
        if measure:
            # Every kind any number of epochs may hold: each size of the ramp, frozen or not.
            ramp = (size - t.start_size) // budget.SIZE_STEP + 2 if t.start_size else 1
            every = dataclasses.replace(sized.train, epochs=max(t.epochs, ramp),
                                        size_ramp_start=0.0, size_ramp_end=1.0)
            trainer.measure(budget.kinds(phases_of(every, size), size), costs, size, val_split,
                            cached=bool(caching))
        known = costs if measure else budget.scaled(costs, sizes[0], size)
        left = budget.MARGIN * (total - (time.monotonic() - began))
        return (sized, *budget.fill(sized, phases_of, known, left, steps, caching, unit))

    # Several processes must agree on the plan: they all probe (the probe's steps are
    # collective), at the recipe's size alone, and take the chief's epochs and steps.
    multi = trainer.plan.multi_worker
    sizes = [config.model.input_size] if multi else budget.candidates(config)
    sized, epochs, epoch_steps, estimate = fitted(sizes[0])
    size = sizes[0]
    # Fewer epochs than the recipe wants: the size where they fit, chosen on the costs
    # estimated by the pixels, then measured there.
    for size in sizes[1:] if epochs < t.time_min_epochs else ():
        if fitted(size, measure=False)[1] >= t.time_min_epochs:
            break
    if size != sizes[0]:
        sized, epochs, epoch_steps, estimate = fitted(size)
    if multi:
        epochs, epoch_steps = (int(collective.chief_hex(trainer.plan, f"{n:x}"), 16)
                               for n in (epochs, epoch_steps))
    spent = time.monotonic() - began
    if not epochs:
        raise budget.too_short(t.time_budget, spent, estimate, t.recipe)
    note = "" if size == sizes[0] else \
        f", at {size} px (at {sizes[0]} px fewer than the {t.time_min_epochs} epochs wanted)"
    if epoch_steps != steps:
        note += f", {epoch_steps} steps each (of {steps}: one epoch more in the time whole " \
            f"ones left)"
    log("time probe: " + ", ".join(
        [f"frozen features cached at {at} px {costs.cache[at]:.3g} s a batch of {batch}"
         f" (+{costs.cache_first[at]:.0f} s tracing)" for at in sorted(costs.cache)] +
        [f"{'frozen' if frozen else 'trained'} {at} px {costs.step[(frozen, at)]:.3g} s a step"
         f" (+{costs.first[(frozen, at)]:.0f} s tracing)" for frozen, at in sorted(costs.step)])
        + ", validation " + ", ".join(f"{v:.1f} s at {at} px" for at, v in costs.val.items())
        + f", backup {costs.backup:.2f} s")
    line = budget.describe(t.time_budget, epochs, estimate, spent, note)
    log(line)
    return config_lib.apply(sized, {**budget.shaped(t, epochs),
                                    "train.time_steps": epoch_steps * (epoch_steps != steps),
                                    "train.time_plan": line.partition(": ")[2]})


def _log_training(config, plan: Plan, ready: _Prepared, plan_phases, progressive: bool,
                  log) -> None:
    t, size = config.train, config.model.input_size
    _log_recipe(config, log)
    data_size = ready.layout.image_size
    scaled = f" (scaled from the data's {data_size})" if size != data_size else ""
    log(f"training {config.model.name} at {size}x{size}{scaled} on {plan.strategy_name} "
        f"({plan.replicas} replica(s), global batch {plan.global_batch}): "
        f"{t.epochs} epochs x {ready.steps} steps")
    if progressive:
        log("progressive resizing: " + ", ".join(f"{p.size} px in {_epochs(p)}"
                                                 for p in plan_phases))
    elif t.start_size:
        log(f"no progressive resizing: train.start_size {t.start_size} is not below the input "
            f"size {size}, or {t.epochs} epoch(s) leave no room for a ramp")


def _class_weights(config: config_lib.RunConfig, layout):
    """The loss weight of each class (`train.class_weight`), or None; "balanced" reads the
    training split's labels once."""
    from corolla.data import class_weights

    setting = config.train.class_weight
    labels = pipeline.metadata(layout.split("train"), config.data.skip_bad_records)["labels"] \
        if setting == "balanced" else None
    return class_weights.resolve(setting, labels, layout.class_names)


def _epochs(phase: Phase) -> str:
    """A phase's epochs as the log counts them (from 1): "epoch 3" or "epochs 3-5"."""
    if phase.end - phase.start == 1:
        return f"epoch {phase.end}"
    return f"epochs {phase.start + 1}-{phase.end}"


def _log_recipe(config: config_lib.RunConfig, log) -> None:
    t = config.train
    log(f"recipe {t.recipe}: {t.optimizer}, {t.schedule} schedule, peak learning rate "
        f"{t.learning_rate:g}"
        + (f", weight decay {t.weight_decay:g}" if t.weight_decay else "")
        + (f", dropout {config.model.dropout:g}" if config.model.dropout else "")
        + (f", EMA {t.ema_momentum:g}" if t.ema else "")
        + (f", label smoothing {t.label_smoothing:g}" if t.label_smoothing else "")
        + (f", {t.accumulation_steps} batches per update" if t.accumulation_steps > 1 else "")
        + (f", class weight {t.class_weight}" if t.class_weight != "none" else ""))
