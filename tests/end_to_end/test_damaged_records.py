"""Damaged records: an image that is no JPEG, a JPEG whose data is corrupt, a file whose tail is
cut off. Without --skip-bad-records each ends in one line naming the file, wherever it is met
(the check before training, the training stream, validation during fit); with it, training
completes, skipping them, and the command ends with a count per damaged file."""

import numpy as np
import pytest
import tensorflow as tf

from corolla import cli
from corolla.cli import main
from corolla.data import check, layout, pipeline, records
from corolla.data.classes import format_classes_file
from corolla.errors import DATA_ERROR, UserError

SIZE = 32
GOOD = 16  # records per file


def _jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    return tf.io.encode_jpeg(rng.integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)).numpy()


NOT_JPEG = b"this is not an image at all"
CORRUPT = _jpeg(0)[:20] + b"\0" * 40 + _jpeg(0)[60:]  # starts like a JPEG, fails to decode


def _write(root, split: str, index: int, images: list[bytes], cut: int = 0) -> str:
    """One file of `images` (ids "<split><index>-<n>"), named for their count; `cut` bytes
    taken off its end afterwards (a download that stopped early)."""
    folder = root / f"tfrecords-jpeg-{SIZE}x{SIZE}" / split
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / records.shard_name(index, SIZE, len(images))
    with tf.io.TFRecordWriter(str(path)) as writer:
        for n, image in enumerate(images):
            writer.write(records.serialize(image, f"{split[:2]}{index}-{n:04d}",
                                           None if split == "test" else n % 4))
    if cut:
        path.write_bytes(path.read_bytes()[:-cut])
    return str(path)


def _data(root, damage: dict | None = None):
    """train 2x16, val 2x16, test 1x16 good images; `damage`: {(split, file index): kinds}, a
    kind or several: "not_jpeg" (record 3), "corrupt" (record 5), "truncated" (the last record
    cut)."""
    damage = damage or {}
    (root / "classes.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "classes.txt").write_text(format_classes_file(["a", "b", "c", "d"]))
    paths = {}
    for split, files in (("train", 2), ("val", 2), ("test", 1)):
        for index in range(files):
            images = [_jpeg(100 * index + n) for n in range(GOOD)]
            kinds = damage.get((split, index), ())
            kinds = (kinds,) if isinstance(kinds, str) else kinds
            if "not_jpeg" in kinds:
                images[3] = NOT_JPEG
            if "corrupt" in kinds:
                images[5] = CORRUPT
            paths[split, index] = _write(root, split, index, images,
                                         cut=30 if "truncated" in kinds else 0)
    return paths


def _train(root, tmp_path, *extra):
    return main(["train", "--data", str(root), "--epochs", "1", "--batch-size", "8",
                 "--runs-dir", str(tmp_path / "runs"), "--name", "r", *extra])


def _one_line(capsys, code, *needles):
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("corolla")]
    assert code == 2 and "Traceback" not in captured.err, captured.err
    assert len(lines) == 1 and lines[0].startswith("corolla: error:"), captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("split", ["train", "val"])
@pytest.mark.parametrize("kind, says", [
    ("not_jpeg", "record 3 (id {id}) of {path} holds no image"),
    ("truncated", "{path} is damaged (truncated record"),
])
def test_damage_the_check_finds_is_one_line_before_any_run(tmp_path, capsys, split, kind, says):
    """No image is decoded by the check: bytes that are no image and a cut-off file are found
    from the records alone, before the model is built or a run folder made."""
    paths = _data(tmp_path / "data", {(split, 1): kind})
    path = paths[split, 1]
    line = _one_line(capsys, _train(tmp_path / "data", tmp_path),
                     says.format(path=path, id=f"{split[:2]}1-0003"), "--skip-bad-records")
    assert "replace the file" in line
    assert not (tmp_path / "runs").exists()


def test_a_corrupt_jpeg_met_during_fit_is_one_line_naming_the_record(tmp_path, capsys):
    """Its first bytes are a JPEG's, so only decoding finds it: here in validation, at the end of
    the first epoch. TensorFlow's error names no file; the files read are searched for it."""
    paths = _data(tmp_path / "data", {("val", 1): "corrupt"})
    _one_line(capsys, _train(tmp_path / "data", tmp_path),
              f"the image of record 5 (id va1-0005) of {paths['val', 1]} does not decode",
              "--skip-bad-records")


def test_a_corrupt_jpeg_in_the_training_stream_is_found_and_named(tmp_path):
    """The training stream shuffles records from all files; the error is traced back to its
    record all the same (as the CLI does, without a model to build)."""
    paths = _data(tmp_path / "data", {("train", 1): "corrupt"})
    split = layout.open_layout(str(tmp_path / "data")).split("train")
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        list(pipeline.train_dataset(split, SIZE, 8, epoch_examples=32).take(4))
    assert check.explain(info.value) == (
        f"the image of record 5 (id tr1-0005) of {paths['train', 1]} does not decode (corrupt "
        f"JPEG data); {records.SKIP_HINT}")
    assert check.explain(ValueError("a bug")) is None


@pytest.mark.parametrize("kind, reading, says", [
    ("not_jpeg", lambda split: pipeline.eval_dataset(split, SIZE, 8),
     "record 3 (id va0-0003) of {} holds no image"),
    ("truncated", lambda split: [pipeline.metadata(split)], "{} is damaged (truncated record"),
])
def test_damage_met_in_the_stream_itself_is_one_line(tmp_path, capsys, monkeypatch, kind,
                                                     reading, says):
    """The pipelines name the file by themselves too (a file damaged after the check, a notebook
    that never ran it): here a command that reads val as evaluate does, without the check."""
    paths = _data(tmp_path / "data", {("val", 0): kind})

    def evaluate_unchecked(args):
        for _ in reading(layout.open_layout(args.data).split("val")):
            pass

    monkeypatch.setitem(cli.COMMANDS, "train", evaluate_unchecked)
    _one_line(capsys, _train(tmp_path / "data", tmp_path), says.format(paths["val", 0]),
              "--skip-bad-records")


def test_the_stream_error_carries_the_marker_the_file_and_the_id(tmp_path):
    """The assertion's data are pieces (joining them would cost every record a string op)."""
    paths = _data(tmp_path / "data", {("val", 0): "not_jpeg"})
    split = layout.open_layout(str(tmp_path / "data")).split("val")
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        list(pipeline.read(split, SIZE, ordered=True))
    assert (f"[{DATA_ERROR}: ] [record ] [3] [ (id ] [va0-0003] [) of ] [{paths['val', 0]}] "
            f"[ holds no image") in str(info.value)


def test_skipping_keeps_predictions_and_ids_aligned(tmp_path):
    """Skipped val records are left out of both ids and images; an undecodable test image is
    predicted from a blank image in its own place, so every test id keeps its row."""
    _data(tmp_path / "data", {("val", 0): "corrupt", ("val", 1): "truncated",
                              ("test", 0): "not_jpeg"})
    data = layout.open_layout(str(tmp_path / "data"))
    val = check.check_split(data.split("val"), 4, skip_bad_records=True)
    assert [f.count for f in val.files] == [GOOD - 1, GOOD - 1] and val.count == 30
    meta = pipeline.metadata(val, skip_bad_records=True)
    assert len(meta["ids"]) == 30 and "va0-0005" not in meta["ids"]
    assert "va1-0015" not in meta["ids"]  # the cut-off last record
    images = np.concatenate(list(pipeline.eval_dataset(val, SIZE, 8, skip_bad_records=True)))
    assert images.shape[0] == 32  # 30 images + 2 blanks of padding
    kept = [np.asarray(e["image"], np.float32) for e in
            pipeline.read(val, SIZE, ordered=True, skip_bad_records=True)]
    np.testing.assert_array_equal(images[:30], np.stack(kept))

    test = check.check_split(data.split("test"), 4, skip_bad_records=True)
    ids = pipeline.metadata(test, skip_bad_records=True)["ids"]
    assert test.count == len(ids) == GOOD and ids[3] == "te0-0003"
    images = np.concatenate(list(pipeline.eval_dataset(test, SIZE, 8, skip_bad_records=True)))
    assert images.shape[0] == GOOD and not images[3].any() and images[2].any()


def test_with_skip_bad_records_training_completes_and_counts_per_file(tmp_path, capsys):
    both = ("not_jpeg", "corrupt")
    paths = _data(tmp_path / "data", {("train", 0): both, ("train", 1): "truncated",
                                      ("val", 0): both, ("val", 1): "truncated",
                                      ("test", 0): "corrupt"})
    assert _train(tmp_path / "data", tmp_path, "--skip-bad-records") == 0
    out = capsys.readouterr().out
    for (split, index), says in (
            (("train", 0), ["skipped 2 of 16 records", "tr0-0003, tr0-0005"]),
            (("train", 1), ["skipped 1 of 16 records", "1 lost to its damaged tail"]),
            (("val", 0), ["skipped 2 of 16 records", "va0-0003, va0-0005"]),
            (("val", 1), ["skipped 1 of 16 records", "1 lost to its damaged tail"])):
        line = [line for line in out.splitlines() if paths[split, index] in line]
        assert len(line) == 1 and all(x in line[0] for x in says), out
    test_line = [line for line in out.splitlines() if paths["test", 0] in line]
    assert len(test_line) == 1 and "te0-0005" in test_line[0] and "blank image" in test_line[0]
    run = tmp_path / "runs" / "r"
    lines = (run / "submission.csv").read_text().splitlines()
    assert len(lines) == 1 + GOOD  # every test id, the undecodable one predicted from blank
    assert "skip_bad_records = true" in (run / "config.toml").read_text()


def test_a_test_files_damaged_tail_cannot_be_skipped(tmp_path, capsys):
    """Its ids are unknown, so the submission would lack rows: refused before training."""
    paths = _data(tmp_path / "data", {("test", 0): "truncated"})
    _one_line(capsys, _train(tmp_path / "data", tmp_path, "--skip-bad-records"),
              f"{paths['test', 0]} is damaged", "cannot skip them")
    assert not (tmp_path / "runs").exists()


def test_the_python_api_gets_the_clis_one_line_for_a_damaged_stream(tmp_path):
    """`corolla.train()` and `Run.evaluate()` translate library errors as the CLI does (one
    shared `commands.errors`): a notebook user sees the file and the record, not TensorFlow."""
    from corolla.commands.errors import as_user_errors

    paths = _data(tmp_path / "data", {("val", 0): "not_jpeg"})
    split = layout.open_layout(str(tmp_path / "data")).split("val")
    with pytest.raises(UserError) as info, as_user_errors(note=lambda line: None):
        for _ in pipeline.eval_dataset(split, SIZE, 8):
            pass
    assert str(info.value).startswith(
        f"record 3 (id va0-0003) of {paths['val', 0]} holds no image: its bytes do not start")
    with pytest.raises(ZeroDivisionError), as_user_errors():  # a bug keeps its traceback
        1 / 0
