"""A thawed step's cost, and what training the top on its frozen lower part's cached outputs
saves.

    python benchmarks/thawed_step.py [--weights ../shared/weights/efficientnet_lite0_imagenet]
        [--data ../shared/data/flowers5] [--size 192] [--batch 16] [--fraction 0.5]
        [--steps 20] [--rounds 3] [--epoch-steps 0] [--xla]

When only the backbone's top `--fraction` trains (cpu-finetune's `unfreeze_fraction`) with its
BatchNorm in inference mode, the layers below the lowest trained one compute the same output
for the same input at every epoch: `corolla train` computes it once per view (the image, its
mirror image) and trains the top on it (`training.thawed`). This measures, in one process and
side by side:

- the thawed step as `corolla train` took it before: the whole model, frozen as the trainer
  freezes it (`phases.freeze`), `fit` on uint8 batches at --size (the input pipeline not
  counted);
- the same step of the top alone, on one batch of cached outputs (the same trainable weights);
- the step as `corolla train` takes it now: the top fed by the cache's own batches
  (`thawed.ViewCache.batches`: one view drawn per example);
- the lower part's forward pass (what building the cache costs, per view) and the bytes a view
  holds;
- with --data, an epoch end to end (`--epoch-steps` steps, 0: a pass over the training split):
  before, the whole model on the run's stream (decoding, resizing, the flip); now, the top on
  the cache, whose building (both views of every training image) is timed apart.

The cut is `thawed.clean_cut`'s. Medians of --rounds rounds of --steps steps, the host's load
beside them. --xla compiles the top's step with XLA (off on CPUs by default).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = REPO.parent / "shared" / "weights" / "efficientnet_lite0_imagenet"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--weights", default=str(WEIGHTS))
    p.add_argument("--size", type=int, default=192)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--fraction", type=float, default=0.5, help="the top share that trains")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--classes", type=int, default=5, help="without --data")
    p.add_argument("--data", default="", help="a data folder: an epoch end to end too")
    p.add_argument("--epoch-steps", type=int, default=0)
    p.add_argument("--xla", action="store_true", help="the top's step under XLA")
    return p.parse_args(argv)


def split(model, fraction: float):
    """(the cut's layer name, its preprocessing + lower part, its top on the cut's outputs),
    the model frozen as the trainer freezes a thawed phase."""
    from corolla.training import phases, thawed

    backbone = phases.backbone_of(model)
    phases.freeze(backbone, phases.Phase(start=1, end=2, frozen=False, size=0, lr_scale=1.0),
                  fraction, frozen_bn=True)
    cut = thawed.clean_cut(backbone, fraction)
    if cut is None:
        raise SystemExit("no single tensor crosses below the lowest trained layer")
    lower, top = thawed.split_at(model, backbone, cut)
    return cut[-1][1].operation.name, lower, top


def rates(model, data, steps: int, rounds: int, batch: int, xla: bool = False) -> list:
    """Images/s of each of `rounds` epochs of `steps` steps of `model.fit` on `data` (after one
    epoch that traces), compiled as the run compiles it (Adam)."""
    import keras

    model.compile(optimizer=keras.optimizers.Adam(3e-4), loss="categorical_crossentropy",
                  jit_compile=xla)
    ends = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda e, logs: ends.append(time.perf_counter()),
        on_epoch_end=lambda e, logs: ends.append(time.perf_counter()))
    model.fit(data, epochs=rounds + 1, steps_per_epoch=steps, verbose=0, callbacks=[timer])
    return [batch * steps / (ends[i + 1] - ends[i]) for i in range(2, 2 * rounds + 2, 2)]


def main(argv=None) -> int:
    args = parse_args(argv)
    import tempfile

    import numpy as np
    import tensorflow as tf

    from corolla import models
    from corolla.data import layout as layout_lib
    from corolla.data import pipeline
    from corolla.training import thawed

    load = os.getloadavg()[0]
    layout = layout_lib.open_layout(args.data, 0, args.size) if args.data else None
    classes = len(layout.class_names) if layout else args.classes
    model = models.create_model(f"hub:{args.weights}", classes, args.size,
                                weights="imagenet", dropout=0.2)
    cut, lower, top = split(model, args.fraction)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (args.batch, args.size, args.size, 3), dtype=np.uint8)
    labels = np.eye(classes, dtype="float32")[rng.integers(0, classes, args.batch)]
    many = np.concatenate([images] * args.steps)
    lower.predict(images, verbose=0, batch_size=args.batch)
    start = time.perf_counter()
    outputs = lower.predict(many, verbose=0, batch_size=args.batch)
    forward = len(many) / (time.perf_counter() - start)
    assert len(top.trainable_weights) == len(model.trainable_weights)
    one = tf.data.Dataset.from_tensors
    median = statistics.median
    whole = median(rates(model, one((images, labels)).repeat(), args.steps, args.rounds,
                         args.batch))
    on_cache = median(rates(top, one((outputs[:args.batch], labels)).repeat(), args.steps,
                            args.rounds, args.batch, args.xla))
    table = thawed.ViewCache(2, len(outputs), outputs.shape[1:], outputs.dtype, float("inf"),
                             Path())
    table.table[:] = outputs
    drawn = table.batches(rng.integers(0, classes, len(outputs)), classes, args.batch,
                          args.steps, 0, args.rounds + 1, seed=0)
    as_run = median(rates(top, drawn, args.steps, args.rounds, args.batch, args.xla))
    print(f"{Path(args.weights).name}, {args.size} px, batch {args.batch}, the top "
          f"{args.fraction:.0%} trained; cut after {cut} "
          f"({'x'.join(map(str, outputs.shape[1:]))}, {outputs[0].nbytes / 1024:.0f} KiB a "
          f"view in {outputs.dtype}){', the top under XLA' if args.xla else ''}")
    print(f"{'':48s} {'images/s':>9s} {'ratio':>6s}")
    rows = [("thawed step, the whole model (before)", whole),
            ("thawed step, the top on one cached batch", on_cache),
            ("thawed step, the top as corolla train feeds it", as_run),
            ("the lower part's forward (building the cache)", forward)]
    if layout is not None:
        split_ = layout.split("train")
        steps = args.epoch_steps or split_.count // args.batch
        stream = pipeline.train_dataset(split_, args.size, args.batch,
                                        epoch_examples=steps * args.batch, augment=["flip"],
                                        num_classes=classes)
        before = rates(model, stream, steps, 1, args.batch)[0]
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            cache = thawed.cache_views(lower, split_, args.size, args.batch, True, False,
                                       float("inf"), Path(folder))
            build = time.perf_counter() - start
            meta = pipeline.metadata(split_)["labels"]
            now = rates(top, cache.batches(meta, classes, args.batch, steps, 0, 2, seed=0),
                        steps, 1, args.batch, args.xla)[0]
        rows += [(f"an epoch of {steps} steps on {Path(args.data).name} (before)", before),
                 ("an epoch on the cache (now)", now)]
    for name, rate in rows:
        print(f"{name:48s} {rate:9.1f} {rate / whole:6.2f}")
    if layout is not None:
        epoch_before, epoch_now = steps * args.batch / before, steps * args.batch / now
        print(f"the cache of {split_.count} training images and their mirror images: built in "
              f"{build:.0f} s once ({cache.bytes / 1e6:.0f} MB); an epoch {epoch_before:.0f} s "
              f"before, {epoch_now:.0f} s now: even after "
              + (f"{build / (epoch_before - epoch_now):.1f} epochs" if epoch_now < epoch_before
                 else "none (an epoch no cheaper here)"))
    print(f"host load {load:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
