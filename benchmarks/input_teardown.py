"""tf.data's autotuning against Corolla's fixed parallelism (`pipeline.untuned`), side by side
in one run: the training stream's images/s, and how long deleting an iterator that lived a
while takes.

Why: with autotuning (TensorFlow's default), deleting an iterator could wait out its tuning
thread's sleep, which grows to a minute. A phase's `fit` returned up to a minute after its last
epoch: a flowers5 `--time 3m` run used 127% of its budget. Corolla's streams run without it,
their parallelism fixed at autotuning's own ceiling (every core); this shows what that costs in
throughput, and what it saves:

    python benchmarks/input_teardown.py [--data ../shared/data/flowers5] [--rounds 3]
        [--live 60] [--trials 4] [--busy 2]

- throughput: `pipeline.train_dataset` (flowers5's training split, flips, `--batch` images),
  Corolla's as it is ("fixed") and with autotuning turned back on ("autotuned"), in
  alternating rounds; each round a fresh iterator, warmed up, then `--batches` timed as fast
  as it goes. Medians of images/s, and their ratio.
- fit's return: for each setting, `--trials` fits of a small model (pooling and a dense
  layer) on that stream, each step made 0.3 s long (a CPU's training step), stopped after
  `--live` seconds: the seconds from fit's last callback (`on_train_end`) to its return and a
  `gc.collect()`, by when its iterator is deleted. The sleep that can be waited out grows with
  the iterator's life, so give it a minute or two. The wait does not happen every time: the
  deleting thread must lose its core at the wrong moment (`--busy`).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "flowers5"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=100, help="timed batches per round")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (0: none)")
    parser.add_argument("--live", type=float, default=60, help="seconds each fit trains "
                        "(its iterator's life)")
    parser.add_argument("--trials", type=int, default=4, help="fits per setting (0: none)")
    parser.add_argument("--busy", type=int, default=2, help="processes that spin while the "
                        "fits run (a host as busy as a real run's: the wait needs the deleting "
                        "thread to lose its core at the wrong moment)")
    args = parser.parse_args()

    import tensorflow as tf

    from corolla.data import layout as layout_lib
    from corolla.data import pipeline

    data = layout_lib.open_layout(args.data, 0, 192)
    split, size = data.split("train"), data.image_size
    fixed = pipeline.train_dataset(split, size, args.batch, epoch_examples=args.batch * 1000,
                                   seed=1, augment=["flip"], num_classes=len(data.class_names))
    options = tf.data.Options()
    options.autotune.enabled = True
    streams = {"fixed": fixed, "autotuned": fixed.with_options(options)}
    print(f"{split.count} training images at {size} px, batch {args.batch}, flips; "
          f"{pipeline.CORES} cores (the fixed parallelism)")

    rates = {name: [] for name in streams}
    for _ in range(args.rounds):
        for name, ds in streams.items():
            it = iter(ds)
            for _ in range(10):
                next(it)
            start = time.perf_counter()
            for _ in range(args.batches):
                next(it)
            rates[name].append(args.batches * args.batch / (time.perf_counter() - start))
            del it
    for name, values in rates.items() if args.rounds else ():
        print(f"throughput {name:9s} {statistics.median(values):7.0f} images/s  (rounds: "
              f"{', '.join(f'{v:.0f}' for v in values)})")
    if args.rounds:
        ratio = statistics.median(rates["fixed"]) / statistics.median(rates["autotuned"])
        print(f"throughput ratio fixed/autotuned = {ratio:.2f}")

    if not args.trials:
        return
    import keras

    class Paced(keras.callbacks.Callback):
        """Each step made 0.3 s long (a CPU's training step), training stopped after `live`
        seconds, and when fit's last callback ran."""

        def on_train_begin(self, logs=None):
            self.end = time.monotonic() + args.live

        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.3)
            self.model.stop_training = time.monotonic() >= self.end

        def on_train_end(self, logs=None):
            self.ended = time.monotonic()

    model = keras.Sequential([keras.Input((size, size, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(len(data.class_names), activation="softmax")])
    model.compile("adam", "categorical_crossentropy")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.busy)]
    try:
        for name, ds in streams.items():
            waits = []
            for _ in range(args.trials):
                paced = Paced()
                model.fit(ds, epochs=1, steps_per_epoch=100_000, verbose=0, callbacks=[paced])
                gc.collect()  # fit's iterator, wherever a cycle still held it
                waits.append(time.monotonic() - paced.ended)
                print(f"fit's return {name:9s} after {args.live:.0f} s: {waits[-1]:6.2f} s",
                      flush=True)
            print(f"fit's return {name:9s} worst {max(waits):.2f} s, median "
                  f"{statistics.median(waits):.2f} s of {args.trials}")
    finally:  # (a stopped benchmark leaves no process spinning)
        for spinner in spinners:
            spinner.kill()


if __name__ == "__main__":
    main()
