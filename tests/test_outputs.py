"""What `evaluate` and `predict` write, and where they refuse to: nothing a run holds is
overwritten by accident, a refusal comes before the model is loaded, every file is replaced
whole or not at all, and a folder that cannot be written ends in one line with exit 2."""

import errno
import json
import os
import shutil

import pytest

from corolla import files
from corolla.report import plots, submission
from corolla.cli import main
from corolla.errors import UserError

RUN_FILES = ("config.toml", "model.keras", "history.csv", "plan.json", "classes.txt",
             "metrics.json", "confusion_matrix.png", "training_curves.png",
             "sample_predictions.png", "submission.csv")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """(the demo's data folder, its finished tiny run)."""
    root = tmp_path_factory.mktemp("outputs")
    assert main(["demo", "--tiny", "--cache-dir", str(root / "cache"), "--runs-dir",
                 str(root / "runs"), "--name", "tiny"]) == 0
    return next((root / "cache").iterdir()), root / "runs" / "tiny"


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fails the test if a model is loaded: refusals must come before that work."""
    from corolla.commands import evaluate, predict

    def load_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(predict, "load_model", load_model)
    monkeypatch.setattr(evaluate, "load_model", load_model)


def _snapshot(run):
    return {name: (run / name).read_bytes() for name in RUN_FILES}


def _one_line_error(capsys, argv, *needles):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("corolla")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _partials(folder):
    return sorted(p.name for p in folder.rglob("*.partial*"))


def test_predict_replaces_an_existing_out_file_only_with_force(demo_run, tmp_path, capsys):
    _, run = demo_run
    out = tmp_path / "mine.csv"
    out.write_text("my own notes\n")
    _one_line_error(capsys, ["predict", str(run), "--out", str(out)],
                    f"--out {out} already exists", "pass --force to overwrite it")
    assert out.read_text() == "my own notes\n"

    assert main(["predict", str(run), "--out", str(out), "--force"]) == 0
    assert out.read_text().splitlines()[0] == "id,label" and len(submission.read(out)) == 20
    assert _partials(tmp_path) == []


def test_predict_never_writes_over_the_runs_own_files(demo_run, capsys, no_model_loading):
    _, run = demo_run
    before = _snapshot(run)
    for target in (run / "config.toml", run / "model.keras", run / "backup" / "state.json",
                   run / "notes.csv", run):
        for force in ([], ["--force"]):
            _one_line_error(capsys, ["predict", str(run), "--out", str(target)] + force,
                            f"--out {target} is inside the run folder {run}",
                            "never over the run's own files, even with --force")
    # The same file by another spelling of its path.
    sneaky = run.parent / ".." / run.parent.name / run.name / "model.keras"
    _one_line_error(capsys, ["predict", str(run), "--out", str(sneaky), "--force"],
                    "is inside the run folder")
    assert _snapshot(run) == before


def test_predict_out_may_name_the_runs_own_submission(demo_run):
    """RUN/submission.csv is predict's default output: naming it is refreshing it."""
    _, run = demo_run
    assert main(["predict", str(run), "--out", str(run / "submission.csv")]) == 0
    assert len(submission.read(run / "submission.csv")) == 20


def test_predict_into_a_missing_folder_fails_before_the_model_is_loaded(
        demo_run, tmp_path, capsys, no_model_loading):
    _, run = demo_run
    out = tmp_path / "not-made-yet" / "sub.csv"
    _one_line_error(capsys, ["predict", str(run), "--out", str(out)],
                    f"folder {out.parent} does not exist", "create it first")
    _one_line_error(capsys, ["predict", str(run), "--out", str(tmp_path)],
                    f"--out {tmp_path} is a folder", "pass a file name")
    assert not out.parent.exists()


def test_evaluate_on_other_data_writes_beside_the_runs_metrics(demo_run, tmp_path, capsys):
    data, run = demo_run
    other = tmp_path / "other-petals"
    shutil.copytree(data, other)
    before = _snapshot(run)

    assert main(["evaluate", str(run), "--data", str(other)]) == 0
    results = run / "eval-other-petals"
    assert f"go to {results}, not over the run's own metrics" in capsys.readouterr().out
    metrics = json.loads((results / "metrics.json").read_text())
    assert metrics["split"] == "val" and metrics["num_examples"] == 32
    assert metrics["data"] == str(other)
    for name in ("confusion_matrix.png", "sample_predictions.png"):
        assert (results / name).stat().st_size > 0, name
    assert not (results / "training_curves.png").exists()  # the run's curves are its own
    assert _snapshot(run) == before and _partials(run) == []

    # --out takes a folder, made if it is missing (its parent must exist).
    assert main(["evaluate", str(run), "--data", str(other), "--out",
                 str(tmp_path / "scores")]) == 0
    assert (tmp_path / "scores" / "metrics.json").read_text() == (
        results / "metrics.json").read_text()
    assert _snapshot(run) == before


def test_evaluate_out_never_writes_over_the_runs_own_files(demo_run, tmp_path, capsys,
                                                           no_model_loading):
    data, run = demo_run
    other = tmp_path / "elsewhere"
    shutil.copytree(data, other)
    before = _snapshot(run)
    for target in (run, run / "backup", run / "logs" / "x"):
        _one_line_error(capsys, ["evaluate", str(run), "--data", str(other), "--out",
                                 str(target)],
                        f"--out {target} is inside the run folder {run}",
                        f"writes only into {run / 'eval-elsewhere'} or another eval-* folder")
    _one_line_error(capsys, ["evaluate", str(run), "--out", str(run / "config.toml")],
                    "is inside the run folder")
    _one_line_error(capsys, ["evaluate", str(run), "--out", str(tmp_path / "a" / "b")],
                    f"folder {tmp_path / 'a'} does not exist")
    (tmp_path / "file").write_text("x")
    _one_line_error(capsys, ["evaluate", str(run), "--out", str(tmp_path / "file")],
                    "is a file; evaluate writes a folder")
    assert _snapshot(run) == before and not (run / "eval-elsewhere").exists()


def test_a_model_with_a_lambda_layer_is_refused_in_one_line(demo_run, tmp_path, capsys):
    import warnings

    import keras

    _, run = demo_run
    other = tmp_path / "lambda-run"
    shutil.copytree(run, other)
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Lambda(lambda images: images / 255.0)(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras warns that the lambda will not load safely
        keras.Model(inputs, keras.layers.Dense(4, activation="softmax")(x)).save(
            other / "model.keras")
    for command in (["evaluate", str(other)],
                    ["predict", str(other), "--out", str(tmp_path / "s.csv")]):
        line = _one_line_error(capsys, command)
        assert line == (f"corolla: error: {other / 'model.keras'} contains a Lambda layer; "
                        f"Corolla loads models only in Keras' safe mode: rebuild the model "
                        f"with registered layers instead")
    assert not (tmp_path / "s.csv").exists()


def test_an_unwritable_folder_is_one_line(demo_run, tmp_path, capsys, no_model_loading):
    _, run = demo_run
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("this user (root) writes into a folder of mode 0500 anyway; "
                        "test_a_refused_write_is_one_line covers the writers")
        _one_line_error(capsys, ["predict", str(run), "--out", str(locked / "s.csv")],
                        f"cannot write into {locked} (permission denied)", "--out")
        _one_line_error(capsys, ["evaluate", str(run), "--out", str(locked / "scores")],
                        f"cannot write into {locked} (permission denied)", "--out")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def test_a_refused_write_is_one_line(tmp_path, monkeypatch):
    """What the writers do when the system refuses the file (a read-only disk stops root too):
    one line naming the file, and neither the file nor a temporary one left."""
    import numpy as np

    def read_only(src, dst):
        raise OSError(errno.EROFS, "Read-only file system", str(src), str(dst))

    monkeypatch.setattr(os, "replace", read_only)
    for name, write in (
            ("s.csv", lambda path: submission.write(["a"], [1], path)),
            ("m.json", lambda path: files.write_json({"a": 1}, path)),
            ("cm.png", lambda path: plots.plot_confusion_matrix(np.eye(2), ["a", "b"], path))):
        with pytest.raises(UserError) as refused:
            write(tmp_path / name)
        assert str(refused.value).startswith(
            f"could not write {tmp_path / name} (Read-only file system); "), str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_a_picture_that_fails_half_way_leaves_the_old_one(tmp_path, monkeypatch):
    import matplotlib.figure
    import matplotlib.pyplot as plt
    import numpy as np

    path = plots.plot_confusion_matrix(np.eye(2), ["a", "b"], tmp_path / "cm.png")
    old = path.read_bytes()
    assert old.startswith(b"\x89PNG")

    def half_then_fail(self, fname, **kwargs):
        assert kwargs["format"] == "png"
        with open(fname, "wb") as f:
            f.write(b"\x89PNG half a picture")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", half_then_fail)
    with pytest.raises(UserError, match=r"could not write .*cm\.png \(No space left on device\)"):
        plots.plot_confusion_matrix(np.zeros((2, 2)), ["a", "b"], path)
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["cm.png"]  # no temporary file left
    assert plt.get_fignums() == []  # and no figure left open
