"""`corolla predict RUN PATH...`: anyone's photos (any size, format and mode; folders, CSVs)
through the known-answer run of test_known_answer.py, whose model reads the red channel: each
photo's class is known in advance, and named, not numbered."""

from __future__ import annotations

import csv
import json
import re
import shutil

import numpy as np
import pytest
from PIL import Image

from corolla.cli import main
from corolla.data.prepare import image_files
from corolla.runs import paths
from helpers.known_answer import (  # noqa: F401 (data, run: the fixtures)
    CLASS_NAMES, EXPECTED_METRICS, SIZE, data_fixture, run_fixture)


@pytest.fixture(scope="module")
def album(tmp_path_factory):
    """(folder, {file name: the class the rule answers}) of photos as people have them."""
    root = tmp_path_factory.mktemp("album")
    (root / "sub" / "deeper").mkdir(parents=True)
    rgba = np.zeros((30, 40, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 96, 255  # red 96: band one
    Image.fromarray(rgba, "RGBA").save(root / "alpha.png")
    # CMYK (a print photo): cyan 95 leaves red at 160, band two.
    Image.new("CMYK", (50, 20), (95, 0, 0, 0)).save(root / "sub" / "print.jpg", quality=95)
    Image.new("L", (17, 33), 32).save(root / "sub" / "deeper" / "grey.jpg")  # band zero
    (root / "sub" / "broken.jpg").write_bytes(b"not a jpeg at all")
    (root / "notes.txt").write_text("not an image: never listed")
    return root, {"alpha.png": "band one", "print.jpg": "band two", "grey.jpg": "band zero"}


def test_a_folder_is_searched_recursively_for_image_files(album):
    root, _ = album
    found = image_files.list_photos([root])
    assert sorted(p.rsplit("/", 1)[-1] for p in found) == \
        ["alpha.png", "broken.jpg", "grey.jpg", "print.jpg"]


def test_photos_of_any_mode_are_named_by_class_and_broken_ones_listed(run, album, capsys,
                                                                      tmp_path):
    root, expected = album
    out = tmp_path / "p.csv"
    assert main(["predict", str(run), str(root), "--top-k", "2", "--out", str(out),
                 "--json"]) == 0
    printed = capsys.readouterr().out
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert {r["path"].rsplit("/", 1)[-1]: r["class_1"] for r in rows} == expected
    for r in rows:
        assert r["class_1"] in CLASS_NAMES and CLASS_NAMES[int(r["class_index_1"])] == r["class_1"]
        assert float(r["probability_1"]) >= float(r["probability_2"])
        assert "class_3" not in r  # --top-k 2
    assert "broken.jpg" in printed and "skipped 1 file" in printed
    for name, cls in expected.items():  # the table, one line a photo
        assert any(name in line and re.split(r"\s{2,}", line)[1].startswith(cls)
                   for line in printed.splitlines()), (name, printed)
    saved = json.loads(out.with_suffix(".json").read_text())
    assert [s["path"].rsplit("/", 1)[-1] for s in saved["skipped"]] == ["broken.jpg"]
    assert {p["path"].rsplit("/", 1)[-1]: p["top"][0]["class"]
            for p in saved["predictions"]} == expected


def test_a_csv_of_paths_and_strict(run, album, capsys, tmp_path):
    root, _ = album
    listing = tmp_path / "list.csv"
    listing.write_text(f"path\n{root / 'alpha.png'}\n{root / 'sub' / 'broken.jpg'}\n")
    assert main(["predict", str(run), str(listing), "--tta", "2"]) == 0  # a flip: same red
    assert re.search(r"alpha.png\s+band one 1.000", capsys.readouterr().out)
    assert main(["predict", str(run), str(listing), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "broken.jpg is not a readable image" in err and len(err.strip().splitlines()) == 1


def test_an_existing_out_is_kept_and_a_missing_path_named(run, album, capsys, tmp_path):
    root, _ = album
    out = tmp_path / "mine.csv"
    out.write_text("keep me")
    assert main(["predict", str(run), str(root), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err and out.read_text() == "keep me"
    assert main(["predict", str(run), str(tmp_path / "nowhere")]) == 2
    assert "nowhere does not exist" in capsys.readouterr().err
    assert main(["predict", str(run), "--json"]) == 2  # a photo flag on the test split
    assert "--json is for predictions on photos" in capsys.readouterr().err


def test_the_python_api_gives_the_same_rows(run, album):
    import corolla

    root, _ = album
    rows = corolla.open_run(run).predict_photos(root / "alpha.png", top_k=1)
    assert [(r["path"].rsplit("/", 1)[-1], r["top"][0]["class"]) for r in rows] == \
        [("alpha.png", "band one")]


@pytest.mark.parametrize("given, kind", [
    (np.zeros((8, 8, 3), np.uint8), "numpy.ndarray"), (None, "None"),
    (Image.new("RGB", (8, 8)), "PIL.Image.Image"), ([np.zeros((8, 8, 3))], "numpy.ndarray")])
def test_images_in_memory_are_one_line_naming_the_argument(run, given, kind):
    """Photos are read from files (fitted to the model as the run's data was): an array, an
    image or None is named for what it is, before the run is opened."""
    import corolla
    from corolla.errors import UserError

    with pytest.raises(UserError, match=rf"^photos takes image files, .* got {kind}; save an "):
        corolla.open_run(run).predict_photos(given)
    with pytest.raises(UserError, match=rf"^images takes image files, .* got {kind}; "):
        corolla.open_run(run).explain(given)


def test_a_top_k_past_the_classes_gives_every_class_and_says_so(run, album, capsys, tmp_path):
    root, _ = album
    out = tmp_path / "top.csv"
    assert main(["predict", str(run), str(root / "alpha.png"), "--top-k", "1000", "--out",
                 str(out)]) == 0
    assert f"(1 photos, top {len(CLASS_NAMES)})" in capsys.readouterr().out
    header = out.read_text().splitlines()[0].split(",")
    assert sum(name.startswith("probability_") for name in header) == len(CLASS_NAMES), header


def test_other_data_of_any_size_is_scaled_and_other_classes_named(data, run, tmp_path,
                                                                  capsys):
    """The known-answer data again at 24 px (the run's model takes 16): evaluate scores it
    as it scores the run's own (the same answers: solid colours); data of other classes is
    refused, naming the classes, not a size flag that does not exist."""
    import tensorflow as tf

    from corolla.data import records
    from corolla.data.classes import CLASSES_FILE

    root, _ = data
    other = tmp_path / "bigger"
    for split in ("train", "val", "test"):
        serialized = []
        for path in sorted((root / f"tfrecords-jpeg-{SIZE}x{SIZE}" / split).glob("*.tfrec")):
            for raw in tf.data.TFRecordDataset(str(path)):
                example = tf.train.Example.FromString(raw.numpy())
                f = example.features.feature
                image = tf.io.decode_jpeg(f["image"].bytes_list.value[0])
                big = tf.cast(tf.image.resize(image, [24, 24]), tf.uint8)
                serialized.append(records.serialize(
                    tf.io.encode_jpeg(big, quality=95).numpy(), f["id"].bytes_list.value[0]
                    .decode(), f["class"].int64_list.value[0] if split != "test" else None))
        records.write_shards(serialized, other / "tfrecords-jpeg-24x24" / split, 24, 1)
    shutil.copy(root / CLASSES_FILE, other / CLASSES_FILE)
    out = tmp_path / "scores"
    assert main(["evaluate", str(run), "--data", str(other), "--out", str(out)]) == 0
    m = json.loads((out / paths.METRICS).read_text())
    assert m["num_examples"] == 12
    assert m["f1_macro"] == pytest.approx(EXPECTED_METRICS["f1_macro"])
    copy = tmp_path / "named"
    shutil.copytree(run, copy)
    (copy / CLASSES_FILE).write_text("a\nb\n")  # a run of 2 classes
    (other / CLASSES_FILE).unlink()  # data without classes.txt: the competition's 104
    assert main(["evaluate", str(copy), "--data", str(other), "--out", str(tmp_path / "x")]) \
        == 2
    err = capsys.readouterr().err
    assert "names 104 classes" in err and "not the 2 this run was trained on" in err
    assert "--image-size" not in err


def test_nothing_readable_is_an_error_and_writes_no_file(run, album, capsys, tmp_path):
    """`predict RUN fake.jpg --out out.csv` said `wrote out.csv (0 photos)` and exited 0: a
    script took a header-only CSV for success."""
    root, _ = album
    out = tmp_path / "out.csv"
    assert main(["predict", str(run), str(root / "sub" / "broken.jpg"), "--out",
                 str(out)]) == 2
    captured = capsys.readouterr()
    assert "broken.jpg" in captured.out  # why: the file that did not decode
    assert captured.err.strip() == ("corolla: error: none of the 1 photo(s) given could be "
                                    "read (listed above); nothing was predicted")
    assert not out.exists()


def test_out_dash_is_standard_output(run, album, capsys, tmp_path, monkeypatch):
    """`--out -` made a file named `-`; it means standard output (the log goes to stderr)."""
    root, expected = album
    monkeypatch.chdir(tmp_path)
    assert main(["predict", str(run), str(root), "--out", "-"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(captured.out.splitlines()))
    assert {r["path"].rsplit("/", 1)[-1]: r["class_1"] for r in rows} == expected
    assert "broken.jpg" in captured.err and not (tmp_path / "-").exists()
    assert main(["predict", str(run), str(root), "--out", "-", "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)
    assert {p["path"].rsplit("/", 1)[-1] for p in saved["predictions"]} == set(expected)
    assert list(tmp_path.iterdir()) == []


def test_json_out_keeps_both_files(run, album, tmp_path):
    """`--json --out b.json` wrote the CSV at b.json, then the JSON over it."""
    root, expected = album
    out = tmp_path / "b.json"
    assert main(["predict", str(run), str(root), "--json", "--out", str(out)]) == 0
    with (tmp_path / "b.csv").open() as f:
        assert {r["path"].rsplit("/", 1)[-1] for r in csv.DictReader(f)} == set(expected)
    assert {p["path"].rsplit("/", 1)[-1]
            for p in json.loads(out.read_text())["predictions"]} == set(expected)


def test_a_device_or_a_pipe_is_named_for_what_it_is(run, tmp_path, capsys):
    """`predict RUN link-to-/dev/zero` and a FIFO said "does not exist"."""
    import os

    (tmp_path / "zero.jpg").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "pipe.jpg")
    for name in ("zero.jpg", "pipe.jpg"):
        assert main(["predict", str(run), str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"corolla: error: {tmp_path / name} is not a regular file (a device, "
                       f"pipe or socket); pass image files, folders of them, or a CSV of "
                       f"their paths")
