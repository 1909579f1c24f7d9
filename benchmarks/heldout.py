"""What the held-out benchmarks share (`many_classes.py`, `suite.py`): photos by class read
from a folder or a fetched git repository, laid out as a competition's data (a CSV with train
and val labelled and the test photos unlabelled, their classes held apart), the linear probe
beside a run, and `corolla train --time T` scored on the held labels at the end.

Every photo is read as `corolla convert` reads it (`corolla.data.prepare.image_files`: EXIF
rotation, centre crop). TensorFlow and scikit-learn are imported only by what needs them.
"""

from __future__ import annotations

import csv
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = REPO.parent / "shared" / "weights" / "efficientnet_lite0_imagenet"
PHOTOS = {".jpg", ".jpeg", ".png"}
# The probe's measured step of a timed run, as `corolla train` logs it ("time probe: ...").
PACE = re.compile(r"trained (\d+) px ([\d.eE+-]+) s a step")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def git_dir(source: Path) -> Path | None:
    """The git directory of `source` (a bare or fetched repository, or a checkout), if any."""
    for candidate in (source, source / ".git"):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def commit(source: Path, wanted: str = "") -> str:
    """The commit a git `source` is read at: `wanted` where the repository holds it, else
    HEAD; "" for a plain folder."""
    git = git_dir(source)
    if git is None:
        return ""
    for ref in ([f"{wanted}^{{commit}}"] if wanted else []) + ["HEAD"]:
        found = subprocess.run(["git", f"--git-dir={git}", "rev-parse", "--verify", "--quiet",
                                ref], capture_output=True, text=True, check=False)
        if found.returncode == 0:
            return found.stdout.strip()
    raise SystemExit(f"{source}: a git repository without a HEAD commit")


def extract(source: Path, folders: tuple[str, ...], into: Path,
            left_out: frozenset[str] = frozenset(), files: tuple[str, ...] = (),
            ref: str = "HEAD") -> Path:
    """The folder under which `folders` (each a folder of class folders) and `files` (any
    other path the classes are read from, whole) lie: `source` itself where it holds them,
    else `into`, where they are written from the git repository `source` at `ref`, file by
    file (a fetched mirror lacks its largest files, and may lack those of a folder left out:
    those are left out, and said)."""
    if all((source / path).exists() for path in folders + files):
        return source
    git = git_dir(source)
    if git is None:
        raise SystemExit(f"{source} holds no {', '.join(folders + files)} and is no git "
                         f"repository")
    wanted = list(files)
    for folder in folders:
        listed = subprocess.run(["git", f"--git-dir={git}", "ls-tree", "-d", "--name-only",
                                 ref, f"{folder}/"], capture_output=True, text=True,
                                check=False)
        found = [f for f in listed.stdout.splitlines() if f.rsplit("/", 1)[-1] not in left_out]
        if not found:
            raise SystemExit(f"{source} holds no class folders under {folder}/ at {ref}")
        wanted += found
    tree = subprocess.run(["git", f"--git-dir={git}", "ls-tree", "-r", "-z", ref, "--",
                           *wanted], capture_output=True, check=True).stdout
    blobs = []
    for entry in tree.decode().split("\0"):
        if entry:
            info, path = entry.split("\t", 1)
            mode, kind, sha = info.split()
            if kind == "blob" and mode in ("100644", "100755"):
                blobs.append((sha, path))
    missing = 0
    root = into.resolve()
    with subprocess.Popen(["git", f"--git-dir={git}", "cat-file", "--batch"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as cat:
        for sha, path in blobs:
            cat.stdin.write(f"{sha}\n".encode())
            cat.stdin.flush()
            header = cat.stdout.readline().split()
            if header[-1] == b"missing":
                missing += 1
                continue
            data = cat.stdout.read(int(header[2]))
            cat.stdout.read(1)  # the newline after each object
            target = (root / path).resolve()
            if not target.is_relative_to(root):  # a path from elsewhere: never outside
                raise SystemExit(f"{source}: {path!r} would be written outside {into}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        cat.stdin.close()
    if missing:
        print(f"{source}: {missing} of {len(blobs)} files absent from the repository (a "
              f"fetched mirror lacks its largest files): left out", flush=True)
    return into


def by_class(root: Path, folders: tuple[str, ...], left_out: frozenset[str] = frozenset(),
             names: dict[str, str] | None = None) -> dict[str, list[Path]]:
    """{class: its photos} of the class folders under each of `root/folders` (a class found
    under several, e.g. a source's own train and validation folders, pools its photos), in
    class order; `names` renames folders (a folder absent from it is left out)."""
    classes: dict[str, list[Path]] = {}
    for folder in folders:
        for sub in sorted((root / folder).iterdir()):
            if not sub.is_dir() or sub.name in left_out:
                continue
            if names is not None and sub.name not in names:
                continue
            name = names[sub.name] if names is not None else sub.name
            classes.setdefault(name, []).extend(
                p for p in sub.iterdir() if p.is_file() and p.suffix.lower() in PHOTOS)
    return {name: sorted(classes[name]) for name in sorted(classes)}


def lay_out(photos: dict[str, list[Path]], out: Path, train: int, val: int, seed: int,
            test: int | None = None) -> Counter:
    """Put the photos into out/photos/<class>/ and write out/labels.csv (`path,label,split`:
    train and val labelled, test rows without a label, as a competition's test split) and
    out/test_labels.csv (the test photos' classes, held apart). Per class, a seeded draw:
    `train` and `val` photos, then the rest (at most `test`) for the test split; photos past
    that are left out. Returns the count of each split."""
    rng = random.Random(seed)
    rows, held = [], []
    for name, files in photos.items():
        files = files[:]
        rng.shuffle(files)
        if len(files) < train + val + 1:
            raise SystemExit(f"{name} has {len(files)} photos: too few for the split")
        if test is not None:
            files = files[:train + val + test]
        taken: set[str] = set()
        for k, file in enumerate(files):
            split = "train" if k < train else "val" if k < train + val else "test"
            # Pooled folders may repeat a file name: the later one is numbered.
            stem, n = file.name, 1
            while stem in taken:
                stem, n = f"{file.stem}-{n}{file.suffix}", n + 1
            taken.add(stem)
            target = out / "photos" / name / stem
            target.parent.mkdir(parents=True, exist_ok=True)
            # Extracted photos move; a folder of the user's own is copied, left as it was.
            if file.is_relative_to(out):
                file.replace(target)
            else:
                shutil.copyfile(file, target)
            path = target.relative_to(out).as_posix()
            rows.append([path, "" if split == "test" else name, split])
            if split == "test":
                held.append([path, name])
    for filename, table, header in (("labels.csv", rows, ["path", "label", "split"]),
                                    ("test_labels.csv", held, ["path", "label"])):
        with (out / filename).open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(table)
    return Counter(split for _, _, split in rows)


def held(out: Path) -> dict[str, str]:
    with (out / "test_labels.csv").open(newline="") as f:
        return {row["path"]: row["label"] for row in csv.DictReader(f)}


def score(run: Path, out: Path) -> tuple[float, float, int]:
    """(test macro F1, accuracy, photos) of the run's submission.csv against the held labels."""
    from sklearn.metrics import accuracy_score, f1_score

    names = (run / "classes.txt").read_text().splitlines()
    with (run / "submission.csv").open(newline="") as f:
        predicted = {row["id"]: names[int(row["label"])] for row in csv.DictReader(f)}
    truth = held(out)
    missing = set(truth) - set(predicted)
    if missing:
        raise SystemExit(f"{run / 'submission.csv'} lacks {len(missing)} test photos, e.g. "
                         f"{sorted(missing)[0]}")
    ids = sorted(truth)
    y, p = [truth[i] for i in ids], [predicted[i] for i in ids]
    return f1_score(y, p, average="macro"), accuracy_score(y, p), len(ids)


def split_pairs(out: Path, test_cap: int | None = None) -> tuple[list, list, list]:
    """The (path, label) pairs of out's train, val and test photos; test at most `test_cap`
    a class (a seeded draw, the same on every call), where every one would take too long."""
    with (out / "labels.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    train = [(r["path"], r["label"]) for r in rows if r["split"] == "train"]
    val = [(r["path"], r["label"]) for r in rows if r["split"] == "val"]
    testing = sorted(held(out).items())
    if test_cap is not None:
        by_label: dict[str, list[tuple[str, str]]] = {}
        for pair in testing:
            by_label.setdefault(pair[1], []).append(pair)
        rng = random.Random(0)
        testing = sorted(pair for pairs in by_label.values()
                         for pair in rng.sample(pairs, min(test_cap, len(pairs))))
    return train, val, testing


class Extractor:
    """The frozen backbone's pooled features (as `--model hub:WEIGHTS` builds it, with the
    padding its weights were trained with) of photos read as `corolla convert` reads them at
    `size`; `seconds`: the forward passes' alone (decoding not counted), `images` their count."""

    def __init__(self, weights: Path, size: int):
        from corolla import models
        from corolla.training import features

        self.spec = models.get(f"hub:{weights}")
        model = models.create_model(self.spec.name, 2, size, weights="imagenet",
                                    train_backbone=False)
        self.model, _ = features.split_model(model)
        self.size, self.seconds, self.images = size, 0.0, 0

    def __call__(self, out: Path, pairs):
        import numpy as np

        from corolla.data.prepare import image_files

        chunks = []
        for start in range(0, len(pairs), 256):
            paths = [str(out / path) for path, _ in pairs[start:start + 256]]
            images, failed = image_files.read_many(paths, self.size)
            if failed:
                raise SystemExit(f"unreadable: {next(iter(failed.items()))}")
            began = time.monotonic()
            chunks.append(self.model.predict(images.astype("float32"), batch_size=64,
                                             verbose=0))
            self.seconds += time.monotonic() - began
            self.images += len(images)
        return np.concatenate(chunks)


def probe(out: Path, weights: Path, size: int, test_cap: int | None = None) -> dict:
    """The figure a fine-tune must clearly beat: the frozen backbone's pooled features
    (`Extractor`) of the train + val photos, a scikit-learn logistic regression, scored on the
    test photos (at most `test_cap` a class, a seeded draw, where every one would take too
    long)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    began, before = time.monotonic(), os.getloadavg()
    train, val, testing = split_pairs(out, test_cap)
    fitting = train + val
    names = sorted({label for _, label in fitting})
    extractor = Extractor(weights, size)
    x, tx = extractor(out, fitting), extractor(out, testing)
    y, ty = [label for _, label in fitting], [label for _, label in testing]
    predicted = LogisticRegression(max_iter=3000).fit(x, y).predict(tx)
    return {"backbone": extractor.spec.description, "size": size, "fitted": len(fitting),
            "classes": len(names), "f1": f1_score(ty, predicted, average="macro"),
            "accuracy": accuracy_score(ty, predicted), "tested": len(ty),
            "seconds": time.monotonic() - began, "load_before": before,
            "load_after": os.getloadavg()}


def pace(log: str) -> str:
    """The trained step's seconds the run's time probe measured, from its log ("" if none)."""
    found = PACE.findall(log)
    return "; ".join(f"{float(s):.3g} s a step at {px} px" for px, s in found)


def train(out: Path, weights: Path, budget: str, seed: int, name: str,
          extra: str = "") -> dict:
    """`corolla train --data out/labels.csv --time budget` as run `name` under out/runs, its
    output shown and kept in out/runs/<name>.log; then its submission scored."""
    import json

    command = [sys.executable, "-m", "corolla.cli", "train", "--data",
               str(out / "labels.csv"), "--weights", str(weights), "--time", budget,
               "--seed", str(seed), "--runs-dir", str(out / "runs"), "--name", name,
               *shlex.split(extra)]
    print(f"$ {shlex.join(command)}  [{load()}]", flush=True)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    lines = []
    began, before = time.monotonic(), os.getloadavg()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p)}
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env) as process:
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line)
    seconds = time.monotonic() - began
    log = "".join(lines)
    (out / "runs" / f"{name}.log").write_text(log)
    if process.returncode == 2 and lines:  # refused, in one line: a row of its own
        return {"refused": lines[-1].strip(), "seconds": seconds, "load_before": before,
                "load_after": os.getloadavg()}
    if process.returncode:
        raise SystemExit(f"corolla train exited {process.returncode}")
    run = out / "runs" / name
    f1, accuracy, n = score(run, out)
    val = json.loads((run / "metrics.json").read_text())["f1_macro"]
    return {"f1": f1, "accuracy": accuracy, "tested": n, "val_f1": val, "seconds": seconds,
            "load_before": before, "load_after": os.getloadavg(), "pace": pace(log),
            **rung(run)}


def rung(run: Path) -> dict:
    """The backbone the run trained (`rung`: its weights folder's name, as a probe's
    `weights`) and its input size, from the run's config.toml: where `--weights` named a
    folder of preset folders, the ladder chose among them."""
    import tomllib

    model = tomllib.loads((run / "config.toml").read_text()).get("model", {})
    name, weights = str(model.get("name", "")), str(model.get("weights", ""))
    folder = name.partition("hub:")[2] if name.startswith("hub:") else weights
    return {"rung": Path(folder).name if "/" in folder else name,
            "size": model.get("input_size")}
