"""The time probe of a time budget (`budget`): a few timed training steps of each kind of
epoch, or batches of a frozen phase's caching pass, a validation pass and a backup, measured on
the run's own model, which it leaves as it found it.

Keras and `checkpoint` (which imports it) are imported in the functions: the backend is chosen
first."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from corolla.data import pipeline
from corolla.evaluation.inference import predict_probabilities
from corolla.training import budget
from corolla.training.phases import Phase
from corolla.training.trainer import Trainer


def measure(trainer: Trainer, kinds: set, costs: budget.Costs, final: int, val_split,
            cached: bool) -> None:
    """Times what `costs` lacks: budget.PROBE_STEPS training steps of each kind (frozen, size)
    after its first (with `cached`, a frozen kind's caching pass instead: twice as many batches
    of it), a validation pass at `final` px, a backup. The model's variables are put back
    afterwards: the probe trains nothing."""
    import keras

    from corolla.training.checkpoint import save_backup

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
        trainer.configure(Phase(0, 1, frozen, size=size))
        # Not past the input pipeline's read-ahead, as for the caching pass: a training
        # stream's next steps still wait for tf.data's tuning of its decoding (0.51 s a step
        # there, 0.39 in the epochs after, on a 2-core CPU); these err short by less.
        step, first = timed_batches(
            "on_train_batch_end",
            lambda timer: model.fit(trainer.data(0, size), epochs=1, verbose=0, shuffle=False,
                                    steps_per_epoch=per_call * (1 + budget.PROBE_STEPS),
                                    callbacks=[timer]))
        costs.step[(frozen, size)] = step / per_call
        costs.first[(frozen, size)] = first
    if final not in costs.val:
        costs.val[final] = _seconds(lambda: predict_probabilities(
            model, val_split, final, plan, ready.config.data.skip_bad_records))
    if not costs.backup:
        with tempfile.TemporaryDirectory() as folder:
            costs.backup = _seconds(lambda: save_backup(model, Path(folder) / "probe.npz"))
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
        settle=budget.PROBE_STEPS)


def timed_batches(hook: str, call, settle: int = 0) -> tuple[float, float]:
    """`call(timer)` (a Keras fit or predict given the callback `timer`) timed at every batch's
    end (`hook`: "on_train_batch_end", "on_predict_batch_end"): `median_and_first` of those
    times, from just before the call."""
    import keras

    ends = []
    timer = keras.callbacks.LambdaCallback(
        **{hook: lambda batch, logs: ends.append(time.monotonic())})
    start = time.monotonic()
    call(timer)
    return median_and_first(ends, start, settle=settle)


def median_and_first(ends: list, start: float, settle: int = 0) -> tuple[float, float]:
    """(the median seconds between consecutive `ends` after the first `settle`, the first's
    beyond that since `start`): a call's time and its first call's tracing. The median: a busy
    moment is not a rule."""
    calls = sorted(b - a for a, b in list(zip(ends, ends[1:]))[settle:])
    median = calls[len(calls) // 2]
    return median, max(ends[0] - start - median, 0.0)


def _seconds(call) -> float:
    start = time.monotonic()
    call()
    return time.monotonic() - start
