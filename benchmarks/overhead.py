"""What Corolla adds to an epoch: `corolla train` against a plain Keras `model.fit` of the same
model, on the same tf.data pipeline, with one validation pass per epoch; side by side in one run.

    python benchmarks/overhead.py --data ../shared/data/flowers5 \
        [--models small_cnn,mobilenet_v3_small] [--size 96] [--epochs 4] [--steps 20] \
        [--backend tensorflow|jax] [--ema] [--extra "--precision float32 ..."]

For each model, two processes run one after the other (never together: they would share the
cores). First `corolla train` (the real command: its val macro F1 pass, backups, best-epoch
checkpoint, CSV and TensorBoard logs, EMA if the recipe keeps one), with a callback that times
each epoch. Then plain Keras, from that run's own resolved config.toml: the same model, optimizer,
batch, steps and augmented training stream (`pipeline.train_dataset`, cached as the run's), and
Keras' own validation pass over the same val images (`pipeline.eval_dataset`, kept decoded as
the run's), no callbacks but, with `--ema`, Keras' own SwapEMAWeights(swap_on_epoch=True)
(validation on the EMA weights, as Corolla's). The first epoch (tracing, compilation) is left
out; the ratio is of the median epoch times. Aim: 1.05 or less.

To compare two versions of Corolla, run this file with each on PYTHONPATH (the processes it
starts inherit it): `PYTHONPATH=/old/checkout/src python benchmarks/overhead.py ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MARK = "EPOCH_SECONDS "
PARTS = "EPOCH_END_SECONDS "


def timer():
    import keras

    class EpochTimer(keras.callbacks.Callback):
        """Wall time of each epoch, its callbacks' work at the epoch's end included (a callback
        put last in the list, so that Corolla's own run before its `on_epoch_end`)."""

        def __init__(self):
            super().__init__()
            self.seconds, self.start = [], None

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.start)

        def on_train_end(self, logs=None):
            print(MARK + json.dumps(self.seconds), flush=True)

    return EpochTimer()


def _time_epoch_ends(spent: dict) -> None:
    """Adds each of Corolla's own callbacks' `on_epoch_end` seconds to `spent[class name]`."""
    import keras

    from corolla.training import callbacks, checkpoint

    for cls in (callbacks.ValMacroF1, checkpoint.Checkpoint, keras.callbacks.TensorBoard):
        def timed(self, epoch, logs=None, _real=cls.on_epoch_end, _name=cls.__name__):
            began = time.perf_counter()
            try:
                return _real(self, epoch, logs)
            finally:
                spent.setdefault(_name, []).append(time.perf_counter() - began)

        cls.on_epoch_end = timed


def run_corolla(args: list[str]) -> None:
    """`corolla train ARGS` with an epoch timer after Corolla's own callbacks, and the seconds
    each of those spends at every epoch's end."""
    import atexit

    import corolla.training
    import corolla.training.fit as fit

    spent = {}
    _time_epoch_ends(spent)
    atexit.register(lambda: print(PARTS + json.dumps(spent), flush=True))
    original = fit.run

    def timed(*a, callbacks=(), **k):
        return original(*a, callbacks=(*callbacks, timer()), **k)

    corolla.training.run = fit.run = timed
    from corolla.cli import main

    sys.exit(main(["train", *args]))


def run_keras(run_dir: str) -> None:
    """Plain Keras `fit` of the model and stream that the run at `run_dir` resolved."""
    import numpy as np

    from corolla import config as config_lib
    from corolla import models, runtime

    cfg = config_lib.load_config(str(Path(run_dir) / "config.toml"))
    plan = runtime.detect_for(cfg)
    import keras
    import tensorflow as tf

    from corolla.data import datasets, pipeline
    from corolla.scoring import batched
    from corolla.training import compile_model

    layout = datasets.open_recorded(cfg.data, log=lambda *a: None)
    train, val = layout.split("train"), layout.split("val")
    t, size, classes = cfg.train, cfg.model.input_size, len(layout.class_names)
    with plan.scope():
        model = models.create_model(cfg.model.name, classes, size, cfg.model.weights,
                                    cfg.model.train_backbone, dropout=cfg.model.dropout)
        compile_model(model, plan, t.learning_rate, train=t)
    # The same streams as the run's: its training images cached when its recipe caches them,
    # its val batches from `batched.split_batches` (kept decoded when they fit). A plain run
    # that decoded what Corolla keeps decoded would hide Corolla's own costs behind decoding.
    stream = pipeline.train_dataset(train, size, plan.global_batch,
                                    epoch_examples=t.steps_per_epoch * plan.global_batch,
                                    seed=t.seed, augment=cfg.data.augment,
                                    cache=cfg.data.cache,
                                    shuffle_buffer=cfg.data.shuffle_buffer,
                                    num_classes=classes)
    labels = np.eye(classes, dtype=np.float32)[pipeline.metadata(val)["labels"]]
    batch = plan.global_batch
    labels = np.concatenate([labels, np.zeros((-len(labels) % batch, classes), np.float32)])
    images = batched.split_batches(val, size)(batch)
    validation = tf.data.Dataset.zip((images, tf.data.Dataset.from_tensor_slices(labels)
                                      .batch(batch))).prefetch(tf.data.AUTOTUNE)
    ema = [keras.callbacks.SwapEMAWeights(swap_on_epoch=True)] if t.ema else []
    model.fit(stream, epochs=t.epochs, steps_per_epoch=t.steps_per_epoch,
              validation_data=validation, validation_steps=len(labels) // batch,
              callbacks=[*ema, timer()], verbose=2)
    keras.backend.clear_session()


def _epochs(command: list[str], env: dict) -> tuple[list[float], dict]:
    """(seconds of each epoch, {callback: seconds at each epoch's end}) of one run."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode or not lines:
        sys.exit(f"{' '.join(command[:4])} ... failed:\n{done.stdout[-3000:]}"
                 f"{done.stderr[-3000:]}")
    parts = [line for line in done.stdout.splitlines() if line.startswith(PARTS)]
    return json.loads(lines[-1][len(MARK):]), json.loads(parts[-1][len(PARTS):]) if parts else {}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--models", default="small_cnn,mobilenet_v3_small")
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps", type=int, default=20, help="steps per epoch")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--backend", default="", help="tensorflow or jax (default: Corolla's choice)")
    p.add_argument("--ema", action="store_true", help="train with an EMA of the weights")
    p.add_argument("--extra", default="", help="more `corolla train` flags, one string")
    a = p.parse_args()
    extra = (["--backend", a.backend] if a.backend else []) + (["--ema"] if a.ema else []) + \
        a.extra.split()
    env = {"KERAS_BACKEND": a.backend} if a.backend else {}
    import corolla

    print(f"corolla from {Path(corolla.__file__).parent}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as runs:
        for name in a.models.split(","):
            run = Path(runs) / name
            corolla, parts = _epochs([sys.executable, __file__, "--corolla", "--data", a.data,
                                      "--model", name, "--input-size", str(a.size),
                                      "--start-size", "0", "--epochs", str(a.epochs),
                                      "--steps-per-epoch", str(a.steps), "--batch-size",
                                      str(a.batch_size), "--runs-dir", runs, "--name", name,
                                      *extra], env)
            keras_, _ = _epochs([sys.executable, __file__, "--keras", str(run)], env)
            c, k = statistics.median(corolla[1:]), statistics.median(keras_[1:])
            rows.append((name, c, k))
            print(f"{name}: corolla train {c:.2f} s/epoch, plain Keras fit {k:.2f} s/epoch, "
                  f"ratio {c / k:.3f}  (epochs: corolla {[round(x, 2) for x in corolla]}, "
                  f"keras {[round(x, 2) for x in keras_]})", flush=True)
            print("  at each epoch's end (median after the first): " + ", ".join(
                f"{part} {statistics.median(s[1:] or s):.3f} s" for part, s in parts.items()),
                flush=True)
    print(f"\n{'model':<22}{'corolla s/epoch':>16}{'keras s/epoch':>15}{'ratio':>8}")
    for name, c, k in rows:
        print(f"{name:<22}{c:>16.2f}{k:>15.2f}{c / k:>8.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--corolla":
        run_corolla(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--keras":
        run_keras(sys.argv[2])
    else:
        main()
