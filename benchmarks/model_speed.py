"""Training throughput of registry models on this machine: images per second at one size.

Why: which backbone a CPU (or any accelerator) can afford to train in the time at hand is a
measurement, not a guess; the CPU recipe's model choice rests on it.

    python benchmarks/model_speed.py [MODEL ...] [--size 224] [--batch 16] [--steps 6]

For each model, in this order, in one process: build it (random weights, 104 classes: the
competition's head), compile it (Adam, sparse cross-entropy; Keras' default jit_compile, which
is off on CPU), run `--warmup` training steps on one synthetic in-memory batch (graph tracing),
then time `--steps` steps. One line per model. Run the models you compare side by side in one
invocation: a busy machine slows them all.
"""

from __future__ import annotations

import argparse
import time

DEFAULT_MODELS = ["small_cnn", "small_resnet", "mobilenet_v3_small", "efficientnet_b0",
                  "resnet50", "densenet121"]


def measure(name: str, size: int, batch: int, warmup: int, steps: int) -> dict:
    import keras
    import numpy as np

    from corolla import models

    keras.backend.clear_session()
    model = models.create_model(name, num_classes=104, image_size=size)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (batch, size, size, 3)).astype("float32")
    y = rng.integers(0, 104, batch)
    for _ in range(warmup):
        model.train_on_batch(x, y)
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(x, y)
    seconds = time.perf_counter() - start
    return {"model": name, "params": model.count_params(),
            "images_per_second": steps * batch / seconds, "seconds_per_step": seconds / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS,
                        help=f"registry names (default: {' '.join(DEFAULT_MODELS)})")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()

    import keras

    print(f"backend {keras.backend.backend()}, {args.size} px, batch {args.batch}, "
          f"{args.warmup} warm-up + {args.steps} timed training steps")
    for name in args.models:
        r = measure(name, args.size, args.batch, args.warmup, args.steps)
        print(f"{name:20s} {r['params'] / 1e6:6.2f}M params  {r['images_per_second']:7.1f} "
              f"images/s  ({1000 * r['seconds_per_step']:.0f} ms/step)", flush=True)


if __name__ == "__main__":
    main()
