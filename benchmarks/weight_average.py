"""Does the from-scratch `cpu` recipe's plateau move without more training? One
`corolla train` run, then its val macro F1 scored side by side: the best epoch (the run's
model.keras), the last epoch, and the mean of the last K epochs' weights (stochastic weight
averaging, Izmailov et al. 2018), each with the BatchNorm statistics as saved (for a mean, the
mean of the saved ones) and recomputed on the training images, each without and with flip
test-time augmentation (`--tta 2`).

    python benchmarks/weight_average.py [--last 4,8,16] [--extra "--seed 42"]
        [--data ../shared/data/flowers5] [--runs-dir DIR] [--tiny]

The run keeps only its last epoch's backup (`backup/epoch-NNNN.npz`, model and optimizer
variables): this script copies each one as its epoch's line is printed (the backup is written
before Keras prints the epoch), so no product code keeps more than it needs. BatchNorm is
recomputed as SWA does: moving statistics reset, then one pass over the training split in
training mode with the cumulative mean (momentum k / (k + 1) at batch k), no augmentation.

`--tiny`: a smoke test (synthetic 32 px data, 3 epochs of 2 steps): it proves the script
runs, its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import finetune  # noqa: E402  (the benchmark's `corolla train` runner and paths)


def collect(args) -> tuple[Path, Path]:
    """(run folder, folder of every epoch's backup) of one `corolla train --recipe cpu`."""
    run = args.runs_dir / "average"
    epochs = args.runs_dir / "epochs"
    epochs.mkdir(parents=True, exist_ok=True)

    def on_epoch(_line):
        state = json.loads((run / "backup" / "state.json").read_text())
        shutil.copy2(run / "backup" / state["weights"], epochs / state["weights"])

    finetune.train(["--recipe", "cpu", *args.extra], args, "average", on_epoch=on_epoch)
    return run, epochs


def score(run: Path, epochs: Path, lasts: list[int]) -> list[tuple[str, float, float]]:
    """(what, val macro F1, with flip TTA) of every variant, printed as it goes."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np

    from corolla import config as config_lib
    from corolla import runtime
    from corolla.data import pipeline
    from corolla.evaluation import inference
    from corolla.scoring import batched
    from corolla.scoring import metrics
    from corolla.training.backup import read_arrays
    from corolla.training.phases import batchnorm_layers

    plan = runtime.detect_for(config_lib.RunConfig())
    opened = inference.open_run(run, plan=plan, log=lambda *a: None)
    layout = opened.layout
    model = inference.load_model(opened.folder, plan, len(layout.class_names))
    size = inference.input_size(model, layout)
    val, train = layout.split("val"), layout.split("train")
    labels = np.asarray(pipeline.metadata(val)["labels"])
    val_batches = batched.split_batches(val, size)
    train_batches = pipeline.eval_dataset(train, size, plan.inference_batch, pad=False)
    norms = batchnorm_layers(model)
    count = len(model.weights)  # a backup holds the model's weights, then the optimizer's
    files = sorted(epochs.glob("epoch-*.npz"))
    lasts = [k for k in [1, *lasts] if k <= len(files)]
    # Each epoch's weights read once, for every mean that takes it.
    saved = [read_arrays(f)[:count] for f in files[-max(lasts):]]
    rows = []

    def scored(what):
        f1 = [metrics.macro_f1(labels, batched.predict_probabilities(
            model, val, size, plan, tta=tta, batches=val_batches).argmax(1)) for tta in (1, 2)]
        rows.append((what, *f1))
        print(f"  {what:44s} {f1[0]:.4f}  {f1[1]:.4f}", flush=True)

    def recompute_batchnorm():
        for layer in norms:
            layer.moving_mean.assign(np.zeros(layer.moving_mean.shape, np.float32))
            layer.moving_variance.assign(np.ones(layer.moving_variance.shape, np.float32))
        momentum = [layer.momentum for layer in norms]
        for k, images in enumerate(train_batches):
            for layer in norms:
                layer.momentum = k / (k + 1)
            model(images, training=True)
        for layer, m in zip(norms, momentum):
            layer.momentum = m

    print(f"val macro F1 ({len(labels)} images, {size} px)   plain   flip TTA")
    scored("best epoch (model.keras)")
    for k in lasts:
        model.set_weights([np.mean(arrays, axis=0) for arrays in zip(*saved[-k:])])
        what = "last epoch" if k == 1 else f"mean of the last {k} epochs"
        scored(f"{what}, BatchNorm as saved")
        recompute_batchnorm()
        scored(f"{what}, BatchNorm recomputed")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    finetune.runner_arguments(p)
    p.add_argument("--last", default="4,8,16", help="the K epochs averaged, e.g. 4,8")
    args = finetune.parse(p, argv, epochs=3)
    if args.tiny:
        args.extra += ["--start-size", "0", "--input-size", "32"]
    score(*collect(args), [int(k) for k in args.last.split(",") if k])
    return 0


if __name__ == "__main__":
    sys.exit(main())
