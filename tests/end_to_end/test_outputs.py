"""What `evaluate` and `predict` write on the shared tiny run, and where they refuse to: nothing
a run holds is overwritten by accident, a refusal comes before the model is loaded, and a folder
that cannot be written ends in one line with exit 2 (the writers themselves:
report/test_atomic_writes.py)."""

import json
import os
import shutil
from pathlib import Path

import pytest

from corolla.report import submission
from corolla.cli import main
from corolla.runs import paths
from helpers.cli import one_line_error
from helpers.images import pictures
from helpers.runs import data_of


RUN_FILES = (paths.CONFIG, paths.MODEL, paths.HISTORY, paths.PLAN, paths.CLASSES, paths.METRICS,
             paths.CONFUSION, paths.CURVES, paths.SAMPLES, paths.SUBMISSION)


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fails the test if a model is loaded: refusals must come before that work."""
    from corolla.evaluation import inference

    def load_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(inference, "load_model", load_model)  # evaluate's and predict's


def _snapshot(run):
    return {name: (run / name).read_bytes() for name in RUN_FILES}


def _partials(folder):
    return sorted(p.name for p in folder.rglob("*.partial*"))


def test_predict_replaces_an_existing_out_file_only_with_force(tiny_run_copy, tmp_path, capsys):
    run = tiny_run_copy
    out = tmp_path / "mine.csv"
    out.write_text("my own notes\n")
    one_line_error(capsys, ["predict", str(run), "--out", str(out)],
                   f"--out {out} already exists", "pass --force to overwrite it")
    assert out.read_text() == "my own notes\n"

    assert main(["predict", str(run), "--out", str(out), "--force"]) == 0
    assert out.read_text().splitlines()[0] == "id,label" and len(submission.read(out)) == 20
    assert _partials(tmp_path) == []


def test_predict_never_writes_over_the_runs_own_files(tiny_run, capsys, no_model_loading):
    run = tiny_run
    before = _snapshot(run)
    for target in (run / paths.CONFIG, run / paths.MODEL, run / paths.BACKUP / paths.STATE,
                   run / "notes.csv", run):
        for force in ([], ["--force"]):
            one_line_error(capsys, ["predict", str(run), "--out", str(target)] + force,
                           f"--out {target} is inside the run folder {run}",
                           "never over the run's own files, even with --force")
    # The same file by another spelling of its path.
    sneaky = run.parent / ".." / run.parent.name / run.name / paths.MODEL
    one_line_error(capsys, ["predict", str(run), "--out", str(sneaky), "--force"],
                   "is inside the run folder")
    assert _snapshot(run) == before


def test_predict_out_may_name_the_runs_own_submission(tiny_run_copy):
    """RUN/submission.csv is predict's default output: naming it is refreshing it."""
    run = tiny_run_copy
    assert main(["predict", str(run), "--out", str(run / paths.SUBMISSION)]) == 0
    assert len(submission.read(run / paths.SUBMISSION)) == 20


def test_predict_into_a_missing_folder_fails_before_the_model_is_loaded(
        tiny_run, tmp_path, capsys, no_model_loading):
    run = tiny_run
    out = tmp_path / "not-made-yet" / "sub.csv"
    one_line_error(capsys, ["predict", str(run), "--out", str(out)],
                   f"folder {out.parent} does not exist", "create it first")
    one_line_error(capsys, ["predict", str(run), "--out", str(tmp_path)],
                   f"--out {tmp_path} is a folder", "pass a file name")
    assert not out.parent.exists()


@pytest.mark.slow
def test_evaluate_on_other_data_writes_beside_the_runs_metrics(tiny_run_copy, tmp_path, capsys):
    run = tiny_run_copy
    data = data_of(run)
    other = tmp_path / "other-petals"
    shutil.copytree(data, other)
    before = _snapshot(run)

    assert main(["evaluate", str(run), "--data", str(other)]) == 0
    results = run / "eval-other-petals"
    assert f"go to {results}, not over the run's own metrics" in capsys.readouterr().out
    metrics = json.loads((results / paths.METRICS).read_text())
    assert metrics["split"] == "val" and metrics["num_examples"] == 32
    assert metrics["data"] == str(other)
    for name in (paths.CONFUSION, paths.SAMPLES):
        assert (results / name).stat().st_size > 0, name
    assert not (results / paths.CURVES).exists()  # the run's curves are its own
    assert _snapshot(run) == before and _partials(run) == []

    # --out takes a folder, made if it is missing (its parent must exist).
    assert main(["evaluate", str(run), "--data", str(other), "--out",
                 str(tmp_path / "scores")]) == 0
    assert (tmp_path / "scores" / paths.METRICS).read_text() == (
        results / paths.METRICS).read_text()
    assert _snapshot(run) == before


def test_evaluate_out_never_writes_over_the_runs_own_files(tiny_run, tmp_path, capsys,
                                                           no_model_loading):
    run = tiny_run
    data = data_of(run)
    other = tmp_path / "elsewhere"
    shutil.copytree(data, other)
    before = _snapshot(run)
    for target in (run, run / paths.BACKUP, run / paths.LOGS / "x"):
        one_line_error(capsys, ["evaluate", str(run), "--data", str(other), "--out",
                                str(target)],
                       f"--out {target} is inside the run folder {run}",
                       f"writes only into {run / 'eval-elsewhere'} or another eval-* folder")
    one_line_error(capsys, ["evaluate", str(run), "--out", str(run / paths.CONFIG)],
                   "is inside the run folder")
    one_line_error(capsys, ["evaluate", str(run), "--out", str(tmp_path / "a" / "b")],
                   f"folder {tmp_path / 'a'} does not exist")
    (tmp_path / "file").write_text("x")
    one_line_error(capsys, ["evaluate", str(run), "--out", str(tmp_path / "file")],
                   "is a file; evaluate writes a folder")
    assert _snapshot(run) == before and not (run / "eval-elsewhere").exists()


def test_a_model_with_a_lambda_layer_is_refused_in_one_line(tiny_run, tmp_path, capsys):
    import warnings

    import keras

    run = tiny_run
    other = tmp_path / "lambda-run"
    shutil.copytree(run, other)
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Lambda(lambda images: images / 255.0)(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras warns that the lambda will not load safely
        keras.Model(inputs, keras.layers.Dense(4, activation="softmax")(x)).save(
            other / paths.MODEL)
    for command in (["evaluate", str(other)],
                    ["predict", str(other), "--out", str(tmp_path / "s.csv")]):
        line = one_line_error(capsys, command)
        assert line == (f"corolla: error: {other / paths.MODEL} contains a Lambda layer; "
                        f"Corolla loads models only in Keras' safe mode: rebuild the model "
                        f"with registered layers instead")
    assert not (tmp_path / "s.csv").exists()


def _rewritten(model: Path, entries: dict) -> None:
    """The .keras archive at `model` with `entries` ({name: bytes}) replacing or added."""
    import zipfile

    with zipfile.ZipFile(model) as archive:
        kept = {n: archive.read(n) for n in archive.namelist()}
    with zipfile.ZipFile(model, "w") as archive:
        for name, data in {**kept, **entries}.items():
            archive.writestr(name, data)


def test_a_model_naming_a_python_class_as_a_layer_is_one_line_and_runs_nothing(
        tiny_run, tmp_path, capsys):
    """A crafted model.keras whose last layer is subprocess.Popen: Keras' safe mode imports
    nothing of it, and the command says which name it refused."""
    import zipfile

    other = tmp_path / "crafted"
    shutil.copytree(tiny_run, other)
    with zipfile.ZipFile(other / paths.MODEL) as archive:
        config = json.loads(archive.read("config.json"))
    layer = config["config"]["layers"][-1]
    witness = tmp_path / "ran"
    layer.update(module="subprocess", class_name="Popen",
                 config={"args": ["touch", str(witness)]})
    _rewritten(other / paths.MODEL, {"config.json": json.dumps(config)})
    line = one_line_error(capsys, ["evaluate", str(other)])
    assert line == (f"corolla: error: {other / paths.MODEL} cannot be loaded as a Keras model "
                    f"(it names a class 'Popen' that is no registered Keras layer); put the "
                    f"run's own model back, or train the run again")
    assert not witness.exists()


@pytest.mark.parametrize("record", [b'{"run_id": "x", "input_size": "abc"}', b"{not json",
                                    b'["a", "list"]', b'{"run_id": 5}'])
def test_a_tampered_identity_record_in_the_model_is_one_line(tiny_run, tmp_path, capsys,
                                                             record):
    from corolla.runs import identity

    other = tmp_path / "tampered"
    shutil.copytree(tiny_run, other)
    _rewritten(other / paths.MODEL, {identity.ENTRY: record})
    one_line_error(capsys, ["evaluate", str(other)], f"{other / paths.MODEL} holds a damaged "
                   f"{identity.ENTRY}", "put the run's own model back")


def test_a_link_in_place_of_the_predictions_folder_is_never_written_through(
        tiny_run_copy, tmp_path, capsys):
    """RUN/predictions pointing elsewhere: evaluate refuses in one line and writes nothing
    there (a run's files are written only inside the run)."""
    run, elsewhere = tiny_run_copy, tmp_path / "elsewhere"
    shutil.move(run / paths.PREDICTIONS, elsewhere)
    (run / paths.PREDICTIONS).symlink_to(elsewhere)
    before = {p.name: p.stat().st_mtime_ns for p in elsewhere.iterdir()}
    one_line_error(capsys, ["evaluate", str(run)], f"{run / paths.PREDICTIONS} is a link",
                   "remove the link")
    assert {p.name: p.stat().st_mtime_ns for p in elsewhere.iterdir()} == before


def test_an_unwritable_folder_is_one_line(tiny_run, tmp_path, capsys, no_model_loading):
    run = tiny_run
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("this user (root) writes into a folder of mode 0500 anyway; "
                        "test_a_refused_write_is_one_line covers the writers")
        one_line_error(capsys, ["predict", str(run), "--out", str(locked / "s.csv")],
                       f"cannot write into {locked} (permission denied)", "--out")
        one_line_error(capsys, ["evaluate", str(run), "--out", str(locked / "scores")],
                       f"cannot write into {locked} (permission denied)", "--out")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


# Outputs that belong nowhere but where they are asked for: never in another run's record, an
# input or a data set, with or without --force.

def _tree(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_outputs_never_land_in_another_runs_folder(tiny_run, tmp_path, capsys,
                                                   no_model_loading):
    """`evaluate s1 --out kill1` wrote s1's scores over kill1's record; predict could replace
    another run's model.keras with a CSV under --force."""
    run = tiny_run
    other = tmp_path / "kill1"
    shutil.copytree(run, other)
    ensemble = tmp_path / "ensemble-1"
    ensemble.mkdir()
    (ensemble / paths.METRICS).write_text("{}")
    before, before_ensemble = _tree(other), _tree(ensemble)
    for target in (other, other / paths.PREDICTIONS, other / "eval-x", ensemble):
        one_line_error(capsys, ["evaluate", str(run), "--out", str(target)],
                       f"--out {target} is inside", "the folder of another run",
                       "never writes into")
    for target in (other / paths.MODEL, other / "new.csv", ensemble / "s.csv"):
        one_line_error(capsys, ["predict", str(run), "--out", str(target), "--force"],
                       f"--out {target} is inside", "even with --force")
    assert _tree(other) == before and _tree(ensemble) == before_ensemble


def test_evaluate_out_is_a_new_or_empty_folder(tiny_run, tmp_path, capsys, no_model_loading):
    run = tiny_run
    kept = tmp_path / "notes"
    kept.mkdir()
    (kept / "mine.txt").write_text("my notes")
    one_line_error(capsys, ["evaluate", str(run), "--out", str(kept)],
                   f"--out {kept} is a folder that holds files already",
                   "writes a new folder (or an empty one)")
    assert _tree(kept) == {Path("mine.txt"): b"my notes"}


def test_outputs_never_land_in_a_data_set_or_an_input(tiny_run, tmp_path, capsys,
                                                      no_model_loading, monkeypatch):
    """PNGs written into a class folder (or as a new class beside them) would be trained on
    as photos; the run's own data, and the inputs of a command, are never written."""
    from corolla.evaluation import inference

    monkeypatch.setattr(inference, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    run = tiny_run
    data = data_of(run)
    photos = tmp_path / "small_copy"
    daisy = pictures(photos / "daisy")
    pictures(photos / "tulip")
    before = _tree(photos)
    for target in (daisy, daisy / "scores", photos / "scores"):
        one_line_error(capsys, ["evaluate", str(run), "--out", str(target)],
                       f"--out {target} is inside", "holds a data set's images")
        one_line_error(capsys, ["explain", str(run), str(daisy / "a.png"), "--out",
                                str(target), "--force"], f"--out {target} is inside")
    one_line_error(capsys, ["evaluate", str(run), "--out", str(data / "scores")],
                   f"--out {data / 'scores'} is inside the data")
    listing = pictures(tmp_path / "mine") / "list.csv"
    listing.write_text("path\n" + "\n".join(str(p) for p in daisy.iterdir()) + "\n")
    for out in (listing, daisy / "a.png"):
        one_line_error(capsys, ["predict", str(run), str(listing), "--out", str(out),
                                "--force"], f"--out {out} is one of the inputs")
    assert _tree(photos) == before and not (data / "scores").exists()


def test_explain_never_writes_over_the_runs_own_files(tiny_run, tmp_path, capsys,
                                                      no_model_loading, monkeypatch):
    """`explain RUN x.jpg --out RUN --force` replaced RUN/confusion_matrix.png, and its
    refusal without --force advised --force."""
    from corolla.evaluation import inference

    monkeypatch.setattr(inference, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    run = tiny_run
    photo = pictures(tmp_path / "photos", ["confusion_matrix"]) / paths.CONFUSION
    before = _snapshot(run)
    for target in (run, run / paths.PREDICTIONS):
        line = one_line_error(capsys, ["explain", str(run), str(photo), "--out", str(target),
                                       "--force"],
                              f"--out {target} is inside the run folder {run}",
                              f"writes only into {run / 'explain'}")
        assert "--force" not in line
    assert _snapshot(run) == before


def test_a_run_without_its_class_list_is_refused_in_one_line(tiny_run, tmp_path, capsys):
    """The data's classes.txt is no stand-in: reordered since, it named every output wrong."""
    run = tiny_run
    copy = tmp_path / "nocls"
    shutil.copytree(run, copy)
    (copy / paths.CLASSES).unlink()
    photo = pictures(tmp_path / "photos") / "a.png"
    for command in (["evaluate", str(copy)], ["predict", str(copy), str(photo)],
                    ["predict", str(copy), "--out", str(tmp_path / "s.csv")],
                    ["explain", str(copy), str(photo)],
                    ["export", str(copy), "--format", "savedmodel"]):
        one_line_error(capsys, command, f"{copy / paths.CLASSES} is missing",
                       "names the classes of the run's model")
    assert not (tmp_path / "s.csv").exists()
    assert (copy / paths.METRICS).read_bytes() == (run / paths.METRICS).read_bytes()


def test_a_model_that_is_not_the_runs_own_is_refused(tiny_run, tmp_path, capsys):
    """A model.keras copied over from another run of the same classes was scored, predicted
    with and exported as this run's. The model carries its run's id and input size."""
    from corolla import config as config_lib
    from corolla.runs import identity

    run = tiny_run
    record = identity.read(run / paths.MODEL)
    own = config_lib.load_config(run / paths.CONFIG)
    assert record == {"run_id": own.output.run_id, "input_size": own.model.input_size}
    assert identity.read(run / paths.LAST) == record
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)  # a whole run copied is still itself
    assert main(["predict", str(copy), "--out", str(tmp_path / "ok.csv")]) == 0
    for key, value, needle in (("output.run_id", "0123456789ab", "was saved by another run"),
                               ("model.input_size", 48, "takes 32 px images but")):
        config_lib.save_config(config_lib.with_settings(own, {key: value}), copy / paths.CONFIG)
        metrics = (copy / paths.METRICS).read_bytes()
        for command in (["evaluate", str(copy)],
                        ["predict", str(copy), "--out", str(tmp_path / "s.csv")],
                        ["export", str(copy), "--format", "savedmodel", "--out",
                         str(tmp_path / "export")]):
            one_line_error(capsys, command, needle, "not this run's model"
                           if key == "model.input_size" else "put this run's own model back")
        assert (copy / paths.METRICS).read_bytes() == metrics
    assert not (tmp_path / "s.csv").exists() and not (tmp_path / "export").exists()


def test_evaluate_on_a_new_photo_folder_scores_every_photo_and_names_the_folder(
        tiny_run_copy, tmp_path, capsys, monkeypatch):
    """`evaluate s1 --data small2` (100 new photos) scored the 21 a conversion split off as
    val, said nothing, and wrote eval-b77cef57e1ee6e87 (the cache's key)."""
    import numpy as np
    from PIL import Image

    monkeypatch.setenv("COROLLA_CACHE_DIR", str(tmp_path / "cache"))
    run = tiny_run_copy
    photos = tmp_path / "small2"
    names = (run / paths.CLASSES).read_text().splitlines()
    rng = np.random.default_rng(0)
    for name in names:
        (photos / name).mkdir(parents=True)
        for k in range(6):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                photos / name / f"{k}.png")
    shutil.copy(run / paths.CLASSES, photos / "classes.txt")  # the run's order of classes
    total = 6 * len(names)
    assert main(["evaluate", str(run), "--data", str(photos)]) == 0
    assert f"scores on all {total} labelled images of {photos}" in capsys.readouterr().out
    metrics = json.loads((run / "eval-small2" / paths.METRICS).read_text())
    assert metrics["num_examples"] == total
    # The report's data row names the user's folder, not its conversion in the cache.
    assert metrics["data"] == str(photos) and "cache" in metrics["data_converted"]
    assert f"<td>{photos}</td>" in (run / "eval-small2" / paths.REPORT).read_text()
