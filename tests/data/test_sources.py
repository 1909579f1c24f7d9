"""Image folders, CSVs and feature-mapped TFRecords as data: `corolla convert`, the size a
folder is converted at, and what bad input does (`train --data FOLDER` end to end:
end_to_end/test_train_on_a_folder.py)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from corolla.cli import main
from corolla.data import datasets, layout, pipeline, records
from corolla.data.prepare import sharding, sources
from corolla.data.prepare.image_files import load_image
from corolla.data.prepare.settings import Settings
from corolla.data.prepare.summary import Summary, summary_lines
from corolla.errors import UserError
from helpers.images import PHOTO_CLASSES as CLASSES, make_photos, smooth


def _snapshot(root: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _read_all(data: layout.Layout, split: str):
    """{id: (label or None, image uint8)} of a split, through the training pipeline's reader."""
    part = data.split(split)
    out = {}
    for example in pipeline.read(part, data.image_size, ordered=True):
        label = int(example["label"]) if "label" in example else None
        out[example["id"].numpy().decode()] = (label, example["image"].numpy())
    return out


@pytest.fixture(scope="module")
def converted(photos, tmp_path_factory) -> tuple[Path, Summary]:
    root, _ = photos
    out = tmp_path_factory.mktemp("out") / "recs"
    before = _snapshot(root)
    # A tiny shard size: several files per split, for the sharding test below.
    settings = Settings(image_sizes=(16, 24), val_fraction=0.3, test_fraction=0.15,
                        shard_mb=0.001)
    summary = sharding.convert(sources.scan(root), out, settings, log=lambda *a: None)
    assert _snapshot(root) == before  # SRC is only read
    return out, summary


def test_a_folder_converts_to_the_competition_layout_and_reads_back_the_same(photos,
                                                                             converted):
    root, made = photos
    out, summary = converted
    assert not summary.skipped
    assert (out / "classes.txt").read_text().splitlines() == list(CLASSES)
    for size in (16, 24):
        data = datasets.open_data(str(out), size)
        assert data.class_names == CLASSES and data.image_size == size
        seen = {}
        for split in ("train", "val", "test"):
            names = [Path(p).name for p in data.split(split).paths]
            assert all(n.startswith(f"{i:02d}-{size}x{size}-") for i, n in enumerate(names))
            for example_id, (label, image) in _read_all(data, split).items():
                assert example_id not in seen
                seen[example_id] = label
                assert (label is None) == (split == "test")
                if label is not None:
                    assert CLASSES[label] == made[example_id]
                direct = load_image(str(root / example_id), size)
                assert image.shape == direct.shape == (size, size, 3)
                assert np.abs(image.astype(int) - direct).mean() < 4, example_id
        assert set(seen) == set(made)  # every image once, named by its relative path
    counts = {name: sum(c.values()) for name, c in summary.counts.items()}
    assert counts == {"train": 11, "val": 6, "test": 4}  # scikit-learn rounds test up
    # Stratified: every class in val (2 each of 21 images x 0.3)
    assert summary.counts["val"] == {0: 2, 1: 2, 2: 2}


def test_a_conversion_is_deterministic_and_the_seed_changes_the_split(photos, tmp_path):
    root, _ = photos
    source = sources.scan(root)

    def ids(seed, name):
        out = tmp_path / name
        sharding.convert(source, out, Settings(image_sizes=(8,), seed=seed),
                         log=lambda *a: None)
        data = layout.open_layout(str(out))
        return {s: pipeline.metadata(data.split(s))["ids"] for s in ("train", "val")}

    first, again, other = ids(1, "a"), ids(1, "b"), ids(2, "c")
    assert first == again  # same ids in the same order
    assert set(first["val"]) != set(other["val"])


def test_exif_rotation_greyscale_alpha_and_padding():
    import io

    from PIL import Image

    image = Image.new("RGB", (40, 20), (200, 30, 30))  # wide, red
    exif = image.getexif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=exif.tobytes())
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"exif-{os.getpid()}.jpg"
    path.write_bytes(buffer.getvalue())
    try:
        padded = load_image(str(path), 20, "pad")  # upright: 10 wide, 20 tall
    finally:
        path.unlink()
    assert padded[:, :4].max() < 10 and padded[:, -4:].max() < 10  # black bands left, right
    assert padded[10, 10, 0] > 150 and padded[0, 10, 0] > 150  # red from top to bottom


def test_a_csv_of_paths_and_labels(photos, tmp_path):
    root, made = photos
    ids = sorted(made)
    table = tmp_path / "labels.csv"
    with table.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["path", "label", "split"])
        for k, example_id in enumerate(ids):
            # relative (via ..) and absolute paths; the split column fixes some rows' splits
            path = os.path.relpath(root / example_id, tmp_path) if k % 2 else root / example_id
            split = "val" if k % 5 == 0 else "test" if k % 7 == 0 else ""
            label = "" if split == "test" else made[example_id]
            writer.writerow([path, label, split])
    source = sources.scan(table)
    assert source.kind == "csv" and source.class_names == CLASSES
    out = tmp_path / "recs"
    sharding.convert(source, out, Settings(image_sizes=(16,)), log=lambda *a: None)
    data = datasets.open_data(str(out))
    val, test = _read_all(data, "val"), _read_all(data, "test")
    train = _read_all(data, "train")
    assert len(val) == 5 and len(test) == 2 and len(train) == len(ids) - 7
    # ids: the paths as the CSV writes them (absolute, or relative to the CSV's folder)
    assert {"/".join(Path(i).parts[-2:]) for i in {**train, **val, **test}} == set(made)
    assert any(i.startswith("../") for i in train) and any(i.startswith("/") for i in train)
    for example_id, (label, _) in {**train, **val}.items():
        assert CLASSES[label] == made["/".join(Path(example_id).parts[-2:])]


def test_integer_labels_with_a_classes_file(photos, tmp_path):
    root, made = photos
    (tmp_path / "classes.txt").write_text("".join(f"{c}\n" for c in CLASSES))
    (tmp_path / "data.csv").write_text("path,label\n" + "".join(
        f"{root / i},{CLASSES.index(c)}\n" for i, c in sorted(made.items())))
    source = sources.scan(tmp_path / "data.csv")
    assert source.class_names == CLASSES
    assert [CLASSES[i.label] for i in source.items] == [made[i] for i in sorted(made)]


def test_records_with_other_feature_names_are_read_through_a_mapping(tmp_path):
    size_dir = tmp_path / "tfrecords-jpeg-8x8"
    rng = np.random.default_rng(1)
    for split, n in (("train", 6), ("val", 4)):
        (size_dir / split).mkdir(parents=True)
        with tf.io.TFRecordWriter(str(size_dir / split / f"00-8x8-{n}.tfrec")) as writer:
            for k in range(n):
                jpeg = tf.io.encode_jpeg(smooth(rng, 8, 8)).numpy()
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                    "target": tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 3])),
                    "name": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[f"{split}-{k}".encode()]))})).SerializeToString())
    mapping = records.Features(image="image_raw", label="target", id="name")
    data = datasets.open_data(str(tmp_path), features=mapping)
    from corolla.data import check

    checked = check.check_split(data.split("train"), 3)
    assert checked.features == mapping
    got = _read_all(data, "train")
    assert {i: lab for i, (lab, _) in got.items()} == {f"train-{k}": k % 3 for k in range(6)}
    assert pipeline.metadata(data.split("val"))["ids"] == [f"val-{k}" for k in range(4)]
    with pytest.raises(UserError, match="00-8x8-6.tfrec"):  # the competition's names: named
        check.check_split(datasets.open_data(str(tmp_path)).split("train"), 3)


def test_workers_read_disjoint_parts_that_cover_converted_data(converted):
    out, _ = converted
    split = layout.open_layout(str(out), 16).split("train")
    assert len(split.paths) > 1
    for workers in (2, len(split.paths) + 1):  # by file, then by record
        parts = [[e["id"].numpy() for e in pipeline.read(split, 16, ordered=False,
                                                         shard=(workers, i))]
                 for i in range(workers)]
        seen = [x for part in parts for x in part]
        assert len(seen) == len(set(seen)) == split.count


def test_shard_count():
    mb = sharding.MB
    assert sharding.shard_count(12753, 12753 * 70_000, 150) == 8  # a TPU v3-8's 8 cores
    assert sharding.shard_count(100_000, 30_000 * mb, 150) == 200  # ~150 MB files
    assert sharding.shard_count(300, 3 * mb, 150) == 1  # small: one file
    assert sharding.shard_count(3, 0.1 * mb, 0.001) == 3  # never an empty file


def test_unreadable_images_are_skipped_and_listed_or_with_strict_an_error(tmp_path, capsys):
    root = tmp_path / "photos"
    make_photos(root, per_class=4)
    (root / "aster" / "corrupt.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    good = (root / "bluebell" / "00.jpg").read_bytes()
    (root / "bluebell" / "truncated.jpg").write_bytes(good[: len(good) // 2])
    assert main(["convert", str(root), str(tmp_path / "out"), "--image-size", "8",
                 "--val-fraction", "0.25"]) == 0
    printed = capsys.readouterr().out
    assert "skipped 2 file(s)" in printed
    assert "warning: aster/corrupt.jpg:" in printed and "warning: bluebell/truncated.jpg" \
        in printed
    data = layout.open_layout(str(tmp_path / "out"))
    assert data.split("train").count + data.split("val").count == 12
    assert main(["convert", str(root), str(tmp_path / "strict"), "--image-size", "8",
                 "--val-fraction", "0.25", "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("corrupt.jpg" in err[0] or "truncated.jpg" in err[0])
    assert not (tmp_path / "strict").exists()
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]  # nothing half-written


def _bad_sources(tmp: Path, photos_root: Path):
    """(what, SRC, a string the one-line error must name)."""
    cases = []
    empty = tmp / "empty"
    empty.mkdir(parents=True)
    cases.append(("no images", empty, "no images"))
    nested = tmp / "noimg" / "aster"
    nested.mkdir(parents=True)
    (nested / "readme.txt").write_text("x")
    cases.append(("class folder without images", nested.parent, "no images"))
    split = tmp / "splits"
    (split / "train" / "aster").mkdir(parents=True)
    (split / "train" / "aster" / "a.jpg").write_bytes((photos_root / "aster/00.jpg").read_bytes())
    (split / "val").mkdir()
    cases.append(("an empty split folder", split, str(split / "val")))
    for name, text, named in (
            ("no label column", "path,class\na.jpg,aster\n", "'label'"),
            ("a missing file", "path,label\nmissing.jpg,aster\n", "missing.jpg"),
            ("a label outside the classes", "path,label\n{img},7\n", "line 2"),
            ("an unknown class name", "path,label\n{img},tulip\n", "'tulip'")):
        folder = tmp / name.replace(" ", "_")
        folder.mkdir()
        if "7" in text or "tulip" in text:
            (folder / "classes.txt").write_text("aster\nbluebell\n")
        (folder / "data.csv").write_text(text.format(img=photos_root / "aster/00.jpg"))
        cases.append((name, folder / "data.csv", named))
    return cases


def test_bad_sources_are_one_line_errors_naming_the_file(photos, tmp_path, capsys):
    root, _ = photos
    for what, src, named in _bad_sources(tmp_path / "src", root):
        assert main(["convert", str(src), str(tmp_path / "out"), "--image-size", "8"]) == 2, what
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("corolla: error:") and named in err[0], \
            (what, err)
    assert not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    assert main(["convert", str(root), str(tmp_path / "out")]) == 2  # never overwritten
    assert "already exists" in capsys.readouterr().err
    assert main(["convert", str(root), str(root / "recs")]) == 2  # SRC is never written to
    assert "inside the source folder" in capsys.readouterr().err


def test_a_folder_is_converted_at_the_size_the_run_reads(photos, tmp_path, monkeypatch):
    """At model.input_size (the cpu recipe's 128 px, ending its progressive resizing), not
    the model's registry size (small_cnn's 64), so the run reads what it asked for."""
    from corolla import config as config_lib
    from corolla import runtime
    from corolla.training import settings

    root, _ = photos
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    cfg = config_lib.load_config(overrides={"data.path": str(root), "model.name": "small_cnn",
                                            "model.input_size": 96, "train.batch_size": 4})
    resolved, data = settings.resolve(cfg, runtime.detect_for(cfg), log=lambda *a: None)
    assert data.image_size == resolved.model.input_size == 96


def test_flowers5_through_a_folder_and_back(flowers5, tmp_path):
    """200 real photos of flowers5's val split written as JPEG files into class folders, then
    converted: the same ids, labels and pixels (within JPEG tolerance) come back."""
    from corolla.data.classes import COMPETITION_CLASSES

    data = layout.open_layout(str(flowers5), 192)
    originals = {}
    for example in pipeline.read(data.split("val"), 192, ordered=True).take(200):
        name = COMPETITION_CLASSES[int(example["label"])].strip()
        example_id = f"{name}/{example['id'].numpy().decode()}.jpg"
        (tmp_path / "photos" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "photos" / example_id).write_bytes(
            tf.io.encode_jpeg(example["image"], quality=95).numpy())
        originals[example_id] = example["image"].numpy()
    sharding.convert(sources.scan(tmp_path / "photos"), tmp_path / "recs",
                     Settings(image_sizes=(192,), val_fraction=0.25),
                     log=lambda *a: None)
    back = datasets.open_data(str(tmp_path / "recs"))
    got = {**_read_all(back, "train"), **_read_all(back, "val")}
    assert set(got) == set(originals)
    errors = []
    for example_id, (label, image) in got.items():
        assert back.class_names[label] == example_id.split("/")[0]
        errors.append(np.abs(image.astype(int) - originals[example_id]).mean())
    assert np.mean(errors) < 3 and max(errors) < 6


_SCRIPT = """import sys
from corolla.data.prepare import sharding, sources
from corolla.data.prepare.settings import Settings
summary = sharding.convert(sources.scan({src!r}), {out!r},
                          Settings(image_sizes=(16,), workers=2))
print("converted", summary.written if hasattr(summary, "written") else "")
"""


@pytest.mark.slow
def test_a_script_without_the_main_guard_converts_in_its_own_process_and_finishes(tmp_path):
    """Spawned workers run the main script again: one without `if __name__ == "__main__":`
    would start the conversion again in each of them, forever. It converts in-process and
    says why, once."""
    import subprocess
    import sys

    make_photos(tmp_path / "photos", per_class=24)  # 72 images: enough for worker processes
    script = tmp_path / "nb.py"
    script.write_text(_SCRIPT.format(src=str(tmp_path / "photos"), out=str(tmp_path / "recs")))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("converting in this process: ") == 1, done.stdout
    assert f"{script} runs without an `if __name__ == \"__main__\":` guard" in done.stdout
    assert "bootstrapping phase" not in done.stderr
    assert (tmp_path / "recs" / "convert.json").is_file()


@pytest.mark.parametrize("text, guarded", [
    ("import corolla\ncorolla.train(data='x')\n", False),
    ("import corolla\nif __name__ == '__main__':\n    corolla.train(data='x')\n", True),
    ("def f(): pass\nif '__main__' == __name__:\n    f()\n", True),
    ("this is not python (\n", False)])
def test_the_main_guard_is_read_from_the_main_script(tmp_path, monkeypatch, text, guarded):
    import sys
    import types

    script = tmp_path / "script.py"
    script.write_text(text)
    main = types.ModuleType("__main__")
    main.__file__, main.__spec__ = str(script), None
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert sharding._unguarded_main() == (None if guarded else str(script))
    # A package's __main__ (`python -m corolla`, the console script's runner) is never re-run.
    main.__spec__ = types.SimpleNamespace(name="corolla.__main__", origin=str(script))
    assert sharding._unguarded_main() is None


def test_a_conversion_of_many_classes_ends_with_a_summary_not_a_line_per_class():
    names = [f"class {i}" for i in range(102)]
    counts = {i: 10 + i % 7 for i in range(102)}
    counts[40], counts[41] = 1, 2  # the fewest, named
    skipped = [(f"bad{i}.jpg", "not an image") for i in range(50)]
    summary = Summary(source="photos", out="recs", counts={"train": counts, "val": dict(counts)},
                      files={"train": [1], "val": [1]}, skipped=skipped, seconds=2.0)
    lines = summary_lines(summary, names, Settings())
    assert len(lines) <= 30, lines
    spread = [line for line in lines if line.lstrip().startswith("train fewest")]
    assert spread == ["  train fewest 1, median 13, most 16; fewest: 'class 40' 1, 'class 41' 2, "
                      "'class 0' 10, 'class 14' 10, 'class 21' 10"]
    assert any("102 classes" in line and "convert.json" in line for line in lines)
    assert "... and 30 more (all of them in convert.json)" in lines[-1]
    # A few classes keep their table: a line each.
    few = Summary(source="p", out="r", counts={"train": {0: 3, 1: 4}}, files={"train": [1]})
    table = summary_lines(few, ["daisy", "rose"], Settings())
    assert [line.split() for line in table[-2:]] == [["daisy", "3"], ["rose", "4"]]
