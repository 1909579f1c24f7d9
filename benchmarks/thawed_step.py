"""A thawed step's cost, and what caching the frozen lower part's outputs would save.

    python benchmarks/thawed_step.py [--weights ../shared/weights/efficientnet_lite0_imagenet]
        [--size 192] [--batch 16] [--fraction 0.5] [--steps 20] [--rounds 3]

When only the backbone's top `--fraction` trains (cpu-finetune's `unfreeze_fraction`) with its
BatchNorm in inference mode, the layers below the lowest trained one compute the same output
for the same input at every epoch: for augmentations that can be enumerated (the flip), that
output could be computed once per view and the top trained on it, as the frozen head already
trains on cached pooled features. This measures, in one process and side by side:

- the thawed step as `corolla train` takes it: the whole model, frozen as the trainer freezes
  it (`phases.freeze`), `fit` on uint8 batches at --size (the input pipeline not counted);
- the same step of the top alone, from the cut's cached outputs (the same trainable weights);
- the cut's forward pass (what building the cache costs, per view) and the bytes a view holds.

The cut is a point below the lowest trained layer where one tensor alone crosses between the
layers under it and those above it, the smallest such near it (`clean_cut`). Medians of --rounds
rounds of --steps steps, the host's load beside them.
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
    p.add_argument("--classes", type=int, default=5)
    return p.parse_args(argv)


def clean_cut(backbone, first_trained: int):
    """The layer (of `backbone.layers`, in order) whose output alone crosses to the layers
    after it, below index `first_trained`: of those down to the end of the block below (the
    first such cut at a residual `Add`), the one of fewest channels (a block's expanded
    activations can be six times its input, and recomputing a frozen 1x1 expansion is cheap)."""
    import keras

    layers = backbone.layers
    index = {id(layer): i for i, layer in enumerate(layers)}
    parents = [[index[id(node.operation)] for node in layer._inbound_nodes[0].parent_nodes]
               if layer._inbound_nodes else [] for layer in layers]
    cuts = []
    for boundary in range(first_trained - 1, 0, -1):
        crossing = {p for j in range(boundary + 1, len(layers)) for p in parents[j]
                    if p <= boundary}
        if crossing == {boundary}:
            cuts.append(layers[boundary])
            if isinstance(layers[boundary], keras.layers.Add):
                break
    if not cuts:
        raise SystemExit("no single tensor crosses below the lowest trained layer")
    return min(cuts, key=lambda layer: layer.output.shape[-1])  # one size: above any stride


def split(model, fraction: float):
    """(the thawed model, its preprocessing + lower part, its top on the cut's outputs)."""
    import keras

    from corolla.training import phases

    backbone = phases.backbone_of(model)
    phases.freeze(backbone, phases.Phase(start=1, end=2, frozen=False, size=0, lr_scale=1.0),
                  fraction, frozen_bn=True)
    trained = [i for i, layer in enumerate(backbone.layers)
               if layer.trainable and layer.weights]
    cut = clean_cut(backbone, trained[0])
    lower = keras.Model(backbone.input, cut.output)
    position = model.layers.index(backbone)
    pre = keras.Model(model.input, model.layers[position - 1].output)
    below = keras.Model(model.input, lower(pre.output))
    features = keras.Input(cut.output.shape[1:])
    x = keras.Model(cut.output, backbone.output)(features)
    for layer in model.layers[position + 1:]:
        x = layer(x)
    return cut, below, keras.Model(features, x)


def step_rate(model, x, y, args) -> float:
    import keras
    import tensorflow as tf

    model.compile(optimizer=keras.optimizers.Adam(3e-4), loss="categorical_crossentropy")
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    ends = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda e, logs: ends.append(time.perf_counter()),
        on_epoch_end=lambda e, logs: ends.append(time.perf_counter()))
    model.fit(data, epochs=args.rounds + 1, steps_per_epoch=args.steps, verbose=0,
              callbacks=[timer])
    return statistics.median(args.batch * args.steps / (ends[i + 1] - ends[i])
                             for i in range(2, 2 * args.rounds + 2, 2))


def main(argv=None) -> int:
    args = parse_args(argv)
    import numpy as np

    from corolla import models

    load = os.getloadavg()[0]
    model = models.create_model(f"hub:{args.weights}", args.classes, args.size,
                                weights="imagenet", dropout=0.2)
    cut, below, top = split(model, args.fraction)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (args.batch, args.size, args.size, 3), dtype=np.uint8)
    labels = np.eye(args.classes, dtype="float32")[rng.integers(0, args.classes, args.batch)]
    many = np.concatenate([images] * args.steps)
    below.predict(images, verbose=0, batch_size=args.batch)
    start = time.perf_counter()
    cached = below.predict(many, verbose=0, batch_size=args.batch)[:args.batch]
    forward = len(many) / (time.perf_counter() - start)
    assert len(top.trainable_weights) == len(model.trainable_weights)
    whole = step_rate(model, images, labels, args)
    on_cache = step_rate(top, cached, labels, args)
    print(f"{Path(args.weights).name}, {args.size} px, batch {args.batch}, the top "
          f"{args.fraction:.0%} trained; cut after {cut.name} "
          f"({'x'.join(map(str, cached.shape[1:]))}, {cached[0].nbytes / 1024:.0f} KiB a view "
          f"in float32)")
    print(f"{'':44s} {'images/s':>9s} {'ratio':>6s}")
    print(f"{'thawed step, the whole model (today)':44s} {whole:9.1f} {1:6.2f}")
    print(f"{'thawed step, the top on cached outputs':44s} {on_cache:9.1f} "
          f"{on_cache / whole:6.2f}")
    print(f"{'the lower part forward (building the cache)':44s} {forward:9.1f} "
          f"{forward / whole:6.2f}")
    print(f"host load {load:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
