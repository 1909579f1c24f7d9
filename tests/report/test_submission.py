"""The submission file: a header and one row per id, written whole or not at all, refused
when it would fail its check."""

import os

import numpy as np
import pytest

from corolla.cli import main
from corolla.data import layout, pipeline
from corolla.report import submission
from helpers.known_answer import SIZE, TEST_LABELS, data_fixture  # noqa: F401 (the fixture)


def test_submission_has_header_and_one_row_per_id(tmp_path):
    path = submission.write(["a1", "b2", "c3"], np.array([3, 0, 103]), tmp_path / "s.csv")
    assert path.read_text().splitlines() == ["id,label", "a1,3", "b2,0", "c3,103"]
    assert submission.read(path) == {"a1": 3, "b2": 0, "c3": 103}


def test_submission_refuses_duplicate_ids_and_mismatched_lengths(tmp_path):
    with pytest.raises(ValueError, match="1 duplicate ids"):
        submission.write(["a", "a"], [1, 2], tmp_path / "s.csv")
    with pytest.raises(ValueError, match="2 ids but 1 labels"):
        submission.write(["a", "b"], [1], tmp_path / "s.csv")
    assert not (tmp_path / "s.csv").exists()


def _partials(folder):
    return sorted(p.name for p in folder.rglob("*.partial*"))


def _test_ids(root):
    return pipeline.metadata(layout.open_layout(str(root), SIZE).split("test"))["ids"]


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _right_lines(truth):
    return ["id,label"] + [f"{i},{label}" for i, label in truth["test"].items()]


def test_a_right_submission_passes_the_check(data, tmp_path, capsys):
    root, truth = data
    path = _write(tmp_path / "s.csv", _right_lines(truth))
    assert submission.check(path, _test_ids(root), 4) == []
    assert main(["check-submission", str(path), "--data", str(root)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"{path}: OK, {len(TEST_LABELS)} rows")


def test_what_kaggles_reader_takes_passes_a_bom_and_spaces_before_labels(data, tmp_path):
    """Excel's "CSV UTF-8" starts the file with a byte-order mark, and hand edits leave
    "id, 3": Kaggle scores both, so the check passes them and reads the labels."""
    root, truth = data
    lines = [f"{i}, {label}" for i, label in truth["test"].items()]
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeff".encode() + "\r\n".join(["id,label", *lines, ""]).encode())
    assert submission.check(path, _test_ids(root), 4) == []
    assert submission.read(path) == truth["test"]


def test_the_check_finds_every_kind_of_fault(data, tmp_path):
    root, truth = data
    ids = list(truth["test"])
    lines = _right_lines(truth)
    lines[0] = "id,Label"  # a wrong header
    lines[1] = f"{ids[0]},4"  # out of range: 4 classes
    lines[2] = f"{ids[1]},2.0"  # not an integer
    lines[3] = f"{ids[2]},one"  # not an integer either (" 1" is: Kaggle's reader takes it)
    del lines[5]  # ids[4] missing
    lines.append(f"{ids[6]},1")  # ids[6] twice
    lines.append("123456789,0")  # unknown
    lines.append("only-one-field")
    problems = submission.check(_write(tmp_path / "s.csv", lines), _test_ids(root), 4)

    assert [(p.kind, p.count) for p in problems] == [
        ("header", 1), ("malformed", 1), ("duplicate", 1), ("unknown", 1), ("missing", 1),
        ("not_integer", 2), ("out_of_range", 1)]
    by_kind = {p.kind: p for p in problems}
    assert by_kind["header"].examples == ("the first line is 'id,Label'",)
    assert by_kind["malformed"].examples == ("line 17: 'only-one-field'",)
    assert by_kind["missing"].examples == (repr(ids[4]),)
    assert by_kind["duplicate"].examples == (f"{ids[6]!r} (lines 7, 15)",)
    assert by_kind["unknown"].examples == ("'123456789' (line 16)",)
    assert by_kind["out_of_range"].examples == ("line 2: 4",)
    assert by_kind["not_integer"].examples == ("line 3: '2.0'", "line 4: 'one'")
    assert str(by_kind["out_of_range"]) == "1 labels outside the 4 classes [0, 3]: line 2: 4"
    assert str(by_kind["header"]) == ("the header is not exactly 'id,label': the first line is "
                                      "'id,Label'")


@pytest.mark.parametrize("fault, kind", [
    ("missing", "missing"), ("duplicate", "duplicate"), ("unknown", "unknown"),
    ("out_of_range", "out_of_range"), ("negative", "out_of_range"),
    ("not_integer", "not_integer"), ("header", "header"), ("no_header", "header"),
    ("empty", "header")])
def test_check_submission_names_each_fault_and_exits_2(data, tmp_path, capsys, fault, kind):
    root, truth = data
    ids, lines = list(truth["test"]), _right_lines(truth)
    if fault == "missing":
        del lines[3]
    elif fault == "duplicate":
        lines.insert(5, lines[2])
    elif fault == "unknown":
        lines.append("fffffffff,1")
    elif fault == "out_of_range":
        lines[4] = f"{ids[3]},104"
    elif fault == "negative":
        lines[4] = f"{ids[3]},-1"
    elif fault == "not_integer":
        lines[4] = f"{ids[3]},tulip"
    elif fault == "header":
        lines[0] = "id,label,extra"
    elif fault == "no_header":
        del lines[0]
    elif fault == "empty":
        lines = []
    path = _write(tmp_path / "s.csv", lines)
    assert main(["check-submission", str(path), "--data", str(root)]) == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[0].startswith(f"corolla: error: {path} is not a valid submission"), err
    assert captured.out == "" and "Traceback" not in captured.err
    expected = {p.kind for p in submission.check(path, _test_ids(root), 4)}
    assert kind in expected
    assert len(err) == 1 + len(expected)  # one line per kind of problem
    for line in err[1:]:  # "  N what: examples", or "  the header is not ...: ..."
        assert line.startswith("  ") and (line.strip()[0].isdigit() or "header" in line), line


def test_check_submission_cites_at_most_five_examples(data, tmp_path):
    root, truth = data
    lines = ["id,label"] + [f"{i},9" for i in truth["test"]]
    problems = submission.check(_write(tmp_path / "s.csv", lines), _test_ids(root), 4)
    assert [(p.kind, p.count, len(p.examples)) for p in problems] == [
        ("out_of_range", len(TEST_LABELS), 5)]
    assert str(problems[0]).endswith(f"(and {len(TEST_LABELS) - 5} more)")


def test_check_submission_user_mistakes_are_one_line(data, tmp_path, capsys):
    root, _ = data
    for argv, needle in (
            (["check-submission", str(tmp_path / "nope.csv"), "--data", str(root)],
             "does not exist"),
            (["check-submission", str(tmp_path), "--data", str(root)], "is a folder"),
            (["check-submission", str(tmp_path / "s.csv")], "required: --data")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("corolla") and needle in err[0], err


def test_check_submission_reads_only_regular_files_and_only_as_much_as_a_submission_holds(
        data, tmp_path, capsys):
    """A device (/dev/urandom never ends), a FIFO, or a file larger than any submission of the
    split: one line, exit 2, and the memory never filled (the read stops at the bound)."""
    root, truth = data
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)  # opened for reading, it would block: the check must not open it
    big = _write(tmp_path / "big.csv", _right_lines(truth) + ["x" * 100] * 10_000)
    limit = submission.size_limit(_test_ids(root), 4)
    assert big.stat().st_size > limit > (tmp_path / "s.csv").write_text(
        "\n".join(_right_lines(truth))) * 1.5  # the bound leaves room for quotes and spaces
    for path, needle in (("/dev/urandom", "is not a regular file"),
                         (fifo, "is not a regular file"),
                         (big, f"holds over {limit:,} bytes")):
        assert main(["check-submission", str(path), "--data", str(root)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err


def test_a_submission_that_fails_its_check_never_replaces_the_old_one(tmp_path, monkeypatch):
    path = submission.write(["a", "b"], [0, 1], tmp_path / "s.csv", num_classes=2)
    old = path.read_bytes()
    with pytest.raises(ValueError, match="fails its check: 1 labels outside the 2 classes"):
        submission.write(["a", "b"], [0, 2], path, num_classes=2)
    assert path.read_bytes() == old and _partials(tmp_path) == []


def test_a_submission_ending_with_an_empty_line_passes(tmp_path):
    from corolla.report import submission

    path = tmp_path / "s.csv"
    path.write_text("id,label\na,1\nb,0\n\n")
    assert submission.check(path, ["a", "b"], 2) == []
    path.write_text("id,label\na,1\n\nb,0\n")  # an empty line inside is still a fault
    assert [p.kind for p in submission.check(path, ["a", "b"], 2)] == ["malformed"]
