"""Many classes, few photos each: the competition's shape (104 classes, some with a handful of
photos), which flowers5 (5 classes, hundreds each) does not have. Caltech-101's 101 object
classes (8,677 photos, 31-800 a class; its BACKGROUND_Google clutter left out), 10 training and
10 validation photos a class, every other photo a test photo scored only at the end.

    python benchmarks/many_classes.py prepare --source DIR [--out /tmp/corolla-many]
        [--train 10] [--val 10] [--seed 0]
    python benchmarks/many_classes.py train [--time 10m] [--seeds 42] [--extra "..."]
    python benchmarks/many_classes.py probe [--size 224]
        [--out /tmp/corolla-many] [--weights ../shared/weights/efficientnet_lite0_imagenet]

- prepare: `--source` is a folder holding `caltech-101/<class>/*.jpg`, or a git repository that
  does (the public `taibarehm/CVassimgement`, fetched: its files are read with git).
  Writes OUT/photos/ (the photos, by class), OUT/labels.csv (`path,label,split`: train and val
  labelled, test rows without a label, as a competition's test split) and OUT/test_labels.csv
  (the test photos' classes, held apart). The draw is seeded (`--seed`). The data stays out of
  the repository.
- train: `corolla train --data OUT/labels.csv --weights WEIGHTS --time T` per seed, then its
  submission.csv (the test photos' predicted classes) scored against test_labels.csv: test
  macro F1 and accuracy, beside the run's own val macro F1, its seconds of the budget and the
  host's load. `--extra`: more `corolla train` flags, one string.
- probe: the figure a fine-tune must clearly beat: the frozen backbone's pooled features (as
  `--model hub:WEIGHTS` builds it, with the padding its weights were trained with) of the
  train + val photos, a scikit-learn logistic regression, scored on the test photos.

Every photo is read as `corolla convert` reads it (`corolla.data.prepare.image_files`: EXIF
rotation, centre crop). Run it on an otherwise idle host: the seconds are figures too.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import heldout
from heldout import REPO, WEIGHTS, load

OUT = Path("/tmp/corolla-many")
SUBFOLDER = "caltech-101"
LEFT_OUT = frozenset({"BACKGROUND_Google"})  # clutter, not a class


def prepare(args) -> None:
    out = args.out
    if out.exists():
        raise SystemExit(f"{out} exists: remove it or pass another --out")
    raw = heldout.extract(args.source, (SUBFOLDER,), out / "raw", LEFT_OUT)
    photos = heldout.by_class(raw, (SUBFOLDER,), LEFT_OUT)
    counts = heldout.lay_out(photos, out, args.train, args.val, args.seed)
    print(f"{out}: {len(photos)} classes; train {counts['train']}, val {counts['val']}, "
          f"test {counts['test']} (test labels in {out / 'test_labels.csv'})")


def train(args) -> None:
    for seed in args.seeds:
        # Runs of other flags beside each other: their flags in the name.
        tag = "".join(c if c.isalnum() else "-" for c in args.extra.replace("--", "")).strip("-")
        name = f"many-{args.time}-{seed}" + (f"-{tag}" if tag else "")
        r = heldout.train(args.out, args.weights, args.time, seed, name, args.extra)
        print(f"--time {args.time} seed {seed}: test macro F1 {r['f1']:.4f} (accuracy "
              f"{r['accuracy']:.4f}, {r['tested']} photos), val macro F1 {r['val_f1']:.4f}; "
              f"the command took {r['seconds']:.0f} s; {load()}", flush=True)


def probe(args) -> None:
    r = heldout.probe(args.out, args.weights, args.size)
    print(f"linear probe ({r['backbone']}, {r['size']} px) on {r['fitted']} train + val "
          f"photos, {r['classes']} classes: test macro F1 {r['f1']:.4f}, accuracy "
          f"{r['accuracy']:.4f} on {r['tested']} photos; {r['seconds']:.0f} s; {load()}",
          flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("prepare", "train", "probe"):
        s = sub.add_parser(name)
        s.add_argument("--out", type=Path, default=OUT)
        if name == "prepare":
            s.add_argument("--source", type=Path, required=True)
            s.add_argument("--train", type=int, default=10)
            s.add_argument("--val", type=int, default=10)
            s.add_argument("--seed", type=int, default=0)
        else:
            s.add_argument("--weights", type=Path, default=WEIGHTS)
        if name == "train":
            s.add_argument("--time", default="10m")
            s.add_argument("--seeds", type=lambda t: [int(x) for x in t.split(",")],
                           default=[42])
            s.add_argument("--extra", default="")
        if name == "probe":
            s.add_argument("--size", type=int, default=224)
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(REPO / "src"))
    {"prepare": prepare, "train": train, "probe": probe}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
