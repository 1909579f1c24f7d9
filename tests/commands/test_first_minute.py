"""A new user's first minute: what can be checked without work (a path, a name, a flag, an
installed package) is said first, in one line, before any recipe is announced, data checked or
converted, or time probed; no line is contradicted by the next."""

import json
import os
import subprocess
import sys

import pytest

from corolla.data.prepare import sources
from corolla.errors import UserError
from corolla.runs import paths
from helpers.cli import one_line_error, said_first

HUB = 'needs keras-hub, which is not installed; run: pip install "corolla[hub]"'


@pytest.fixture
def no_keras_hub(monkeypatch):
    """keras-hub as a machine without it has it: `import keras_hub` raises ImportError."""
    monkeypatch.setitem(sys.modules, "keras_hub", None)


@pytest.mark.parametrize("argv, says", [
    (["train", "--epohcs", "3"], "unrecognized arguments: --epohcs 3; did you mean --epochs?"),
    (["train", "--epohcs=3", "--nmae", "x"], "did you mean --epochs and --name?"),
    (["trian"], "did you mean train?"),
    (["export", "run", "--format", "tflit"], "did you mean tflite?"),
])
def test_a_misspelt_flag_command_or_choice_suggests_the_one_meant(capsys, argv, says):
    one_line_error(capsys, argv, says)


def test_a_misspelt_model_or_recipe_suggests_the_one_meant_first(tiny_petals, tmp_path, capsys):
    runs = ["--data", str(tiny_petals), "--runs-dir", str(tmp_path)]
    line = said_first(capsys, ["train", "--model", "efficientnet_lite", *runs],
                      "unknown model 'efficientnet_lite'; did you mean efficientnet_lite0?")
    assert "convnext_base" not in line  # the one meant, not buried in the list of all
    said_first(capsys, ["train", "--recipe", "cpu-finetun", *runs],
               "unknown recipe 'cpu-finetun'; did you mean cpu-finetune?")
    assert not tmp_path.joinpath("runs").exists()


def test_the_suggestion_is_the_closest_choice_or_none():
    from corolla.errors import did_you_mean

    assert did_you_mean("Small_CNN", ["small_cnn", "small_resnet"]) == "did you mean small_cnn?"
    assert did_you_mean("zzz", ["small_cnn", "small_resnet"]) == ""


def test_a_missing_data_path_is_said_first(tmp_path, capsys):
    said_first(capsys, ["train", "--data", str(tmp_path / "nope"), "--runs-dir",
                        str(tmp_path / "runs")], f"data path '{tmp_path / 'nope'}' does not exist")
    said_first(capsys, ["lr-find", "--data", str(tmp_path / "nope"), "--out",
                        str(tmp_path / "out")], f"data path '{tmp_path / 'nope'}' does not exist")
    assert not (tmp_path / "out").exists()


def test_a_finished_runs_name_is_refused_before_the_time_probe(tiny_run, tiny_petals, capsys):
    said_first(capsys, ["train", "--data", str(tiny_petals), "--time", "45s", "--name",
                        tiny_run.name, "--runs-dir", str(tiny_run.parent)],
               f"run directory '{tiny_run}' already exists (a finished run)", "--name")


def _csv(text):
    return lambda d: (d / "a.csv").write_text(text) and d / "a.csv"


def _folder(*names):
    """A photo folder holding `names` (empty files; a name ending in / is a folder)."""
    def make(d):
        root = d / "photos"
        root.mkdir()
        for name in names:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).mkdir() if name.endswith("/") else (root / name).touch()
        return root
    return make


NO_DATA = {
    "csv_without_labels": (_csv("path,kind\nx.jpg,rose\n"), "has no 'label' column"),
    "csv_without_rows": (_csv("path,label\n"), "has a header but no rows"),
    "empty_folder": (_folder(), "no images in"),
    "class_folders_without_images": (_folder("rose/notes.txt", "tulip/"), "no images in"),
    "tfrecords_outside_the_layout": (_folder("train/00-8x8-5.tfrec"),
                                     "holds .tfrec files but not in the layout"),
    "one_class_folder": (_folder("rose/01.jpg", "rose/02.jpg", "notes/"),
                         "name one class ('rose'); a classifier needs at least 2 classes"),
    "one_class_in_splits": (_folder("train/rose/01.jpg", "val/rose/02.jpg"),
                            "name one class ('rose')"),
    "one_class_csv": (_csv("path,label\nx.jpg,rose\ny.jpg,rose\n"),
                      "the labels of"),
}


@pytest.mark.parametrize("make, says", NO_DATA.values(), ids=NO_DATA)
def test_data_that_is_no_data_is_said_first_and_once(tmp_path, capsys, make, says):
    """Before any recipe line (not after the recipe, as the data check's note and again as
    training's error)."""
    said_first(capsys, ["train", "--data", str(make(tmp_path)), "--runs-dir",
                        str(tmp_path / "runs")], says)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("make, says", NO_DATA.values(), ids=NO_DATA)
def test_data_that_is_no_data_is_said_before_tensorflow_is_imported(tmp_path, make, says):
    """In a fresh process (this one has TensorFlow already): the check needs no TensorFlow, so
    the line comes in a second, not after its import's ~10 s."""
    code = ("import sys\n"
            "from corolla.cli import main\n"
            f"code = main(['train', '--data', {str(make(tmp_path))!r}, '--runs-dir', "
            f"{str(tmp_path / 'runs')!r}])\n"
            "print(code, 'tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.stdout == "2 False\n" and says in result.stderr, result


def _in_a_fresh_process(commands: list[list[str]]) -> tuple[list[int], list[str], bool]:
    """(each command's exit status, its last line on stderr, whether TensorFlow was imported
    by the end): `corolla COMMAND` run one after another in a new process (this one has
    TensorFlow already)."""
    code = ("import contextlib, io, json, sys\n"
            "from corolla.cli import main\n"
            "said = []\n"
            f"for argv in {commands!r}:\n"
            "    err = io.StringIO()\n"
            "    with contextlib.redirect_stderr(err):\n"
            "        said.append([main(argv), err.getvalue().strip().splitlines()[-1]])\n"
            "print(json.dumps([said, 'tensorflow' in sys.modules]))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result
    said, imported = json.loads(result.stdout)
    return [c for c, _ in said], [line for _, line in said], imported


def test_a_run_that_does_not_exist_is_said_before_tensorflow_is_imported(tmp_path):
    """`corolla predict runs/gardn photos/` (a typo) answers in a second, not after
    TensorFlow's import: the run folder is looked at first, by every command that takes one."""
    run, photo = str(tmp_path / "runs" / "gardn"), tmp_path / "a.jpg"
    photo.touch()
    commands = [["predict", run, str(photo)], ["predict", run], ["evaluate", run],
                ["explain", run, str(photo)], ["export", run, "--format", "onnx"],
                ["ensemble", run, run], ["report", run], ["train", "--resume", run]]
    codes, lines, imported = _in_a_fresh_process(commands)
    assert codes == [2] * len(commands) and not imported, (lines, imported)
    assert all(line.startswith("corolla") and run in line for line in lines), lines


def test_convert_refuses_what_is_no_data_set_before_tensorflow_is_imported(tmp_path):
    one_class = _folder("rose/01.jpg", "rose/02.jpg")(tmp_path)
    codes, lines, imported = _in_a_fresh_process([
        ["convert", str(tmp_path / "nope"), str(tmp_path / "a")],
        ["convert", str(one_class), str(tmp_path / "b")]])
    assert codes == [2, 2] and not imported, (lines, imported)
    assert "does not exist" in lines[0] and "name one class ('rose')" in lines[1], lines
    assert not (tmp_path / "b").exists()


def test_the_first_check_finds_images_behind_linked_class_folders(tmp_path):
    """A tree walk does not follow links, while the listing takes linked class folders (and
    skips links back into the folder): the check must not call such a folder empty."""
    elsewhere = tmp_path / "elsewhere"
    flat, split = tmp_path / "flat", tmp_path / "split" / "train"
    flat.mkdir()
    split.mkdir(parents=True)
    for name in ("rose", "tulip"):
        (elsewhere / name).mkdir(parents=True)
        (elsewhere / name / "01.jpg").touch()
        (flat / name).symlink_to(elsewhere / name)
        (split / name).symlink_to(elsewhere / name)
    for folder in (flat, split.parent):
        sources.check_source(str(folder))
    for name in ("rose", "tulip"):
        (elsewhere / name / "01.jpg").unlink()
    (flat / "loop").symlink_to(flat)  # skipped, as the listing skips it: no endless walk
    for folder in (flat, split.parent):
        with pytest.raises(UserError, match="no images in"):
            sources.check_source(str(folder))


def test_a_bucket_is_not_looked_for_on_this_disk():
    assert sources.kind_of("gs://bucket/petals/") == "layout"
    sources.check_source("gs://bucket/petals")


def test_weights_that_do_not_exist_are_said_first(tiny_petals, tmp_path, capsys):
    said_first(capsys, ["train", "--data", str(tiny_petals), "--weights", str(tmp_path / "no"),
                        "--runs-dir", str(tmp_path / "runs")],
               f"'{tmp_path / 'no'}' does not exist")


def test_imagenet_weights_offline_are_refused_before_a_recipe_is_announced(
        tiny_petals, tmp_path, capsys, monkeypatch):
    """Not "recipe auto: cpu (...; from scratch)" first and the download tried after it."""
    from corolla.models import hub

    monkeypatch.setattr(hub, "reachable", lambda *a, **k: False)
    monkeypatch.setattr(hub, "cached", lambda named: False)
    said_first(capsys, ["train", "--data", str(tiny_petals), "--weights", "imagenet",
                        "--runs-dir", str(tmp_path)], "efficientnet_lite0", "--weights")


@pytest.mark.parametrize("flags, says", [
    (["--weights", "FOLDER"], "--weights FOLDER (a keras-hub preset folder) " + HUB),
    (["--model", "efficientnet_lite0"], "--model efficientnet_lite0 " + HUB),
    (["--model", "hub:resnet_18_imagenet"], "--model hub:resnet_18_imagenet " + HUB),
    (["--recipe", "cpu-finetune"], "recipe cpu-finetune's model efficientnet_lite0 " + HUB),
], ids=["preset_folder", "lite0", "hub_preset", "lite0_recipe"])
def test_training_without_keras_hub_says_which_package_first(tiny_petals, tmp_path, capsys,
                                                             no_keras_hub, flags, says):
    """Not a switch to small_cnn from scratch that then refuses the preset folder."""
    preset = tmp_path / "preset"
    preset.mkdir()
    (preset / "config.json").write_text("{}")  # what makes a folder a keras-hub preset
    flags = [str(preset) if f == "FOLDER" else f for f in flags]
    said_first(capsys, ["train", "--data", str(tiny_petals), *flags, "--runs-dir",
                        str(tmp_path / "runs")], says.replace("FOLDER", str(preset)))


@pytest.fixture
def hub_run(tiny_run_copy):
    """A run whose config says its model is keras-hub's Lite0, as one trained elsewhere (the
    model is named by config.toml, which is read before model.keras is)."""
    config = tiny_run_copy / paths.CONFIG
    config.write_text(config.read_text().replace('name = "small_cnn"',
                                                 'name = "efficientnet_lite0"'))
    return tiny_run_copy


@pytest.mark.parametrize("command", [["evaluate"], ["predict"], ["explain", "IMAGE"],
                                     ["export", "--format", "savedmodel"]],
                         ids=lambda command: command[0])
def test_a_runs_model_that_needs_keras_hub_is_one_line_without_it(hub_run, photos, capsys,
                                                                   no_keras_hub, command):
    """Keras' own error would be a page of layer configs (and exit 1)."""
    image = next(p for p in photos[0].rglob("*") if p.is_file())
    argv = [command[0], str(hub_run), *[str(image) if c == "IMAGE" else c for c in command[1:]]]
    one_line_error(capsys, argv, f"run '{hub_run}' (model efficientnet_lite0) {HUB}")


def test_continuing_a_run_that_needs_keras_hub_says_so_first(hub_run, capsys, no_keras_hub):
    for name in (paths.FINISHED, paths.MODEL):  # a run stopped before its end
        (hub_run / name).unlink()
    said_first(capsys, ["train", "--resume", str(hub_run)], f"(model efficientnet_lite0) {HUB}")


@pytest.mark.parametrize("command", ["convert", "check-data", "train"])
def test_a_keras_backend_keras_cannot_import_is_one_line_first(tmp_path, command):
    """KERAS_BACKEND=bogus: every `import tensorflow` imports Keras, which raised its
    ValueError as a traceback in the commands that train nothing (convert, check-data). In a
    fresh process: this one has Keras imported, its backend fixed."""
    from helpers.images import class_folders

    src = str(class_folders(tmp_path / "src"))
    argv = {"convert": [src, str(tmp_path / "out")], "check-data": ["--data", src],
            "train": ["--data", src, "--runs-dir", str(tmp_path / "runs")]}[command]
    code = ("import sys\nfrom corolla.cli import main\n"
            f"code = main({[command, *argv]!r})\n"
            "print(code, 'tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False, env={**os.environ, "KERAS_BACKEND": "bogus"})
    assert result.stdout == "2 False\n", result
    assert result.stderr == ("corolla: error: KERAS_BACKEND='bogus' is not a Keras backend; "
                             "set it to tensorflow or jax, or unset it (Corolla then "
                             "chooses)\n"), result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()
