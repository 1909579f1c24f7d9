"""The fit loop: the run's model built, compiled per phase, fed per phase (`TrainingStream`;
on cached features where a frozen phase can be: `features.FrozenPath`, which in a timed run
first fits the linear head there; the backbone's top on its frozen lower part's cached outputs
where a trained phase can be: `thawed.ThawedPath`), with Corolla's callbacks.

Keras and the modules that import it (callbacks, checkpoint, features, thawed) are imported in
the methods: the backend is chosen first."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from corolla.config import RunConfig
from corolla import models
from corolla.data.class_weights import class_weights_for
from corolla.data.layout import Layout
from corolla.data import pipeline
from corolla.scoring.batched import stop_check
from corolla.runs import paths
from corolla.runtime import Plan
from corolla.training import backup, linear_head, resuming
from corolla.training.timing import budget
from corolla.runtime.clock import Clock, default_clock
from corolla.training.compiling import compile_phase, phase_schedule
from corolla.training.optimizer import finalize_ema
from corolla.training.phases import (Phase, backbone_of, batchnorm_inference, epochs_text,
                                     optimizer_start, split_at)
from corolla.training.preparing import Prepared

if TYPE_CHECKING:
    from corolla.training.checkpoint import Checkpoint


class Trainer:
    """The model of a run (`ready`) through its phases. `extra_callbacks` are added to
    Corolla's own. `clock`: what its time budget reads (`clock.Clock`; the host's by default)."""

    def __init__(self, ready: Prepared, plan: Plan, log, extra_callbacks=(),
                 clock: Clock | None = None):
        from corolla.training.features import FrozenPath
        from corolla.training.thawed import ThawedPath

        self.ready, self.plan, self.log = ready, plan, log
        self.clock = clock or default_clock()
        self.extra = list(extra_callbacks)
        config, t = ready.config, ready.config.train
        # A time budget not yet planned (a resumed run continues the plan its config holds): the
        # model may train at other sizes than the recipe's (a ramp over other epochs, a smaller
        # input size), so it is built to take any.
        self.any_size = ready.progressive or (ready.to_plan and (
            bool(t.start_size) or len(budget.candidates(config)) > 1))
        with plan.scope():
            self.model = self.build()
        # In inference mode, BatchNorm layers stay frozen in trained phases (`phases.freeze`).
        self.frozen_bn = batchnorm_inference(config) and config.model.train_backbone
        self.backbone = backbone_of(self.model) if config.model.train_backbone and \
            (t.frozen_epochs or self.frozen_bn or t.unfreeze_fraction < 1) else None
        self.current: Phase | None = None
        self.own: list = []  # Corolla's callbacks, with their checkpoint and val F1: `callbacks`
        self.checkpoint, self.val_f1 = None, None
        self.stop_in_time = None  # `timing.stop.StopInTime`, where a plan made here stops
        self.first_data = None  # the stream the run starts (or resumes) with: `start`
        self.stream = TrainingStream(config, ready.layout, plan, log)
        self.frozen = FrozenPath(self.model, plan, config.data.augment, log)
        self.thawed = ThawedPath(self.model, self.backbone, plan, config, self.frozen_bn, log)

    def build(self):
        """A new model of the run (`models.create_model`), at its input size."""
        config = self.ready.config
        return models.create_model(config.model.name, len(self.ready.layout.class_names),
                                   config.model.input_size, config.model.weights,
                                   config.model.train_backbone, dropout=config.model.dropout,
                                   any_size=self.any_size)

    def adopt_plan(self, ready: Prepared) -> None:
        """Trains as `ready` (this run's, with a time plan's settings) says from now on."""
        self.ready = ready
        self.thawed.config = ready.config
        if self.stop_in_time is not None:
            self.stop_in_time.deadline = ready.deadline

    def reschedule(self) -> None:
        """The optimizer, its state kept, on the schedule the run's config says now (a time
        plan made again: other epochs), its training step traced again (the schedule's rates
        are constants of the compiled step)."""
        with self.plan.scope():
            self.model.optimizer.learning_rate = phase_schedule(
                self._from_optimizer_start(self.current), self.ready.config.train,
                self.ready.steps, self.ready.later_steps)
            self.model.make_train_function(force=True)

    def saved_model(self):
        """What the run saves: the model at its input size (the same layers and weights)."""
        with self.plan.scope():
            return models.at_size(self.model, self.ready.config.model.input_size) \
                if self.any_size else self.model

    def data(self, first_epoch: int, size: int):
        """The training stream from `first_epoch` at `size` px (`TrainingStream.at`)."""
        return self.stream.at(first_epoch, size, self.ready.steps_at(first_epoch))

    def configure(self, phase: Phase, schedule=None, train=None) -> None:
        """The model compiled for `phase`: backbone frozen or not, a fresh optimizer whose
        schedule continues from the phase's first epoch (or, for the range test, on
        `schedule`, with the optimizer settings of `train`)."""
        with self.plan.scope():
            self._compile(self.model, self.backbone, phase, schedule, train)
        self.current = phase

    def _compile(self, model, backbone, phase: Phase, schedule=None, train=None) -> None:
        ready = self.ready
        compile_phase(model, backbone, self._from_optimizer_start(phase), self.plan,
                      train or ready.config.train, ready.steps, ready.steps_per_execution,
                      self.frozen_bn, schedule, ready.later_steps)

    def _from_optimizer_start(self, phase: Phase) -> Phase:
        """`phase` from its optimizer's first epoch (`phases.optimizer_start`): the schedule
        counts from there, as does the optimizer's step a backup restores."""
        return dataclasses.replace(phase, start=optimizer_start(self.ready.phases, phase.start))

    def start(self) -> None:
        """Ready to fit, before the run's folder is made (a pipeline that cannot be built
        leaves no run behind): the stream the run starts or resumes with, and the model
        compiled for the phase that saved the backup (its optimizer holds the backed-up
        state)."""
        done, plan_phases = self.ready.state.epochs_done, self.ready.phases
        resumed = next((p for p in plan_phases if p.end > done), plan_phases[-1])
        self.first_data = self.data(done, resumed.size)
        self.configure(next(p for p in plan_phases if p.end > max(done - 1, 0)))

    def callbacks(self, run_dir: Path | None, backup_dir: Path, saved, val: tuple | None,
                  began: float, tracker=None, history: Path | None = None) -> Checkpoint:
        """Corolla's own callbacks; returns their checkpoint, whose state says what was trained
        (and, from `began`, in how long). `val`: (the val split, its labels), validated after
        every epoch; None for a refit (`refit`), which trains on them, and whose `history`
        goes to its own file (no TensorBoard's). `tracker`: the run's experiment tracker
        (`runs.tracking`), sent each epoch once it is committed."""
        from corolla.training.callbacks import EpochTensorBoard, SwapEMA, TrackEpochs, ValMacroF1
        from corolla.training.checkpoint import Checkpoint
        from corolla.training.timing.stop import StopInTime

        config, plan = self.ready.config, self.plan
        t = config.train
        # Validation and the best model use the EMA weights.
        swap = SwapEMA() if t.ema else None
        checkpoint = Checkpoint(backup_dir, self.ready.state,
                                (history or run_dir / paths.HISTORY) if plan.is_chief else None,
                                swap=swap, patience=t.early_stopping_patience, log=self.log,
                                saved=saved, chiefs_file=self.ready.chiefs_file, began=began,
                                clock=self.clock,
                                frozen_epochs=frozenset(e for p in self.ready.phases if p.frozen
                                                        for e in range(p.start, p.end)))
        self.val_f1 = None if val is None else \
            ValMacroF1(val[0], config.model.input_size, val[1], plan, swap,
                       config.data.skip_bad_records)
        # F1 first: the checkpoint records it and keeps the best epoch.
        self.own = [checkpoint] if val is None else [self.val_f1, checkpoint]
        if swap is not None:
            self.own.insert(0, swap)
        if plan.is_chief and val is not None:
            self.own.append(EpochTensorBoard(str(run_dir / paths.LOGS), write_graph=False))
        if tracker is not None:
            self.own.append(TrackEpochs(tracker, checkpoint))
        if self.ready.deadline is not None:
            self.stop_in_time = StopInTime(self.ready.deadline, checkpoint, plan,
                                           t.time_budget, self.log, self.clock)
            self.own.append(self.stop_in_time)
        self.checkpoint = checkpoint
        self.thawed.folder = backup_dir  # the lower part's outputs past the memory bound
        return checkpoint

    def restore(self, checkpoint: Checkpoint) -> None:
        """The backup of `checkpoint` restored into the model and its optimizer: this
        process's own, or on every process the chief's (`resuming.restore`)."""
        resuming.restore(self.model, checkpoint, self.plan, self.ready.from_chief, self._twin)

    def _twin(self):
        """Another model built and compiled as the model is now."""
        twin = self.build()
        self._compile(twin, backbone_of(twin) if self.backbone is not None else None,
                      self.current)
        return twin

    def fit_phases(self, until: int = 0) -> bool:
        """Fits every phase not yet trained (or until early stopping), or (`until`) up to that
        epoch, counted from 1: whether it stopped there with epochs still to train."""
        from corolla.training.callbacks import RunProgress

        t = self.ready.config.train
        verbose = (1 if sys.stdout.isatty() else 2) if self.plan.is_chief else 0
        # Epochs of other steps from train.time_steps_from: each length a `fit` of its own.
        starts, said = {p.start for p in self.ready.phases}, False
        for phase in split_at(self.ready.phases, self.ready.config.train.time_steps_from):
            done = self.checkpoint.state.epochs_done
            if phase.end <= done or backup.stops_early(self.checkpoint.state,
                                                       t.early_stopping_patience):
                continue
            if until and done >= until:
                return True
            end = min(phase.end, until) if until else phase.end
            if not phase.same_optimizer(self.current):
                # The model enters the phase as a finished one leaves it: on its EMA weights.
                finalize_ema(self.model)
                thawing = self.current is not None and self.current.frozen and not phase.frozen
                if thawing and t.thaw_from_head:
                    self.thaw_from_head()
                self.configure(phase)
            self.current = phase
            if phase.start in starts or not said:  # a split's second half goes on silently
                self._say(phase)
                said = True
            first = max(done, phase.start)
            steps = self.ready.steps_at(first)
            if self.frozen.usable(phase):
                # A timed run starts from the linear head, its floor (`linear_head`).
                self.frozen.fit(phase, first, self.ready, steps, self.val_f1,
                                self.own + self.extra, self.stream.class_weights, verbose,
                                self.checkpoint if t.time_budget else None)
            elif self.thawed.usable(phase):
                self.thawed.fit(phase, first, end, self.ready, steps, self.own + self.extra,
                                self.stream.class_weights, verbose)
            else:
                data = self.first_data if first == self.ready.state.epochs_done else \
                    self.data(first, phase.size)
                self.model.fit(data, epochs=end,
                               initial_epoch=first, steps_per_epoch=steps,
                               callbacks=self.own + self.extra + [RunProgress(t.epochs),
                                                                  stop_check()],
                               shuffle=False, verbose=verbose)
            if self.model.stop_training:
                break
        done = self.checkpoint.state.epochs_done
        return bool(until) and done >= until and not self.model.stop_training and \
            done < self.ready.config.train.epochs

    def thaw_from_head(self) -> None:
        """The linear head put back into the model's classifier before its backbone thaws
        (`train.thaw_from_head`): the one this session fit (`FrozenPath.linear`), or a resumed
        run's, where its backup holds it as the best so far (the backbone was frozen since:
        its weights are the model's own). Nothing where the run fit none (a frozen phase not
        on cached features, or an untimed run)."""
        state = self.checkpoint.state
        if self.frozen.linear is not None:
            with self.plan.scope():
                linear_head.put(self.model, *self.frozen.linear)
            said = "the linear head it fit"
        elif state.linear_head is not None and state.best_epoch == backup.LINEAR_HEAD:
            with self.plan.scope():
                backup.load_model_weights(self.saved_model(),
                                          self.checkpoint.backup_dir / state.best)
            said = "the linear head its backup holds"
        else:
            return
        self.log(f"the backbone thaws from {said}, not from the epochs that trained the head "
                 f"after it")

    def _say(self, phase: Phase) -> None:
        """The phase's line in the log: what it trains, at which rate and size."""
        t, progressive = self.ready.config.train, self.ready.progressive
        if self.backbone is not None:
            trained = "trained" if t.unfreeze_fraction == 1 else \
                f"trained (its top {t.unfreeze_fraction:.0%})"
            self.log(f"{epochs_text(phase)}: backbone "
                     f"{'frozen' if phase.frozen else trained}, learning rate x "
                     f"{phase.lr_scale:g}" + (f", {phase.size} px" if progressive else ""))
        elif progressive:
            self.log(f"{epochs_text(phase)} at {phase.size} px")


def class_weights(config: RunConfig, layout: Layout):
    """The loss weight of each class (`train.class_weight`), or None; "balanced" reads the
    training split's labels once."""
    setting = config.train.class_weight
    labels = pipeline.metadata(layout.split("train"), config.data.skip_bad_records)["labels"] \
        if setting == "balanced" else None
    return class_weights_for(setting, labels, layout.class_names)


class TrainingStream:
    """The training data stream of a run: the training split of `layout` as the run's data
    settings (`config.data`, train.seed, train.deterministic) feed it, each epoch drawn as
    itself from any first epoch (a resumed run's stream continues where an uninterrupted one
    would be), at a phase's image size, with the run's augmentation, caching and class
    weights."""

    def __init__(self, config: RunConfig, layout: Layout, plan: Plan,
                 log):
        self.config, self.layout, self.plan, self.log = config, layout, plan, log
        self.class_weights = class_weights(config, layout)
        self.said_no_cache = False

    def at(self, first_epoch: int, size: int, steps: int):
        """The stream from `first_epoch` at `size` px, epochs of `steps` steps: one per `fit`
        (each iterates its dataset from the start), epoch k drawn as k. Each process reads,
        decodes and consumes only its own share of every global batch (`Plan.process_batch`)."""
        config, plan, t = self.config, self.plan, self.config.train
        split = self.layout.split("train")
        cache = config.data.cache
        if cache:  # each process keeps its own share of the split
            cache, need, budget = pipeline.cache_fits(split.count // plan.num_processes, size)
            if not cache and not self.said_no_cache:  # once: later phases are larger
                self.log(f"data.cache: the training images decoded at {size} px would take "
                         f"{need:.1f} GB, over {pipeline.CACHE_SHARE:.0%} of this host's "
                         f"memory ({budget:.1f} GB): decoded every epoch instead")
                self.said_no_cache = True
        return pipeline.train_dataset(
            split, size, plan.input_batch, epoch_examples=steps * plan.process_batch,
            first_epoch=first_epoch, seed=t.seed, augment=config.data.augment,
            cache=cache, shuffle_buffer=config.data.shuffle_buffer,
            ordered=t.deterministic, shard=plan.input_shard,
            skip_bad_records=config.data.skip_bad_records,
            num_classes=len(self.layout.class_names), class_weights=self.class_weights)
