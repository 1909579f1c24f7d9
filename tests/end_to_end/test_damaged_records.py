"""Damaged records met by `corolla train`: an image that is no JPEG, a JPEG whose data is
corrupt, a file whose tail is cut off. Without --skip-bad-records each ends in one line naming
the file, wherever it is met (the check before training, validation during fit, a command
reading the stream); with it, training completes, skipping them, and the command ends with a
count per damaged file."""

import pytest

from corolla import cli
from corolla.data import layout, pipeline
from corolla.runs import paths
from helpers.records import GOOD, SIZE, damaged_data


FLAGS = ("--epochs", "1", "--batch-size", "8")  # a whole epoch: every training record read


def _one_line(capsys, *needles):
    """The command just run (exit 2, which train_tiny asserted) said one line."""
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("corolla")]
    assert "Traceback" not in captured.err, captured.err
    assert len(lines) == 1 and lines[0].startswith("corolla: error:"), captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("split", ["train", "val"])
@pytest.mark.parametrize("kind, says", [
    ("not_jpeg", "record 3 (id {id}) of {path} holds no image"),
    ("truncated", "{path} is damaged (truncated record"),
])
def test_damage_the_check_finds_is_one_line_before_any_run(tmp_path, capsys, split, kind, says,
                                                           train_tiny):
    """No image is decoded by the check: bytes that are no image and a cut-off file are found
    from the records alone, before the model is built or a run folder made."""
    damaged = damaged_data(tmp_path / "data", {(split, 1): kind})
    path = damaged[split, 1]
    train_tiny(tmp_path / "runs", data=tmp_path / "data", tiny=FLAGS, code=2)
    line = _one_line(capsys, says.format(path=path, id=f"{split[:2]}1-0003"),
                     "--skip-bad-records")
    assert "replace the file" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("split", ["val", "test"])
def test_ids_repeated_in_a_split_that_is_predicted_are_one_line_before_any_run(
        tmp_path, capsys, split, train_tiny):
    """Each val and test id names one photo in the predictions (and submission.csv): a split
    whose files repeat ids failed only after training, in the evaluation, leaving a run
    without one."""
    damaged = damaged_data(tmp_path / "data", {(split, 0): "repeated_id"})
    train_tiny(tmp_path / "runs", data=tmp_path / "data", tiny=FLAGS, code=2)
    _one_line(capsys, f"the {split} split holds id {split[:2]}0-0000 2 times (in "
                      f"{damaged[split, 0]})", "give each record its own id")
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_corrupt_jpeg_met_during_fit_is_one_line_naming_the_record(tmp_path, capsys, train_tiny):
    """Its first bytes are a JPEG's, so only decoding finds it: here in validation, at the end of
    the first epoch. TensorFlow's error names no file; the files read are searched for it."""
    damaged = damaged_data(tmp_path / "data", {("val", 1): "corrupt"})
    train_tiny(tmp_path / "runs", data=tmp_path / "data", tiny=FLAGS, code=2)
    _one_line(capsys,
              f"the image of record 5 (id va1-0005) of {damaged['val', 1]} does not decode",
              "--skip-bad-records")


@pytest.mark.parametrize("kind, reading, says", [
    ("not_jpeg", lambda split: pipeline.eval_dataset(split, SIZE, 8),
     "record 3 (id va0-0003) of {} holds no image"),
    ("truncated", lambda split: [pipeline.metadata(split)], "{} is damaged (truncated record"),
])
def test_damage_met_in_the_stream_itself_is_one_line(tmp_path, capsys, monkeypatch, kind,
                                                     reading, says, train_tiny):
    """The pipelines name the file by themselves too (a file damaged after the check, a notebook
    that never ran it): here a command that reads val as evaluate does, without the check."""
    damaged = damaged_data(tmp_path / "data", {("val", 0): kind})

    def evaluate_unchecked(args):
        for _ in reading(layout.open_layout(args.data).split("val")):
            pass

    monkeypatch.setattr(cli.COMMANDS["train"], "main", evaluate_unchecked)
    train_tiny(tmp_path / "runs", data=tmp_path / "data", tiny=FLAGS, code=2)
    _one_line(capsys, says.format(damaged["val", 0]), "--skip-bad-records")


@pytest.mark.slow
def test_with_skip_bad_records_training_completes_and_counts_per_file(tmp_path, capsys,
                                                                      train_tiny):
    both = ("not_jpeg", "corrupt")
    damaged = damaged_data(tmp_path / "data", {("train", 0): both, ("train", 1): "truncated",
                                               ("val", 0): both, ("val", 1): "truncated",
                                               ("test", 0): "corrupt"})
    run = train_tiny(tmp_path / "runs", "--skip-bad-records", data=tmp_path / "data",
                     tiny=FLAGS)
    out = capsys.readouterr().out
    for (split, index), says in (
            (("train", 0), ["skipped 2 of 16 records", "tr0-0003, tr0-0005"]),
            (("train", 1), ["skipped 1 of 16 records", "1 lost to its damaged tail"]),
            (("val", 0), ["skipped 2 of 16 records", "va0-0003, va0-0005"]),
            (("val", 1), ["skipped 1 of 16 records", "1 lost to its damaged tail"])):
        line = [line for line in out.splitlines() if damaged[split, index] in line]
        assert len(line) == 1 and all(x in line[0] for x in says), out
    test_line = [line for line in out.splitlines() if damaged["test", 0] in line]
    assert len(test_line) == 1 and "te0-0005" in test_line[0] and "blank image" in test_line[0]
    lines = (run / paths.SUBMISSION).read_text().splitlines()
    assert len(lines) == 1 + GOOD  # every test id, the undecodable one predicted from blank
    assert "skip_bad_records = true" in (run / paths.CONFIG).read_text()


@pytest.mark.slow
def test_a_test_files_damaged_tail_cannot_be_skipped(tmp_path, capsys, train_tiny):
    """Its ids are unknown, so the submission would lack rows: refused before training."""
    damaged = damaged_data(tmp_path / "data", {("test", 0): "truncated"})
    train_tiny(tmp_path / "runs", "--skip-bad-records", data=tmp_path / "data", tiny=FLAGS,
               code=2)
    _one_line(capsys, f"{damaged['test', 0]} is damaged", "cannot skip them")
    assert not (tmp_path / "runs").exists()
