"""What each stage of the training pipeline costs against JPEG decoding, side by side in one run.

Why: `corolla bench data` prints one ratio (the training pipeline with the default augmentation
over parse+decode). This breaks it down, to show where the time goes and what a faster
augmentation kernel could still win. With both cores decoding, every pass over a batch takes
CPU time from the decoders:

    python benchmarks/augment_cost.py [--data ../shared/data/flowers5] [--rounds 3]

Variants, timed in alternating rounds (medians of images/s, as `corolla bench data` does):
- parse+decode: `bench.decode_only`, the denominator of every ratio;
- stream, no augmentation: `train_dataset(augment="none")`, with the per-epoch shuffle,
  counter and one-hot labels;
- + one XLA copy: the same, then one XLA kernel that only copies the batch. This is the cheapest
  augmentation that is a pass of its own, the floor for any kernel on the decoded batch;
- flip, color, and the default policy (flip, color): `train_dataset(augment=...)`.

Each line also gives the process's CPU time per image (user + system, in ms) and its minor page
faults per image. Fresh output buffers that the allocator has handed back to the kernel are
faulted in again, page by page.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "flowers5"


def _measure(make, batches: int, warmup: int, batch: int) -> tuple[float, float, float]:
    """(images/s, CPU ms per image, minor page faults per image) of a fresh iterator."""
    it = iter(make())
    for _ in range(warmup):
        next(it)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(batches):
        next(it)
    elapsed, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    images = batches * batch
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return images / elapsed, cpu * 1000 / images, (after.ru_minflt - before.ru_minflt) / images


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not Path(args.data).is_dir():
        parser.error(f"--data {args.data}: no such folder (flowers5 is in ../shared/data)")

    import tensorflow as tf

    from corolla.flows import bench
    from corolla.data import layout as layout_lib
    from corolla.data import pipeline

    layout = layout_lib.open_layout(args.data, 0, 192)
    split, size = layout.split("train"), layout.image_size
    classes = len(layout.class_names)

    @tf.function(jit_compile=True)
    def xla_copy(images, seed):
        # Data-dependent zero, so that XLA cannot drop the kernel: a copy, nothing more.
        return tf.bitwise.bitwise_xor(images, tf.cast(seed & 0, tf.uint8))

    def training(augment):
        return lambda: pipeline.train_dataset(split, size, args.batch,
                                              epoch_examples=args.batch * 1000,
                                              augment=augment, num_classes=classes)

    def with_copy():
        counter = tf.data.Dataset.counter()
        return tf.data.Dataset.zip((training("none")(), counter)).map(
            lambda batch, i: (xla_copy(batch[0], i), batch[1]),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)

    variants = {
        "parse+decode": lambda: bench.decode_only(split, size, args.batch),
        "stream, no augmentation": training("none"),
        "+ one XLA copy of the batch": with_copy,
        "flip": training("flip"),
        "color": training("color"),
        "default (flip, color)": training("default"),
    }
    print(f"{split.count} training images at {size}x{size}, batch {args.batch}; {args.rounds} "
          f"rounds of {args.batches} batches after {args.warmup} to warm up, medians")
    figures = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, make in variants.items():
            figures[name].append(_measure(make, args.batches, args.warmup, args.batch))
    decode = [rate for rate, _, _ in figures["parse+decode"]]
    for name, runs in figures.items():
        rate, cpu, faults = (statistics.median(column) for column in zip(*runs))
        ratio = statistics.median(r / d for (r, _, _), d in zip(runs, decode))
        print(f"{name:30s} {rate:6.0f} images/s  ratio {ratio:.2f}  "
              f"CPU {cpu:.3f} ms/image  {faults:5.1f} page faults/image")


if __name__ == "__main__":
    main()
