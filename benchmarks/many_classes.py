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
  does (the public `taibarehm/CVassimgement`, fetched: its files are read with `git archive`).
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

Every photo is read as `corolla convert` reads it (`corolla.data.prepare.photos`: EXIF
rotation, centre crop). Run it on an otherwise idle host: the seconds are figures too.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import random
import shlex
import subprocess
import sys
import tarfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = REPO.parent / "shared" / "weights" / "efficientnet_lite0_imagenet"
OUT = Path("/tmp/corolla-many")
SUBFOLDER = "caltech-101"
LEFT_OUT = {"BACKGROUND_Google"}  # clutter, not a class


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def _extract(source: Path, into: Path) -> Path:
    """The folder of class folders: `source/caltech-101`, or that path of a git repository."""
    if (source / SUBFOLDER).is_dir():
        return source / SUBFOLDER
    # Class by class: a fetched mirror may lack the blobs of the folder left out.
    listed = subprocess.run(["git", f"--git-dir={source}", "ls-tree", "-d", "--name-only",
                             "HEAD", f"{SUBFOLDER}/"], capture_output=True, text=True,
                            check=False)
    folders = [f for f in listed.stdout.split() if f.rsplit("/", 1)[-1] not in LEFT_OUT]
    archive = subprocess.run(["git", f"--git-dir={source}", "archive", "HEAD", *folders],
                             capture_output=True, check=False)
    if archive.returncode:
        raise SystemExit(f"{source} holds no {SUBFOLDER}/ folder and is no git repository "
                         f"with one: {archive.stderr.decode()[:200]}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / SUBFOLDER


def prepare(args) -> None:
    out = args.out
    if out.exists():
        raise SystemExit(f"{out} exists: remove it or pass another --out")
    raw = _extract(args.source, out / "raw")
    by_class = {folder.name: sorted(p for p in folder.iterdir() if p.is_file())
                for folder in sorted(raw.iterdir())
                if folder.is_dir() and folder.name not in LEFT_OUT}
    rng = random.Random(args.seed)
    rows, held = [], []
    for name, files in by_class.items():
        files = files[:]
        rng.shuffle(files)
        if len(files) < args.train + args.val + 1:
            raise SystemExit(f"{name} has {len(files)} photos: too few for the split")
        for k, file in enumerate(files):
            split = "train" if k < args.train else "val" if k < args.train + args.val \
                else "test"
            target = out / "photos" / name / file.name
            target.parent.mkdir(parents=True, exist_ok=True)
            file.replace(target)
            path = target.relative_to(out).as_posix()
            rows.append([path, "" if split == "test" else name, split])
            if split == "test":
                held.append([path, name])
    for name, table, header in (("labels.csv", rows, ["path", "label", "split"]),
                                ("test_labels.csv", held, ["path", "label"])):
        with (out / name).open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(table)
    counts = defaultdict(int)
    for _, _, split in rows:
        counts[split] += 1
    print(f"{out}: {len(by_class)} classes; train {counts['train']}, val {counts['val']}, "
          f"test {counts['test']} (test labels in {out / 'test_labels.csv'})")


def _held(out: Path) -> dict[str, str]:
    with (out / "test_labels.csv").open(newline="") as f:
        return {row["path"]: row["label"] for row in csv.DictReader(f)}


def score(run: Path, out: Path) -> tuple[float, float, int]:
    """(test macro F1, accuracy, photos) of the run's submission.csv against the held labels."""
    from sklearn.metrics import accuracy_score, f1_score

    names = (run / "classes.txt").read_text().splitlines()
    with (run / "submission.csv").open(newline="") as f:
        predicted = {row["id"]: names[int(row["label"])] for row in csv.DictReader(f)}
    truth = _held(out)
    missing = set(truth) - set(predicted)
    if missing:
        raise SystemExit(f"{run / 'submission.csv'} lacks {len(missing)} test photos, e.g. "
                         f"{sorted(missing)[0]}")
    ids = sorted(truth)
    y, p = [truth[i] for i in ids], [predicted[i] for i in ids]
    return f1_score(y, p, average="macro"), accuracy_score(y, p), len(ids)


def train(args) -> None:
    import json

    for seed in args.seeds:
        # Runs of other flags beside each other: their flags in the name.
        tag = "".join(c if c.isalnum() else "-" for c in args.extra.replace("--", "")).strip("-")
        name = f"many-{args.time}-{seed}" + (f"-{tag}" if tag else "")
        command = [sys.executable, "-m", "corolla.cli", "train", "--data",
                   str(args.out / "labels.csv"), "--weights", str(args.weights), "--time",
                   args.time, "--seed", str(seed), "--runs-dir", str(args.out / "runs"),
                   "--name", name, *shlex.split(args.extra)]
        print(f"$ {shlex.join(command)}  [{load()}]", flush=True)
        began = time.monotonic()
        result = subprocess.run(command, cwd=REPO, check=False)
        seconds = time.monotonic() - began
        if result.returncode:
            raise SystemExit(f"corolla train exited {result.returncode}")
        run = args.out / "runs" / name
        f1, accuracy, n = score(run, args.out)
        val = json.loads((run / "metrics.json").read_text())["f1_macro"]
        print(f"--time {args.time} seed {seed}: test macro F1 {f1:.4f} (accuracy {accuracy:.4f}, "
              f"{n} photos), val macro F1 {val:.4f}; the command took {seconds:.0f} s; "
              f"{load()}", flush=True)


def probe(args) -> None:
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    from corolla import models
    from corolla.data.prepare import photos
    from corolla.training import features

    began = time.monotonic()
    with (args.out / "labels.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    truth = _held(args.out)
    fitting = [(r["path"], r["label"]) for r in rows if r["split"] in ("train", "val")]
    testing = sorted(truth.items())
    names = sorted({label for _, label in fitting})
    spec = models.get(f"hub:{args.weights}")
    model = models.create_model(spec.name, len(names), args.size, weights="imagenet",
                                train_backbone=False)
    extractor, _ = features.split_model(model)

    def pooled(pairs):
        out = []
        for start in range(0, len(pairs), 256):
            paths = [str(args.out / path) for path, _ in pairs[start:start + 256]]
            images, failed = photos.read_many(paths, args.size)
            if failed:
                raise SystemExit(f"unreadable: {next(iter(failed.items()))}")
            out.append(extractor.predict(images.astype("float32"), batch_size=64, verbose=0))
        return np.concatenate(out)

    x, tx = pooled(fitting), pooled(testing)
    y, ty = [label for _, label in fitting], [label for _, label in testing]
    classifier = LogisticRegression(max_iter=3000).fit(x, y)
    predicted = classifier.predict(tx)
    print(f"linear probe ({spec.description}, {args.size} px) on {len(fitting)} train + val "
          f"photos, {len(names)} classes: test macro F1 "
          f"{f1_score(ty, predicted, average='macro'):.4f}, accuracy "
          f"{accuracy_score(ty, predicted):.4f} on {len(ty)} photos; "
          f"{time.monotonic() - began:.0f} s; {load()}", flush=True)


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
