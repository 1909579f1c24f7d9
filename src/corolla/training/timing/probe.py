"""The time probe of a time budget (`budget`): a few timed training steps of each kind of
epoch, or batches of a frozen phase's caching pass, a validation pass and a backup, measured on
the run's own model, which it leaves as it found it, on the run's clock (`Trainer.clock`).

Keras and `checkpoint` (which imports it) are imported in the functions: the backend is chosen
first."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from corolla.data import pipeline
from corolla.scoring.batched import predict_probabilities, split_batches
from corolla.runs import paths
from corolla.training.timing import budget
from corolla.training.backup import BackupState
from corolla.training.compiling import compile_head
from corolla.training.phases import Phase
from corolla.training.trainer import Trainer


def measure(trainer: Trainer, kinds: set, costs: budget.Costs, final: int, val_split,
            cached: bool) -> None:
    """Times what `costs` lacks: budget.PROBE_STEPS training steps of each kind (frozen, size)
    after its first, over two epochs (`_time_steps`; with `cached`, a frozen kind's caching
    pass instead: twice as many batches of it), a validation pass at `final` px
    (`_time_validation`), an epoch's commit (`_time_commit`). The model's variables are put
    back afterwards: the probe trains nothing."""
    import keras

    model, plan, ready = trainer.model, trainer.plan, trainer.ready
    kept = [keras.ops.convert_to_numpy(v) for v in model.variables]
    per_call = ready.steps_per_execution
    for frozen, size in sorted(kinds):
        if frozen and cached:
            if size not in costs.cache:
                _time_caching(trainer, size, costs)
            continue
        if (frozen, size) in costs.step:
            continue
        phase = Phase(0, 1, frozen, size=size)
        trainer.configure(phase)
        if trainer.thawed.usable(phase, say=False):
            _time_thawed(trainer, size, per_call, costs)
        else:
            _time_steps(trainer, (frozen, size), per_call, costs)
    if final not in costs.val:
        _time_validation(trainer, val_split, final, costs)
    if not costs.backup:
        if model.optimizer is None:  # only cached frozen kinds: the first phase's optimizer
            frozen, size = min(kinds)
            trainer.configure(Phase(0, 1, frozen, size=size))
        _time_commit(model, costs, trainer.clock)
    with plan.scope():
        for variable, value in zip(model.variables, kept):
            variable.assign(value)


def _time_caching(trainer: Trainer, size: int, costs: budget.Costs) -> None:
    """Times batches of the frozen features' caching pass over the training images at `size`
    px (the run's own extractor: the run pays no tracing again)."""
    ready = trainer.ready
    ds = pipeline.eval_dataset(ready.layout.split("train"), size, trainer.plan.inference_batch,
                               skip_bad_records=ready.config.data.skip_bad_records)
    # Twice the batches, the first half's not counted: while the first one traces, the input
    # pipeline decodes the next ones ahead, and a batch it need not wait for is cheaper than
    # one of the pass, where decoding and the model share the CPU. (The extractor's making,
    # the first time, counts with the tracing.)
    costs.cache[size], costs.cache_first[size] = timed_batches(
        "on_predict_batch_end",
        lambda timer: trainer.frozen.halves()[0].predict(
            ds.repeat(), steps=1 + 2 * budget.PROBE_STEPS, verbose=0, callbacks=[timer]),
        trainer.clock, settle=budget.PROBE_STEPS)


def _time_thawed(trainer: Trainer, size: int, per_call: int, costs: budget.Costs) -> None:
    """Times a trained phase on its lower part's cached outputs (`thawed.ThawedPath`): batches
    of the caching pass at `size` px as for the frozen features' (`costs.thawed_cache`: the
    whole pass over every view of the training images, its tracing included), then the top's
    steps on those batches' outputs, fed as the run feeds them (`_time_steps`)."""
    from corolla.training.thawed import ViewCache

    ready, plan, clock = trainer.ready, trainer.plan, trainer.clock
    lower, top = trainer.thawed.halves()
    split = ready.layout.split("train")
    ds = pipeline.eval_dataset(split, size, plan.inference_batch,
                               skip_bad_records=ready.config.data.skip_bad_records)
    outputs = []
    batch, first = timed_batches(
        "on_predict_batch_end",
        lambda timer: outputs.append(lower.predict(ds.repeat(), steps=1 + 2 * budget.PROBE_STEPS,
                                                   verbose=0, callbacks=[timer])),
        clock, settle=budget.PROBE_STEPS)
    views = 2 if "flip" in ready.config.data.augment else 1
    costs.thawed_cache[size] = views * -(-split.count // plan.inference_batch) * batch + first
    (outputs,) = outputs
    table = ViewCache(1, len(outputs), outputs.shape[1:], outputs.dtype, float("inf"), None)
    table.table[0] = outputs
    classes = len(ready.layout.class_names)
    with plan.scope():
        compile_head(top, trainer.model, plan, ready.steps_per_execution)
    calls = 1 + budget.PROBE_STEPS // 2
    data = table.batches(np.zeros(len(outputs), int), classes, plan.global_batch,
                         per_call * calls, 0, 2, seed=0)
    _time_steps(trainer, (False, size), per_call, costs, top, data)


def _time_steps(trainer: Trainer, kind: tuple, per_call: int, costs: budget.Costs,
                model=None, data=None) -> None:
    """Times training steps of `kind` (frozen, size) over two epochs of a stream of their
    steps, as the run's stream has them: a step (`costs.step`: the median, the first epoch's
    first left out), the first's tracing beyond that (`costs.first`), and what an epoch's
    first step pays beyond a step (`costs.epoch`: Keras' epoch boundary, and the stream's next
    epoch, its own shuffle, begun where it was not read ahead). Not past the input pipeline's
    read-ahead, as for the caching pass: a training stream's next steps still wait for
    tf.data's tuning of its decoding (slower than the epochs after it); these err short.
    `model` and `data`: another model trained on another stream than the trainer's (its model
    on its stream)."""
    size = kind[1]
    model = model or trainer.model
    calls = 1 + budget.PROBE_STEPS // 2  # executions an epoch; the steady ones: PROBE_STEPS
    steps = per_call * calls
    ends, clock = [], trainer.clock
    timer = _timer("on_train_batch_end", ends, clock)
    start = clock.now()
    data = data if data is not None else trainer.stream.at(0, size, steps)
    model.fit(data, epochs=2, verbose=0, shuffle=False,
              steps_per_epoch=steps, callbacks=[timer])
    between = [b - a for a, b in zip(ends, ends[1:])]
    boundary = between.pop(calls - 1)  # from the first epoch's last call to the second's first
    step = _median(between)
    costs.step[kind] = step / per_call
    costs.first[kind] = max(ends[0] - start - step, 0.0)
    costs.epoch[kind] = max(boundary - step, 0.0)


def _time_commit(model, costs: budget.Costs, clock) -> None:
    """Times an epoch's commit as the run's checkpoint makes it (`costs.backup`): the model's
    and optimizer's backup, a best epoch's model, the state and history.csv, written into a
    folder of its own (the backup alone is well short of the whole commit); and the final save
    (`costs.save`)."""
    from corolla.training.callbacks import VAL_F1
    from corolla.training.checkpoint import Checkpoint

    with tempfile.TemporaryDirectory() as folder:
        checkpoint = Checkpoint(Path(folder), BackupState(), Path(folder) / paths.HISTORY,
                                log=lambda *args: None, clock=clock)
        checkpoint.set_model(model)
        costs.backup = _seconds(lambda: checkpoint.on_epoch_end(0, {"loss": 1.0, VAL_F1: 0.5}),
                                clock)
        # The final save writes the whole model twice (`saving.save`): counted as a commit, a
        # two-worker run beside a busy chief ended at 103% of its budget.
        costs.save = 2 * _seconds(lambda: model.save(Path(folder) / "final.keras"), clock)


def _time_validation(trainer: Trainer, val_split, final: int, costs: budget.Costs) -> None:
    """Times the val pass at `final` px batch by batch: what every epoch's pass costs
    (`costs.val`: the median batch times the batches) apart from what only a phase's first pays
    beyond that (`costs.val_first`: tracing the predict function, which each phase's compile
    drops; a GPU's compile can take many times a warm pass, and a plan that charged it every
    epoch gave a budget's epochs to nothing). A split of one batch is predicted twice, the
    second pass timing the first's batch. Its batches are kept as the run's val F1 keeps them
    (decoded once): the first pass's decoding counts as steady time, erring short."""
    plan, skip = trainer.plan, trainer.ready.config.data.skip_bad_records
    batches = split_batches(val_split, final, skip)
    count = -(-val_split.count // plan.inference_batch)

    def passes(timer):
        for _ in range(1 if count > 1 else 2):
            predict_probabilities(trainer.model, val_split, final, plan, skip, batches=batches,
                                  callbacks=[timer])

    batch, costs.val_first[final] = timed_batches("on_predict_batch_end", passes,
                                                  trainer.clock)
    costs.val[final] = batch * count


def timed_batches(hook: str, call, clock, settle: int = 0) -> tuple[float, float]:
    """`call(timer)` (a Keras fit or predict given the callback `timer`) timed on `clock` at
    every batch's end (`hook`: "on_train_batch_end", "on_predict_batch_end"):
    `median_and_first` of those times, from just before the call."""
    ends = []
    timer = _timer(hook, ends, clock)
    start = clock.now()
    call(timer)
    return median_and_first(ends, start, settle=settle)


def _timer(hook: str, ends: list, clock):
    """A Keras callback that appends the time on `clock` at each `hook` to `ends`."""
    import keras

    return keras.callbacks.LambdaCallback(
        **{hook: lambda batch, logs: ends.append(clock.now())})


def _median(values) -> float:
    return sorted(values)[len(values) // 2]


def median_and_first(ends: list, start: float, settle: int = 0) -> tuple[float, float]:
    """(the median seconds between consecutive `ends` after the first `settle`, the first's
    beyond that since `start`): a call's time and its first call's tracing. The median: a busy
    moment is not a rule."""
    median = _median([b - a for a, b in list(zip(ends, ends[1:]))[settle:]])
    return median, max(ends[0] - start - median, 0.0)


def _seconds(call, clock) -> float:
    start = clock.now()
    call()
    return clock.since(start)
