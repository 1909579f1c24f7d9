"""The command line: user mistakes end in one line and exit status 2 before anything is
written; `info --json`; a closed pipe ends quietly."""

import json

import pytest

from corolla.cli import main
from helpers.cli import one_line_error


def test_user_mistakes_end_in_one_line_and_exit_2(tmp_path, tiny_petals, capsys):
    runs = ["--runs-dir", str(tmp_path / "runs")]
    (tmp_path / "empty" / "tfrecords-jpeg-32x32" / "train").mkdir(parents=True)
    cases = [
        (["train", "--data", str(tmp_path / "nope")] + runs, "does not exist", "--data"),
        (["train", "--data", str(tmp_path / "empty")] + runs, "no .tfrec files", "train"),
        (["train"] + runs, "no data given"),
        (["train", "--data", str(tiny_petals), "--image-size", "192"] + runs,
         "image size 192 is not present", "--image-size 32"),
        (["train", "--data", str(tiny_petals), "--model", "resnet9000"] + runs,
         "unknown model 'resnet9000'"),
        (["train", "--data", str(tiny_petals), "--model", "small_cnn", "--weights",
          "imagenet"] + runs, "no ImageNet weights"),
        (["train", "--data", str(tiny_petals), "--strategy", "sideways"] + runs,
         "invalid choice: 'sideways'"),
        (["train", "--data", str(tiny_petals), "--global-batch-size", "0", "--epochs",
          "-1"] + runs, "--epochs must be at least 1, got -1"),
        (["train", "--data", str(tiny_petals), "--lr", "nan"] + runs,
         "--lr must be a finite number"),
        (["train", "--data", str(tiny_petals), "--seed", "-1"] + runs,
         "--seed must not be negative"),
        (["train", "--data", str(tiny_petals), "--name", "/tmp/elsewhere"] + runs,
         "--name must be a folder name inside"),
        (["train", "--data", str(tiny_petals), "--name", "../up"] + runs, "no '..'"),
        (["train", "--data", str(tiny_petals), "--batch-size", "128"] + runs,
         "fewer than one global batch (128)", "--batch-size"),
        (["evaluate", str(tmp_path)], "is not a run directory"),
        (["info", "--strategy", "tpu"], "found no TPU"),
    ]
    for argv, *needles in cases:
        one_line_error(capsys, argv, *needles)
    assert not (tmp_path / "runs").exists()  # no half-made run was left behind


def test_imagenet_offline_is_one_line(tiny_petals, tmp_path, capsys, monkeypatch):
    import keras
    from keras.src.utils import file_utils

    def offline(*args, **kwargs):
        raise Exception("URL fetch failure on https://example: None -- offline")

    monkeypatch.setattr(file_utils, "get_file", offline)
    monkeypatch.setattr(keras.utils, "get_file", offline)
    one_line_error(capsys, ["train", "--data", str(tiny_petals), "--model", "vgg16",
                            "--weights", "imagenet", "--image-size", "32", "--runs-dir",
                            str(tmp_path)], "could not download ImageNet weights", "--weights")


def test_info_json(capsys):
    assert main(["info", "--json", "--batch-size", "8"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "tensorflow" and info["replicas"] >= 1
    assert info["global_batch"] == 8 * info["replicas"]


def test_malformed_tf_config_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1"]}')
    one_line_error(capsys, ["info"], "TF_CONFIG is not valid JSON", '"task"')


def test_records_of_the_wrong_size_are_one_line(tmp_path, capsys):
    import tensorflow as tf

    from corolla.data import records

    jpeg = tf.io.encode_jpeg(tf.zeros([16, 16, 3], tf.uint8)).numpy()  # not 32x32
    for split in ("train", "val"):
        records.write_shards([records.serialize(jpeg, f"{i:09x}", i % 2) for i in range(16)],
                             tmp_path / "data" / "tfrecords-jpeg-32x32" / split, 32, 2)
    one_line_error(capsys, ["train", "--data", str(tmp_path / "data"), "--epochs", "1",
                            "--runs-dir", str(tmp_path / "runs")],
                   "an image in the records is not 32x32",
                   "tfrecords-jpeg-32x32/ must all be that size")


def test_a_config_file_value_of_the_wrong_type_names_the_key(tmp_path, capsys):
    (tmp_path / "c.toml").write_text('[train]\nepochs = "many"\n')
    one_line_error(capsys, ["train", "--config", str(tmp_path / "c.toml")],
                   "train.epochs must be an int, got 'many'")


def test_a_file_whose_name_miscounts_its_records_is_named(tmp_path, tiny_petals, capsys):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tiny_petals, data)
    val = data / "tfrecords-jpeg-32x32" / "val"
    wrong = val / "00-32x32-99.tfrec"
    (val / "00-32x32-16.tfrec").rename(wrong)
    one_line_error(capsys, ["train", "--data", str(data), "--runs-dir", str(tmp_path / "runs")],
                   f"{wrong} holds 16 records but its name says 99")
    assert not (tmp_path / "runs").exists()


def test_the_parser_is_built_from_the_commands_without_tensorflow():
    """Every command module is imported to build the parser, before the flags pick the Keras
    backend and before TensorFlow's start-up lines are quieted: none may import them."""
    import subprocess
    import sys

    code = ("import sys; from corolla import cli; cli.build_parser(); "
            "loaded = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'tensorflow', 'keras', 'jax'}); assert not loaded, loaded")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_info_lists_models_and_recipes_without_tensorflow():
    """As `corolla info --help` says: only the hardware needs TensorFlow's seconds-long import."""
    import subprocess
    import sys

    code = ("import contextlib, io, sys; from corolla.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    codes = [main(['info', '--models']), main(['info', '--recipes'])]\n"
            "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'jax'})\n"
            "assert codes == [0, 0] and 'small_cnn' in out.getvalue() and not loaded, loaded")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_parser_built_again_reads_no_recipe_again(monkeypatch):
    """Each `main` call builds the parser, whose help shows the CPU recipes' values in some
    thirty flags: read once a process, not once a flag (a tenth of a second a command)."""
    from corolla import cli
    from corolla.config import recipe

    def train_help():
        (commands,) = cli.build_parser()._subparsers._group_actions
        return commands.choices["train"].format_help()

    first = train_help()
    assert "default: the recipe's; cpu: " in first
    read = []
    load = recipe.load_recipe
    monkeypatch.setattr(recipe, "load_recipe", lambda name: read.append(name) or load(name))
    assert train_help() == first
    assert read == []


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`corolla check-data --data D | head -1` ended in a BrokenPipeError traceback."""
    import subprocess
    import sys

    script = ("import sys\nfrom corolla import cli\n"
              "def lines(args):\n    for k in range(200_000):\n        print('row', k)\n"
              "    return 0\n"
              "cli.COMMANDS['info'].main = lines\nraise SystemExit(cli.main(['info']))\n")
    reader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert reader.stdout.readline() == b"row 0\n"
    reader.stdout.close()  # as `head -1` does after its line
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=60) == 141, err
    assert err == ""  # no traceback, no "Exception ignored" at exit


def test_the_batch_is_set_per_replica_or_in_all_not_both(tmp_path, capsys):
    """`--global-batch-size 3 --batch-size 4` trained at 3 and recorded batch_size = 4, a
    value that never ran."""
    import corolla
    from corolla.errors import UserError

    assert main(["train", "--data", str(tmp_path), "--global-batch-size", "3",
                 "--batch-size", "4", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("corolla: error: --batch-size (per replica) and --global-batch-size (all "
                   "replicas together) both set the batch; pass one of them")
    with pytest.raises(UserError, match=r"^batch_size= \(per replica\) and global_batch_size="):
        corolla.train(data=str(tmp_path), batch_size=4, global_batch_size=3)
    assert not (tmp_path / "runs").exists()


def _help(capsys, *argv) -> str:
    assert main([*argv, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_the_help_speaks_of_any_photos_not_only_the_competitions_data(capsys):
    """What the tool does for anyone's photos is in its help, not only the competition's
    TFRecords and submission.csv: a user reading `--help` finds predictions on photos."""
    top = _help(capsys)
    assert "image classifiers on your own photos" in top and "flower classifiers" not in top
    predict = _help(capsys, "predict")
    assert "corolla predict RUN PATH...: the likeliest classes of each photo" in predict
    assert "corolla predict RUN: the checked submission.csv" in predict
    train = _help(capsys, "train")
    assert "subfolder per class" in train and "CSV of path,label" in train
    assert "competition layout" not in train.split("options:")[0]
    assert "the top classes of any photos" in top and "train a classifier on your photos" in top
