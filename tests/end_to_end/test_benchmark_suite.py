"""benchmarks/suite.py lays each data set out as a competition's data from its fetched
repository (read with git) or a folder: the set's train and val photos a class by a
seeded draw, the test photos unlabelled with their classes held apart, the set's classes as
its source names them. A tiny fake source; no network, no TensorFlow."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections import Counter

import pytest

from helpers.processes import REPO

SCRIPT = REPO / "benchmarks" / "suite.py"


def suite(*args, cwd):
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                         timeout=180, cwd=cwd)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def photos(root, counts: dict[str, int]) -> None:
    for folder, n in counts.items():
        (root / folder).mkdir(parents=True)
        for i in range(n):
            name = f"{folder.rsplit('/', 1)[-1]}_{i:04d}.jpg"
            (root / folder / name).write_bytes(b"\xff\xd8 not decoded by prepare: " +
                                               name.encode())


def rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


def test_a_fetched_mirror_is_laid_out_with_the_sets_split_and_test_labels_held_apart(
        tmp_path):
    # The textures set: DTD's class folders under images/, 40 train and 20 val a class; the
    # mirror a bare repository, as fetched, lacking one photo's file (a fetch leaves its
    # largest files out).
    work = tmp_path / "work"
    photos(work, {"images/banded": 70, "images/zigzagged": 65})
    (work / "README.md").write_text("not a photo\n")
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "photos")
    repo = tmp_path / "mirrors" / "pan8915+DeepTexture" / "repo"
    # A local clone copies the objects as they are: one file each, as `git add` wrote them.
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(repo)], check=True,
                   capture_output=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    absent = subprocess.run(["git", "-C", str(repo), "rev-parse",
                             "HEAD:images/zigzagged/zigzagged_0000.jpg"], capture_output=True,
                            text=True, check=True).stdout.strip()
    (repo / "objects" / absent[:2] / absent[2:]).unlink()

    said = suite("prepare", "--only", "textures", "--mirrors", str(tmp_path / "mirrors"),
                 "--out", str(tmp_path / "a"), cwd=tmp_path)

    out = tmp_path / "a" / "textures"
    labels, held = rows(out / "labels.csv"), rows(out / "test_labels.csv")
    assert Counter((r["label"], r["split"]) for r in labels if r["split"] != "test") == {
        ("banded", "train"): 40, ("banded", "val"): 20,
        ("zigzagged", "train"): 40, ("zigzagged", "val"): 20}
    tests = [r for r in labels if r["split"] == "test"]
    assert {r["label"] for r in tests} == {""}  # as a competition's test split
    assert sorted(r["path"] for r in tests) == sorted(r["path"] for r in held)
    assert Counter(r["label"] for r in held) == {"banded": 10, "zigzagged": 4}
    # Every photo once, under its class, as the repository holds it; nothing else of it.
    assert len({r["path"] for r in labels}) == 134
    assert all((out / r["path"]).is_file() for r in labels)
    assert "photos/zigzagged/zigzagged_0000.jpg" not in {r["path"] for r in labels}
    assert "1 of 135 files absent" in said
    assert (out / "photos" / "banded" / "banded_0007.jpg").read_bytes() == \
        (work / "images" / "banded" / "banded_0007.jpg").read_bytes()
    assert {r["path"].split("/")[1] for r in labels} == {"banded", "zigzagged"}
    assert all(r["path"].split("/")[1] == r["label"] for r in held)
    assert not (out / "raw").exists()
    described = json.loads((out / "source.json").read_text())
    assert described["commit"] == head and described["repo"] == "pan8915/DeepTexture"
    assert (described["classes"], described["train"], described["val"], described["test"]) \
        == (2, 40, 20, [4, 10])
    assert "the suite's figures at" in said  # the mirror is not at the recorded commit

    # The draw is seeded: the same seed lays the same photos out in the same splits.
    suite("prepare", "--only", "textures", "--mirrors", str(tmp_path / "mirrors"),
          "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert rows(tmp_path / "b" / "textures" / "labels.csv") == labels


def png(width: int, height: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 60)).save(buffer, "PNG")
    return buffer.getvalue()


def test_a_folder_source_pools_its_split_folders_names_its_classes_keeps_its_large_photos(
        tmp_path):
    # The monkeys set: the source's own training/ and validation/ folders pooled, its n0..n9
    # folders named by species, only photos of 1 MP and more; 10 train and 4 val a class.
    source = tmp_path / "monkeys"
    large, small = png(1000, 1000), png(999, 1000)
    for folder, n in {"training/n0": 12, "validation/n0": 6, "training/n3": 15,
                      "training/extra": 20}.items():
        (source / folder).mkdir(parents=True)
        for i in range(n):
            (source / folder / f"{i:04d}.png").write_bytes(large)
    for i in range(5):  # under 1 MP: left out
        (source / "training" / "n3" / f"small-{i}.png").write_bytes(small)
    before = sorted(p.relative_to(source) for p in source.rglob("*"))

    suite("prepare", "--only", "monkeys", "--source", f"monkeys={source}",
          "--out", str(tmp_path / "out"), cwd=tmp_path)

    out = tmp_path / "out" / "monkeys"
    labels, held = rows(out / "labels.csv"), rows(out / "test_labels.csv")
    assert Counter(r["label"] for r in labels if r["split"] == "train") == {
        "mantled_howler": 10, "japanese_macaque": 10}
    # training/n0/0000.png and validation/n0/0000.png: both kept, the same name numbered.
    assert Counter(r["label"] for r in held) == {"mantled_howler": 4, "japanese_macaque": 1}
    assert len({r["path"] for r in labels}) == 18 + 15
    assert not any("small" in r["path"] for r in labels)
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before
    assert json.loads((out / "source.json").read_text())["commit"] == "(a folder)"


def test_the_table_merges_the_rows_of_several_results_files(tmp_path):
    """A probe measured in one invocation stands beside the timed runs of another: the probe
    of the backbone and input size the run trained (its own frozen features), the 224-px one
    beside it; a refused run is a row naming the least budget; a set with a probe and no run
    yet keeps its row; the gain over each probe is summed up."""
    common = {"host": "h", "cores": 2, "weights": "lite0", "classes": 6,
              "per_class": "90/20/27-484", "load_before": [1.0, 1, 1],
              "load_after": [2.5, 1, 1]}
    first = [{**common, "kind": "probe", "data": "trash", "f1": 0.9, "seconds": 100.0,
              "size": 192},
             {**common, "kind": "probe", "data": "trash", "f1": 0.91, "seconds": 120.0,
              "size": 224},
             {**common, "kind": "probe", "data": "textures", "f1": 0.8, "seconds": 50.0,
              "size": 224},
             {**common, "kind": "probe", "data": "scenes", "f1": 0.7, "seconds": 50.0,
              "size": 224}]
    second = [{**common, "kind": "train", "data": "trash", "time": "3m", "seed": s,
               "extra": "", "f1": f1, "seconds": 190.0, "pace": "0.8 s a step at 192 px",
               "rung": "lite0", "size": 192}
              for s, f1 in ((42, 0.92), (7, 0.87))]
    second.append({**common, "kind": "train", "data": "textures", "time": "3m", "seed": 42,
                   "extra": "", "seconds": 60.0,
                   "refused": "corolla: error: --time 3m is too short ...; give at least "
                              "--time 320s"})
    for name, table in (("a.jsonl", first), ("b.jsonl", second)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in table))

    said = suite("table", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), cwd=tmp_path)

    lines = [line for line in said.splitlines() if line.startswith("| ")][1:]
    assert [line.split(" | ")[:5] for line in lines] == [
        ["| trash", "6", "90/20/27-484", "0.9000 (0.9100)",
         "0.9200 (lite0@192, --time 3m, seed 42)"],
        ["| trash", "6", "90/20/27-484", "0.9000 (0.9100)",
         "0.8700 (lite0@192, --time 3m, seed 7)"],
        ["| textures", "6", "90/20/27-484", "0.8000",
         "refused (--time 3m, seed 42): --time 320s needed"],
        ["| scenes", "6", "90/20/27-484", "0.7000", "-"]]
    assert "190 / 180" in lines[0] and "1.0-2.5 (2 cores)" in lines[0]
    assert lines[0].endswith("| 0.8 s a step at 192 px |")
    assert "Corolla - probe at the run's size (or 224 px where none): mean -0.0050, worst " \
        "-0.0300 (2 runs)" in said
    assert "Corolla - probe at 224 px: mean -0.0150, worst -0.0400 (2 runs)" in said


def test_a_set_whose_classes_are_listed_takes_each_photos_class_from_the_lists(tmp_path):
    """Stanford Cars: cars_train/NNNNN.jpg, the class of each in order in
    train_perfect_preds.txt, the names in cars_meta.mat ("/" in a name cannot be a folder)."""
    import numpy as np
    from scipy.io import savemat

    source = tmp_path / "cars"
    (source / "cars_train").mkdir(parents=True)
    labels = [1, 2] * 20 + [2]  # 20 photos of the first class, 21 of the second
    for i in range(len(labels)):
        (source / "cars_train" / f"{i + 1:05d}.jpg").write_bytes(b"\xff\xd8 %d" % i)
    (source / "train_perfect_preds.txt").write_text("".join(f"{n}\n" for n in labels))
    # As the devkit stores them: a 1 x N array of cells, one name each.
    names = np.empty((1, 2), dtype=object)
    names[0, 0], names[0, 1] = "Ram C/V Cargo Van Minivan 2012", "Audi TTS Coupe 2012"
    savemat(source / "cars_meta.mat", {"class_names": names})

    suite("prepare", "--only", "cars", "--source", f"cars={source}",
          "--out", str(tmp_path / "out"), cwd=tmp_path)

    out = tmp_path / "out" / "cars"
    labels_csv = rows(out / "labels.csv")
    by_photo = {r["path"].rsplit("/", 1)[1]: r for r in labels_csv}
    held = {r["path"].rsplit("/", 1)[1]: r["label"] for r in rows(out / "test_labels.csv")}
    classes = {name: held.get(name) or by_photo[name]["label"] for name in by_photo}
    assert classes["00001.jpg"] == classes["00003.jpg"] == "Ram C-V Cargo Van Minivan 2012"
    assert classes["00002.jpg"] == classes["00041.jpg"] == "Audi TTS Coupe 2012"
    assert Counter(classes.values()) == {"Ram C-V Cargo Van Minivan 2012": 20,
                                         "Audi TTS Coupe 2012": 21}
    assert Counter(r["split"] for r in labels_csv) == {"train": 20, "val": 10, "test": 11}


@pytest.mark.large  # its subprocess imports corolla.training (TensorFlow): ~40 s on 2 cores
def test_the_linear_heads_levers_are_one_table_from_the_features_kept(tmp_path):
    """`probe --levers` on features kept from an earlier invocation (no backbone run): a row per
    set and rung with each lever's test macro F1, then each rung's mean and worst gain. A rung
    whose features separate the test photos and the foot's that do not."""
    import numpy as np

    out = tmp_path / "suite" / "trash"
    rows, held = [], []
    for k in range(12):
        label = "ab"[k % 2]
        split = "train" if k < 6 else "val" if k < 8 else "test"
        rows.append([f"photos/{label}/{k}.jpg", "" if split == "test" else label, split])
        if split == "test":
            held.append([f"photos/{label}/{k}.jpg", label])
    (out / "levers").mkdir(parents=True)
    for name, table in (("labels.csv", [["path", "label", "split"], *rows]),
                        ("test_labels.csv", [["path", "label"], *held])):
        with (out / name).open("w", newline="") as f:
            csv.writer(f).writerows(table)
    (out / "source.json").write_text(json.dumps({"classes": 2, "train": 3, "val": 1,
                                                 "test": [2, 2]}))
    labels = {"train": [0, 1] * 3, "val": [0, 1], "test": [0, 0, 1, 1]}  # test sorted by path

    def features(separate: bool):
        rng = np.random.default_rng(0)
        return {split: (np.array(y)[:, None] * 2.0 - 1.0) * (10.0 if separate else 0.0)
                + rng.normal(size=(len(y), 4)) * (0.01 if separate else 1.0)
                for split, y in labels.items()}

    for rung, separate in (("lite0-192", False), ("lite1-240", True)):
        np.savez(out / "levers" / f"{rung}-100.npz", **features(separate), speed=20.0,
                 load="load 1.00 1.00 1.00 (2 cores)")
    said = suite("probe", "--levers", "--out", str(tmp_path / "suite"), "--only", "trash",
                 "--rungs", "lite0@192,lite1@240", "--test-cap", "100", cwd=tmp_path)
    assert "| trash | lite1@240 | 4 | 1.0000 | 1.0000 | 1.0000 | 1.0000 | 1.0000 | 1.0000 |" \
        in said
    assert "| trash | lite0@192 | 4 |" in said and "| 20 (load 1.00 1.00 1.00) |" in said
    foot = json.loads((tmp_path / "suite" / "levers.json").read_text())[0]["train C.01"]
    assert foot < 1.0 and f"| lite1@240 | {1 - foot:+.4f} ({1 - foot:+.4f}) |" in said
