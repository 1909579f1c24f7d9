"""`corolla bench data` and `corolla bench train`: how fast the input pipeline is, against JPEG
decoding and against the model it feeds.

Both measure side by side in one run, in alternating rounds, and report medians: a host shared
with other work slows every figure, the ratio much less. Each measurement makes a fresh iterator,
warms it up, then times a fixed number of batches (a prefetched buffer filled while the other
pipeline ran would flatter it otherwise).
"""

from __future__ import annotations

import statistics
import time

from corolla.config.flags import Given
from corolla.config import load_config
from corolla import models, runtime
from corolla.config import policies


def _rate(make, batches: int, warmup: int, batch: int) -> float:
    """Images (or steps, with batch=1) per second of a fresh iterator over `make()`."""
    it = iter(make())
    for _ in range(warmup):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    elapsed = time.perf_counter() - start
    del it
    return batches * batch / elapsed


def decode_only(split, image_size: int, batch: int):
    """(a): the training pipeline's parse + decode stage alone, as fast as it goes: records
    batched, parsed and decoded (uint8), no shuffle, augmentation or cast."""
    import tensorflow as tf

    from corolla.data import pipeline

    return pipeline.record_stream(split, ordered=False).repeat().batch(batch).map(
        lambda r, p, i: pipeline.decode_batch(r, p, i, image_size, features=split.features,
                                              stored_size=split.stored_size),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=False).prefetch(tf.data.AUTOTUNE)


def data(path: str, image_size: int = 0, batch_size: int = 128, augment="default",
         batches: int = 30, warmup: int = 5, rounds: int = 3, log=print,
         label: str = "--augment") -> dict:
    """Images/s of (a) parse+decode and (b) the training pipeline with `augment` (a policy or
    names; `label` names the setting in errors), and b/a."""
    from corolla.data.layout import open_layout
    from corolla.data import pipeline

    names = policies.resolve(augment, label)
    layout = open_layout(path, image_size, 192)
    split, size = layout.split("train"), layout.image_size
    batch = min(batch_size, split.count)
    log(f"{split.count} training images at {size}x{size} in {layout.size_dir}; batch {batch}; "
        f"augmentation: {', '.join(names) or 'none'}; {rounds} rounds of {batches} batches "
        f"after {warmup} to warm up, medians")

    def training():
        return pipeline.train_dataset(split, size, batch, epoch_examples=batch * 1000,
                                      augment=names, num_classes=len(layout.class_names))

    rates = {"decode": [], "train": []}
    for _ in range(rounds):
        rates["decode"].append(_rate(lambda: decode_only(split, size, batch), batches, warmup,
                                     batch))
        rates["train"].append(_rate(training, batches, warmup, batch))
    a, b = (statistics.median(rates[k]) for k in ("decode", "train"))
    ratios = [t / d for d, t in zip(rates["decode"], rates["train"])]
    log(f"parse+decode       {a:8.0f} images/s  (rounds: "
        f"{', '.join(f'{r:.0f}' for r in rates['decode'])})")
    log(f"training pipeline  {b:8.0f} images/s  (rounds: "
        f"{', '.join(f'{r:.0f}' for r in rates['train'])})")
    ratio = statistics.median(ratios)
    log(f"ratio={ratio:.2f}")
    return {"decode": a, "train": b, "ratio": ratio}


def train(config, plan, steps: int = 20, rounds: int = 3, log=print) -> dict:
    """Steps/s of the model fed by the real training pipeline against the same model fed one
    cached batch over and over (what it could do if input were free), and the verdict."""
    import keras
    import tensorflow as tf

    from corolla.data import pipeline
    from corolla.training import compiling, settings

    config, layout = settings.resolve(config, plan)
    size, t = config.model.input_size, config.train
    classes = len(layout.class_names)
    real = pipeline.train_dataset(
        layout.split("train"), size, plan.global_batch, epoch_examples=plan.global_batch * 1000,
        seed=t.seed, augment=config.data.augment, cache=config.data.cache,
        shuffle_buffer=config.data.shuffle_buffer, num_classes=classes)
    one = next(iter(real))
    cached = tf.data.Dataset.from_tensors(one).repeat()
    with plan.scope():
        model = models.create_model(config.model.name, classes, size, config.model.weights,
                                    config.model.train_backbone)
        compiling.compile_model(model, plan, t.learning_rate, 1, train=t)
    log(f"{config.model.name} at {size}x{size}, global batch {plan.global_batch} on "
        f"{plan.strategy_name}; augmentation: {', '.join(config.data.augment) or 'none'}; "
        f"{rounds} epochs of {steps} steps after one to warm up, medians")

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.start)

    def rates_of(ds):
        # One fit, one iterator: a fit per round would start the pipeline again (its shuffle
        # buffer refilled) and time that too. Epoch 0 warms up (tracing, buffers).
        clock = Clock()
        model.fit(ds, epochs=rounds + 1, steps_per_epoch=steps, verbose=0, callbacks=[clock])
        return [steps / seconds for seconds in clock.seconds[1:]]

    rates = {"real": rates_of(real), "cached": rates_of(cached)}
    r, c = statistics.median(rates["real"]), statistics.median(rates["cached"])
    log(f"real pipeline      {r:8.2f} steps/s  ({r * plan.global_batch:.0f} images/s)")
    log(f"one cached batch   {c:8.2f} steps/s  ({c * plan.global_batch:.0f} images/s)")
    share = r / c
    if share < 0.95:
        verdict = (f"input-bound: the model could take {c / r:.2f}x the steps it gets "
                   f"({(1 - share) * 100:.0f}% of its time waiting for data)")
    else:
        verdict = (f"not input-bound: the pipeline keeps up ({share * 100:.0f}% of the cached "
                   f"batch's speed)")
    log(f"verdict: {verdict}")
    return {"real": r, "cached": c, "verdict": verdict}


def train_command(given: Given, steps: int = 20, log=print) -> dict:
    """`corolla bench train`: `train` with the plan these runtime and batch settings get."""
    cfg = load_config(overrides=given.values, labels=given.names)
    plan = runtime.detect_for(cfg)  # first: it picks the Keras backend
    return train(cfg, plan, steps=steps, log=log)
