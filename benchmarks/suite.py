"""A suite, not one data set: public image-classification data of different character, each
laid out with a test split scored only at the end, the linear probe beside Corolla's timed
run on each, and one table of them all. Defaults are decided on the suite's mean and worst
row, never on one set.

    python benchmarks/suite.py prepare [--out /tmp/corolla-suite] [--only a,b]
        [--mirrors /work/.mirror] [--source NAME=DIR ...] [--seed 0]
    python benchmarks/suite.py probe [--only a,b] [--size 224] [--weights DIR]
    python benchmarks/suite.py probe --levers [--only a,b] [--test-cap 100]
        [--rungs lite0@192,lite0@224,lite1@240,lite2@260]
    python benchmarks/suite.py train --time 10m [--seeds 42,7] [--only a,b] [--extra "..."]
    python benchmarks/suite.py table [RESULTS.jsonl ...]

- prepare: each set's photos from its public GitHub repository (`SETS`: the repository and
  the commit read, where the mirror holds it; else its HEAD, said), fetched as a mirror under
  `--mirrors` (`owner+name/repo`, read file by file with git), or from `--source NAME=DIR` (a
  folder holding the set's folders, or a git repository). Each lands in OUT/NAME/ as
  `many_classes.py` lays Caltech-101 out: photos/ by class, labels.csv (train and val
  labelled, test unlabelled), test_labels.csv held apart, and source.json (repository,
  commit, photos a class). Per class a seeded draw of the set's fixed train and val photos,
  chosen to fit its character; the rest (up to the set's cap) are the test split.
- probe: the linear probe on each set (frozen features of train + val as `--model
  hub:WEIGHTS` builds them, a logistic regression, scored on test; one forward pass a photo).
- probe --levers: what moves the linear head's test macro F1, on each set and backbone rung
  (`--rungs NAME@SIZE`, NAME's folder `efficientnet_NAME_imagenet` beside `--weights`): its
  features' size and backbone, the photos it fits on (train, as a run's head; train + val, as
  the probe and a refit), and its C (0.01, the runs' first; `choose_c` on val from 0.01, 0.1
  and 1; by cross-validation; scikit-learn's default 1.0, the probe's and now the runs'
  `linear_head.C`); each rung's forward pass in images a second with
  the host's load. The features are kept in OUT/NAME/levers/ (the table again in seconds).
- train: `corolla train --data OUT/NAME/labels.csv --time T --seed S` on each set and seed,
  its submission.csv scored on the held labels.
- table: the rows of one or more results files (OUT/results.jsonl is where probe and train
  append theirs, a JSON object a line, so runs of several invocations or hosts merge) as one
  table: data, classes, photos a class (train/val/test), the probe's test macro F1, Corolla's,
  the whole command's seconds against T, the host's load before and after, and the pace the
  run's time probe measured (its trained step).

The data stays out of the repository. Run it on an otherwise idle host: the seconds are
figures too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import heldout
from heldout import REPO, WEIGHTS

OUT = Path("/tmp/corolla-suite")
MIRRORS = Path("/work/.mirror")


@dataclass(frozen=True)
class Set:
    """One data set: where its photos are, how its classes are read, how it is split."""
    character: str
    repo: str  # owner/name on GitHub
    commit: str  # the commit its figures were measured on
    folders: tuple[str, ...]  # folders of class folders (several pool their classes)
    train: int  # photos a class
    val: int
    test: int | None = None  # at most this many test photos a class (None: every other)
    left_out: frozenset[str] = frozenset()
    names: dict[str, str] | None = field(default=None, hash=False)  # folder -> class
    licence: str = ""
    files: tuple[str, ...] = ()  # read whole, by `listed`
    listed: Callable[[Path], dict[str, list[Path]]] | None = None  # classes from lists
    min_pixels: int = 0  # only photos of at least this many pixels


def at_least(photos: dict[str, list[Path]], pixels: int) -> dict[str, list[Path]]:
    """The photos of at least `pixels` pixels (their headers read, nothing decoded)."""
    from PIL import Image

    def size(path: Path) -> int:
        try:
            with Image.open(path) as image:
                return image.width * image.height
        except Exception:  # noqa: BLE001 - a file PIL cannot open is no photo of any size
            return 0

    return {name: [p for p in files if size(p) >= pixels] for name, files in photos.items()}


def cars(root: Path) -> dict[str, list[Path]]:
    """Stanford Cars' training half: cars_train/NNNNN.jpg, the class of each photo in their
    order in the devkit's train_perfect_preds.txt (1-based), the classes' names in
    cars_meta.mat ("/" in a name, as in "Ram C/V Cargo Van Minivan 2012", becomes "-")."""
    from scipy.io import loadmat

    names = [str(n[0]).strip().replace("/", "-")
             for n in loadmat(root / "cars_meta.mat")["class_names"][0]]
    labels = (root / "train_perfect_preds.txt").read_text().split()
    photos = sorted((root / "cars_train").glob("*.jpg"))
    if len(labels) != len(photos):
        raise SystemExit(f"{root}: {len(labels)} labels for {len(photos)} photos")
    classes: dict[str, list[Path]] = {}
    for photo, label in zip(photos, labels, strict=True):
        classes.setdefault(names[int(label) - 1], []).append(photo)
    return {name: classes[name] for name in sorted(classes)}


MONKEYS = {"n0": "mantled_howler", "n1": "patas_monkey", "n2": "bald_uakari",
           "n3": "japanese_macaque", "n4": "pygmy_marmoset", "n5": "white_headed_capuchin",
           "n6": "silvery_marmoset", "n7": "common_squirrel_monkey",
           "n8": "black_headed_night_monkey", "n9": "nilgiri_langur"}

SETS: dict[str, Set] = {
    "caltech101": Set(
        "many classes, few photos each (Caltech-101 objects)", "taibarehm/CVassimgement",
        "5e5ee696e6576f6ed4c674e3763f77e40242332a", ("caltech-101",), 10, 10,
        left_out=frozenset({"BACKGROUND_Google"}), licence="none stated (Caltech: CC BY 4.0)"),
    "monkeys": Set(
        "large photos: 10 monkey species, the originals of 1 MP and more (19-56 a class; up "
        "to 16 MP) at a commit before the repository resized them to 250 px",
        "nikhildutta333/Monkey-Species-Classification",
        "cce754e96b45e49613a83f4f5dd4ecdeb1bb3f33", ("training", "validation"), 10, 4,
        names=MONKEYS, min_pixels=1_000_000,
        licence="none stated (Kaggle's '10 Monkey Species')"),
    "cars": Set(
        "fine-grained: Stanford Cars' 196 models (its training half), 24-68 photos a class",
        "fmejbah/car_dataset1", "2ac6920297f51277ac4e24afd231c46d35077831", (), 10, 5,
        files=("cars_train", "train_perfect_preds.txt", "cars_meta.mat"), listed=cars,
        licence="none stated (Stanford Cars: non-commercial research)"),
    "scenes": Set(
        "scenes, small photos: Intel's 6 natural scenes at 150 x 150 (its train and test "
        "folders pooled, 1,713-1,960 a class)",
        "afroozsheikh/Intel-Image-Classifier", "268f8fc38fb3f7307c1861d619ee99ff4158a3f5",
        ("train", "test"), 50, 15, test=300,
        licence="none stated (Intel Image Classification on Kaggle)"),
    "textures": Set(
        "textures: 10 of DTD's 47 classes, 120 photos each, 300-640 px (DTD's own: the "
        "commit before the repository downscaled them)",
        "pan8915/DeepTexture", "596223ba404b0b6f70cacb97d2e9c6ea86bed801", ("images",),
        40, 20, licence="none stated (DTD: for research purposes)"),
    "trash": Set(
        "a few hundred photos a class: TrashNet's 6 classes (512 x 384)",
        "congduytran12/Trash-Classification-", "00212f2c18dcdb9045c74481eaae5baaf72537df",
        ("dataset-resized",), 90, 20, licence="none stated (TrashNet: MIT)"),
}


def mirror(repo: str, mirrors: Path) -> Path:
    """The fetched mirror of `repo` under `mirrors` (`owner+name/repo`, bare or a checkout)."""
    folder = mirrors / repo.replace("/", "+") / "repo"
    found = heldout.git_dir(folder)
    if found is None:
        raise SystemExit(f"no mirror of {repo} at {folder}: fetch it, or pass --source "
                         f"NAME=DIR")
    return found


def chosen(only: str) -> list[str]:
    names = [n for n in only.split(",") if n] if only else list(SETS)
    unknown = [n for n in names if n not in SETS]
    if unknown:
        raise SystemExit(f"unknown data set {unknown[0]!r}: choose among {', '.join(SETS)}")
    return names


def prepare(args) -> None:
    sources = {}
    for given in args.source:
        name, _, folder = given.partition("=")
        if name not in SETS or not folder:
            raise SystemExit(f"--source {given!r}: give NAME=DIR, NAME one of "
                             f"{', '.join(SETS)}")
        sources[name] = Path(folder)
    for name in chosen(args.only):
        spec, out = SETS[name], args.out / name
        if out.exists():
            print(f"{out} exists: kept (remove it to lay it out again)")
            continue
        source = sources.get(name) or mirror(spec.repo, args.mirrors)
        read_at = heldout.commit(source, spec.commit)
        if read_at and read_at != spec.commit:
            print(f"{name}: {spec.repo} is at {read_at[:12]}, the suite's figures at "
                  f"{spec.commit[:12]}: its draw may differ", flush=True)
        out.mkdir(parents=True)
        try:
            root = heldout.extract(source, spec.folders, out / "raw", spec.left_out,
                                   spec.files, read_at or "HEAD")
            photos = spec.listed(root) if spec.listed else \
                heldout.by_class(root, spec.folders, spec.left_out, spec.names)
            if spec.min_pixels:
                photos = at_least(photos, spec.min_pixels)
            counts = heldout.lay_out(photos, out, spec.train, spec.val, args.seed, spec.test)
        except BaseException:
            shutil.rmtree(out)  # not half laid out: the next prepare starts it again
            raise
        shutil.rmtree(out / "raw", ignore_errors=True)
        tests = [min(len(files) - spec.train - spec.val, spec.test or len(files))
                 for files in photos.values()]
        (out / "source.json").write_text(json.dumps({
            "name": name, "character": spec.character, "repo": spec.repo,
            "licence": spec.licence,
            "commit": read_at or "(a folder)", "seed": args.seed, "classes": len(photos),
            "train": spec.train, "val": spec.val, "test": [min(tests), max(tests)],
            "photos": dict(counts)}, indent=1) + "\n")
        print(f"{out}: {len(photos)} classes; train {counts['train']}, val {counts['val']}, "
              f"test {counts['test']} ({spec.train}/{spec.val}/{min(tests)}-{max(tests)} a "
              f"class)", flush=True)


def _described(out: Path) -> dict:
    path = out / "source.json"
    if not path.is_file():
        raise SystemExit(f"{out} is not laid out: run `suite.py prepare` first")
    return json.loads(path.read_text())


def _append(args, row: dict) -> None:
    row = {"host": os.uname().nodename, "cores": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d %H:%M"), "weights": args.weights.name, **row}
    with (args.out / "results.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")


def probe(args) -> None:
    for name in chosen(args.only):
        out = args.out / name
        described = _described(out)
        r = heldout.probe(out, args.weights, args.size, args.test_cap)
        print(f"{name}: linear probe ({r['backbone']}, {r['size']} px) on {r['fitted']} "
              f"train + val photos, {r['classes']} classes: test macro F1 {r['f1']:.4f}, "
              f"accuracy {r['accuracy']:.4f} on {r['tested']} photos; {r['seconds']:.0f} s; "
              f"{heldout.load()}", flush=True)
        _append(args, {"kind": "probe", "data": name, **_shape(described), **r,
                       "test_cap": args.test_cap})


# The head's C of the levers table: the fixed C the runs had first, and the grid later chosen
# from on val (the best val macro F1, a tie keeping the C nearest the fixed one by ratio, then
# the smaller), or by 3-fold cross-validation on train + val.
FIXED_C = 0.01
GRID = (0.01, 0.1, 1.0)


def _best_c(scores: dict) -> float:
    best = max(scores.values())
    tied = [c for c, f in scores.items() if f >= best - 1e-9]
    return min(tied, key=lambda c: (round(abs(math.log(c / FIXED_C)), 6), c))


def choose_c(x, y, vx, vy, classes: int) -> float:
    from corolla.training import linear_head

    return _best_c({c: linear_head.score(vx, vy, *linear_head.fit(x, y, classes, None, c))
                    for c in GRID})


def choose_c_cv(x, y, classes: int, folds: int = 3) -> float:
    import numpy as np
    from sklearn.model_selection import StratifiedKFold

    from corolla.training import linear_head

    k = max(2, min(folds, int(np.bincount(y)[np.unique(y)].min())))
    splits = list(StratifiedKFold(k, shuffle=True, random_state=0).split(x, y))
    return _best_c({c: float(np.mean([linear_head.score(x[b], y[b], *linear_head.fit(
        x[a], y[a], classes, None, c)) for a, b in splits])) for c in GRID})


def levers(args) -> None:
    """The linear head's levers on each set and rung, one table (`probe --levers`)."""
    import numpy as np

    from corolla.training import linear_head

    rungs = [(name, int(size)) for name, _, size in
             (r.partition("@") for r in args.rungs.split(","))]
    rows = []
    for name in chosen(args.only):
        out = args.out / name
        _described(out)
        pairs = heldout.split_pairs(out, args.test_cap)
        names = sorted({label for _, label in pairs[0] + pairs[1]})
        for rung, size in rungs:
            weights = args.weights.parent / f"efficientnet_{rung}_imagenet"
            cache = out / "levers" / f"{rung}-{size}-{args.test_cap}.npz"
            if not cache.is_file():
                extractor, load = heldout.Extractor(weights, size), heldout.load()
                x = [extractor(out, split) for split in pairs]
                cache.parent.mkdir(exist_ok=True)
                np.savez(cache, train=x[0], val=x[1], test=x[2],
                         speed=extractor.images / extractor.seconds, load=load)
            saved = np.load(cache)
            (x, vx, tx), (y, vy, ty) = (saved["train"], saved["val"], saved["test"]), \
                [np.array([names.index(label) for _, label in split]) for split in pairs]
            both, both_y = np.concatenate([x, vx]), np.concatenate([y, vy])

            def f1(c, fitted=x, labels=y):
                return linear_head.score(tx, ty, *linear_head.fit(fitted, labels,
                                                                  len(names), None, c))

            c = choose_c(x, y, vx, vy, len(names))
            cv = choose_c_cv(both, both_y, len(names))
            row = {"data": name, "rung": f"{rung}@{size}", "tested": len(ty),
                   "train C.01": f1(FIXED_C), "train C val": f1(c),
                   "train+val C.01": f1(FIXED_C, both, both_y),
                   "train+val C val": f1(c, both, both_y), "C": c,
                   "train+val C1": f1(1.0, both, both_y),
                   "train+val C cv": f1(cv, both, both_y), "C cv": cv,
                   "images/s": float(saved["speed"]), "load": str(saved["load"])}
            rows.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "levers.json").write_text(json.dumps(rows, indent=1) + "\n")
    levers_table(rows)


LEVERS = ("train C.01", "train C val", "train+val C.01", "train+val C val", "train+val C1",
          "train+val C cv")


def levers_table(rows: list[dict]) -> None:
    """The rows of `levers`, then each rung's mean and worst gain over the sets: against the
    run's head before these levers (the first rung, train, C 0.01), and against the first rung
    with the same lever (what a larger rung adds: `models.ladder.SUITE`'s gains)."""
    print("| data | rung | test photos | " + " | ".join(LEVERS) + " | C on val | C by CV | "
          "forward images/s (load) |")
    print("|" + "---|" * (len(LEVERS) + 6))
    for r in rows:
        print(f"| {r['data']} | {r['rung']} | {r['tested']} | "
              + " | ".join(f"{r[k]:.4f}" for k in LEVERS)
              + f" | {r['C']:g} | {r['C cv']:g} | {r['images/s']:.0f} "
              f"({r['load'].split(' (')[0]}) |")
    foot = {r["data"]: r for r in rows if r["rung"] == rows[0]["rung"]}
    for title, base in ((f"against {rows[0]['rung']} {LEVERS[0]}", lambda r, k: LEVERS[0]),
                        (f"against {rows[0]['rung']} with the same lever", lambda r, k: k)):
        print(f"\nmean (worst) gain of each {title}, over {len(foot)} sets:\n")
        print("| rung | " + " | ".join(LEVERS) + " |")
        print("|" + "---|" * (len(LEVERS) + 1))
        for rung in dict.fromkeys(r["rung"] for r in rows):
            mine = [r for r in rows if r["rung"] == rung and r["data"] in foot]
            cells = []
            for k in LEVERS:
                gains = [r[k] - foot[r["data"]][base(r, k)] for r in mine]
                cells.append(f"{statistics.mean(gains):+.4f} ({min(gains):+.4f})")
            print(f"| {rung} | " + " | ".join(cells) + " |")


def train(args) -> None:
    for name in chosen(args.only):
        out = args.out / name
        described = _described(out)
        for seed in args.seeds:
            tag = "".join(c if c.isalnum() else "-"
                          for c in args.extra.replace("--", "")).strip("-")
            run = f"{name}-{args.time}-{seed}" + (f"-{tag}" if tag else "")
            r = heldout.train(out, args.weights, args.time, seed, run, args.extra)
            if "refused" in r:
                print(f"{name} --time {args.time} seed {seed}: {r['refused']}", flush=True)
                _append(args, {"kind": "train", "data": name, "time": args.time, "seed": seed,
                               "extra": args.extra, "run": run, **_shape(described), **r})
                continue
            print(f"{name} --time {args.time} seed {seed}: test macro F1 {r['f1']:.4f} "
                  f"(accuracy {r['accuracy']:.4f}), val macro F1 {r['val_f1']:.4f}; the "
                  f"command took {r['seconds']:.0f} s; {heldout.load()}", flush=True)
            _append(args, {"kind": "train", "data": name, "time": args.time, "seed": seed,
                           "extra": args.extra, "run": run, **_shape(described), **r})
    table([args.out / "results.jsonl"])


def _shape(described: dict) -> dict:
    low, high = described["test"]
    return {"classes": described["classes"],
            "per_class": f"{described['train']}/{described['val']}/"
                         + (f"{low}" if low == high else f"{low}-{high}")}


def _seconds(text: str) -> float:
    from corolla.config.schema import duration_seconds

    return duration_seconds(text, "--time")


def table(files: list[Path]) -> None:
    """One table of the probe and train rows of `files`: a row per data set and train run,
    the latest probe of the same backbone beside it."""
    rows = []
    for path in files:
        if not path.is_file():
            raise SystemExit(f"{path}: no such results file")
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    probes = {}  # the latest of each set, backbone and size
    for row in rows:
        if row["kind"] == "probe":
            probes[(row["data"], row["weights"], row.get("size"))] = row
    header = ["data", "classes", "photos a class (train/val/test)",
              "probe F1 at the run's size (at 224 px)", "Corolla F1", "seconds / T",
              "load before-after", "pace"]
    lines, gains, gains224 = [], [], []
    trained = {r["data"] for r in rows if r["kind"] == "train"}
    shown = [r for r in rows if r["kind"] == "train"] + \
        [r for r in probes.values() if r["data"] not in trained]
    order = list(dict.fromkeys(r["data"] for r in rows))
    shown.sort(key=lambda r: order.index(r["data"]))
    for row in shown:
        # The probes of the backbone the run trained (the ladder's rung where it chose one):
        # on its own frozen features (the run's input size), and at 224 px.
        backbone = row.get("rung") or row["weights"]
        p = probes.get((row["data"], backbone, row.get("size")))
        at224 = probes.get((row["data"], backbone, 224))
        if row["kind"] == "probe":
            p, at224 = row, None
        elif p is None:
            p, at224 = at224, None
        cells = [row["data"], str(row["classes"]), row["per_class"],
                 "-" if not p else f"{p['f1']:.4f}" + (
                     f" ({p['tested']} test photos)" if p.get("test_cap") else "")
                 + (f" ({at224['f1']:.4f})" if at224 and at224 is not p else "")]
        if row.get("refused"):
            least = re.search(r"give at least (--time \S+)", row["refused"])
            cells += [f"refused (--time {row['time']}, seed {row['seed']}): "
                      + (f"{least.group(1)} needed" if least else row["refused"]),
                      f"{row['seconds']:.0f} / {_seconds(row['time']):.0f}"]
        elif row["kind"] == "train":
            rung = f"{row['rung'].replace('efficientnet_', '').replace('_imagenet', '')}" \
                f"@{row['size']}, " if row.get("rung") else ""
            cells += [f"{row['f1']:.4f} ({rung}--time {row['time']}, seed {row['seed']}"
                      + (f", {row['extra']}" if row["extra"] else "") + ")",
                      f"{row['seconds']:.0f} / {_seconds(row['time']):.0f}"]
            if p:
                gains.append(row["f1"] - p["f1"])
            if at224 or (p and p.get("size") == 224):
                gains224.append(row["f1"] - (at224 or p)["f1"])
        else:
            cells += ["-", f"{row['seconds']:.0f} (probe)"]
        cells += [f"{row['load_before'][0]:.1f}-{row['load_after'][0]:.1f} "
                  f"({row['cores']} cores)", row.get("pace") or "-"]
        lines.append(cells)
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for cells in lines:
        print("| " + " | ".join(cells) + " |")
    if gains:
        print(f"\nCorolla - probe at the run's size (or 224 px where none): mean "
              f"{statistics.mean(gains):+.4f}, worst {min(gains):+.4f} ({len(gains)} runs)")
    if gains224:
        print(f"Corolla - probe at 224 px: mean {statistics.mean(gains224):+.4f}, worst "
              f"{min(gains224):+.4f} ({len(gains224)} runs)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("prepare", "probe", "train"):
        s = sub.add_parser(name)
        s.add_argument("--out", type=Path, default=OUT)
        s.add_argument("--only", default="", help="data sets, comma-separated (default: all)")
        if name == "prepare":
            s.add_argument("--mirrors", type=Path, default=MIRRORS)
            s.add_argument("--source", action="append", default=[], metavar="NAME=DIR")
            s.add_argument("--seed", type=int, default=0)
        else:
            s.add_argument("--weights", type=Path, default=WEIGHTS)
        if name == "probe":
            s.add_argument("--size", type=int, default=224)
            s.add_argument("--levers", action="store_true",
                           help="the linear head's levers on each set and rung, one table")
            s.add_argument("--rungs", default="lite0@192,lite0@224,lite1@240,lite2@260")
            s.add_argument("--test-cap", type=int, default=None,
                           help="score on at most this many test photos a class (a seeded "
                                "draw), where all would take too long")
        if name == "train":
            s.add_argument("--time", required=True)
            s.add_argument("--seeds", type=lambda t: [int(x) for x in t.split(",")],
                           default=[42])
            s.add_argument("--extra", default="")
    s = sub.add_parser("table")
    s.add_argument("files", type=Path, nargs="*", default=[OUT / "results.jsonl"])
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(REPO / "src"))
    if args.command == "table":
        table(args.files)
    else:
        run = levers if getattr(args, "levers", False) else \
            {"prepare": prepare, "probe": probe, "train": train}[args.command]
        run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
