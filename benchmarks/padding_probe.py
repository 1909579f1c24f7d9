"""What the padding of TensorFlow-trained weights is worth: a linear probe of the shared
EfficientNet-Lite0 run with the padding its weights were trained with (TensorFlow's SAME, as
Corolla now builds it) and run shifted (keras-hub's symmetric padding, as it was built before).

    python benchmarks/padding_probe.py [--size 192] [--train-images 300] [--val-images 300]
        [--data ../shared/data/flowers5] [--weights ../shared/weights/efficientnet_lite0_imagenet]

For each padding: the frozen backbone as `--model hub:WEIGHTS` builds it (its converter's
rescaling x / 127.5 - 1 inside), global average pooling, and a scikit-learn logistic regression
fitted on the pooled features of the first `--train-images` training photos of flowers5 (file
order), scored by macro F1 on the first `--val-images` validation photos. The symmetric run is
the same weights in a folder of links whose metadata.json says `"trained_padding":
"symmetric"` (the setting a user gives a folder of their own). The host's load average
(os.getloadavg) is printed beside each figure: the figures do not depend on it, the seconds do.
../shared/weights/README.md measured 0.832 (symmetric) and 0.883 (SAME) with timm's models on
(x - 127) / 128.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "flowers5"
WEIGHTS = REPO.parent / "shared" / "weights" / "efficientnet_lite0_imagenet"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def symmetric_copy(weights: Path, root: Path) -> Path:
    """The preset folder's files linked into a folder whose metadata says symmetric."""
    folder = root / f"{weights.name}_symmetric"
    folder.mkdir()
    for path in weights.iterdir():
        if path.name != "metadata.json":
            (folder / path.name).symlink_to(path.resolve())
    metadata = json.loads((weights / "metadata.json").read_text()) \
        if (weights / "metadata.json").is_file() else {}
    (folder / "metadata.json").write_text(json.dumps({**metadata,
                                                      "trained_padding": "symmetric"}))
    return folder


def first(split, count: int, size: int, batch: int):
    """The first `count` images of `split` (file order, uint8) and their labels."""
    import numpy as np

    from corolla.data import pipeline

    ds = pipeline.eval_dataset(split, size, batch, pad=False).take(-(-count // batch))
    images = np.concatenate([b.numpy() for b in ds])[:count]
    labels = np.asarray(pipeline.metadata(split)["labels"])[:count]
    return images, labels


def features_of(preset: Path, data, size: int, batch: int, reference_input: bool):
    """(the pooled features of each split's images, the padding Corolla read, seconds)."""
    from corolla import models
    from corolla.training import features

    began = time.monotonic()
    spec = models.get(f"hub:{preset}")
    model = models.create_model(spec.name, 5, size, weights="imagenet", train_backbone=False)
    extractor, _ = features.split_model(model)

    def pixels(images):
        x = images.astype("float32")
        # The converter computes x / 127.5 - 1; these pixels make it compute (x - 127) / 128.
        return (x - 127) / 128 * 127.5 + 127.5 if reference_input else x

    pooled = [extractor.predict(pixels(images), batch_size=batch, verbose=0)
              for images, _ in data]
    padding = "SAME" if "SAME" in spec.description else "symmetric"
    return pooled, padding, time.monotonic() - began


def probe(x, y, vx, vy) -> float:
    """Val macro F1 of a logistic regression fitted on (x, y)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    classifier = LogisticRegression(max_iter=2000, C=1.0).fit(x, y)
    return float(f1_score(vy, classifier.predict(vx), average="macro"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--weights", type=Path, default=WEIGHTS)
    p.add_argument("--size", type=int, default=192)
    p.add_argument("--train-images", type=int, default=300)
    p.add_argument("--val-images", type=int, default=300)
    p.add_argument("--pool", type=int, default=900, help="random draws take their training "
                   "photos from the first POOL (file order), their validation photos from "
                   "the first POOL of val")
    p.add_argument("--draws", type=int, default=5)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--reference-input", action="store_true",
                   help="the backbone sees (x - 127) / 128, as the weights README's figures "
                        "did, instead of the preset converter's x / 127.5 - 1")
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(REPO / "src"))
    import numpy as np

    from corolla.data import datasets

    print(f"before: {load()}", flush=True)
    layout = datasets.open_data(str(args.data), 0, args.size, log=lambda *a: None)
    pool = max(args.pool, args.train_images, args.val_images)
    data = [first(layout.split("train"), pool, args.size, args.batch),
            first(layout.split("val"), pool, args.size, args.batch)]
    (_, y), (_, vy) = data
    print(f"flowers5 at {args.size} px: the first {args.train_images} training photos and "
          f"{args.val_images} validation photos, then {args.draws} random draws of as many "
          f"from the first {len(y)} and {len(vy)} ({len(set(y))} classes); input "
          f"{'(x - 127) / 128' if args.reference_input else 'x / 127.5 - 1'}", flush=True)
    draws = [(np.random.default_rng(seed).choice(len(y), args.train_images, replace=False),
              np.random.default_rng(seed + 1000).choice(len(vy), args.val_images,
                                                        replace=False))
             for seed in range(args.draws)]
    with tempfile.TemporaryDirectory() as root:
        for preset in (args.weights, symmetric_copy(args.weights, Path(root))):
            (x, vx), padding, seconds = features_of(preset, data, args.size, args.batch,
                                                    args.reference_input)
            n, m = args.train_images, args.val_images
            f1 = probe(x[:n], y[:n], vx[:m], vy[:m])
            drawn = [probe(x[t], y[t], vx[v], vy[v]) for t, v in draws]
            spread = f"; {len(drawn)} random draws: mean {np.mean(drawn):.4f}, sd " \
                f"{np.std(drawn, ddof=1):.4f}" if len(drawn) > 1 else ""
            print(f"{padding:>9} padding: val macro F1 {f1:.4f} (the first photos){spread}  "
                  f"[{seconds:.0f} s; {load()}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
