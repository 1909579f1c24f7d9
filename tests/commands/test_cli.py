"""The command line: the tiny demo end to end, evaluate/predict on its run, and user mistakes
ending in one line and exit status 2."""

import csv
import json
import tomllib

import pytest

from corolla.report import submission
from corolla.cli import main
from corolla.data import layout, pipeline


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--tiny", "--cache-dir", str(root / "cache"), "--runs-dir",
                 str(root / "runs"), "--name", "tiny"]) == 0
    return root, root / "runs" / "tiny"


def test_demo_writes_a_complete_run(demo_run):
    root, run = demo_run
    for name in ("config.toml", "model.keras", "history.csv", "metrics.json", "submission.csv",
                 "confusion_matrix.png", "training_curves.png", "sample_predictions.png"):
        assert (run / name).is_file() and (run / name).stat().st_size > 0, name
    config = tomllib.loads((run / "config.toml").read_text())
    assert config["model"]["name"] == "small_cnn" and config["data"]["image_size"] == 32
    assert config["train"]["learning_rate"] > 0  # resolved, not the "0 = default" placeholder
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["split"] == "val" and metrics["num_examples"] == 32
    assert metrics["num_classes_present"] == 4  # the values: tests/test_known_answer.py
    with (run / "history.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and {"loss", "val_loss", "accuracy", "val_accuracy"} <= set(rows[0])


def test_submission_has_each_test_id_exactly_once(demo_run):
    root, run = demo_run
    data = layout.open_layout(str(next((root / "cache").iterdir())))
    test_ids = pipeline.metadata(data.split("test"))["ids"]
    lines = (run / "submission.csv").read_text().splitlines()
    assert lines[0] == "id,label" and len(lines) == 1 + len(test_ids) == 21
    rows = submission.read(run / "submission.csv")
    assert list(rows) == test_ids  # in the test split's order; the labels: test_known_answer


def test_evaluate_and_predict_leave_the_model_config_and_history_alone(demo_run, tmp_path):
    _, run = demo_run
    kept = ("model.keras", "config.toml", "history.csv", "plan.json", "classes.txt")
    before = {name: (run / name).read_bytes() for name in kept}
    assert main(["evaluate", str(run)]) == 0
    assert main(["predict", str(run), "--out", str(tmp_path / "sub.csv")]) == 0
    assert {name: (run / name).read_bytes() for name in kept} == before


def test_an_existing_run_is_never_overwritten(demo_run, capsys):
    root, run = demo_run
    stamp = (run / "model.keras").stat().st_mtime_ns
    code = main(["demo", "--tiny", "--cache-dir", str(root / "cache"), "--runs-dir",
                 str(root / "runs"), "--name", "tiny"])
    assert code == 2 and "already exists" in capsys.readouterr().err
    assert (run / "model.keras").stat().st_mtime_ns == stamp


def _one_line_error(capsys, argv, *needles):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("corolla")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


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
        _one_line_error(capsys, argv, *needles)
    assert not (tmp_path / "runs").exists()  # no half-made run was left behind


def test_imagenet_offline_is_one_line(tiny_petals, tmp_path, capsys, monkeypatch):
    import keras
    from keras.src.utils import file_utils

    def offline(*args, **kwargs):
        raise Exception("URL fetch failure on https://example: None -- offline")

    monkeypatch.setattr(file_utils, "get_file", offline)
    monkeypatch.setattr(keras.utils, "get_file", offline)
    _one_line_error(capsys, ["train", "--data", str(tiny_petals), "--model", "vgg16",
                             "--weights", "imagenet", "--image-size", "32", "--runs-dir",
                             str(tmp_path)], "could not download ImageNet weights", "--weights")


def test_info_json(capsys):
    assert main(["info", "--json", "--batch-size", "8"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "tensorflow" and info["replicas"] >= 1
    assert info["global_batch"] == 8 * info["replicas"]


def test_a_tensorflow_run_on_the_jax_backend_is_a_clear_error(demo_run):
    import subprocess
    import sys

    _, run = demo_run
    result = subprocess.run([sys.executable, "-m", "corolla", "evaluate", str(run), "--backend",
                             "jax"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "corolla: error:" in result.stderr and "use --backend tensorflow" in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_tf_config_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1"]}')
    _one_line_error(capsys, ["info"], "TF_CONFIG is not valid JSON", '"task"')


def test_an_interrupted_run_resumes_from_its_last_completed_epoch(tiny_petals, tmp_path, capsys):
    import keras

    from corolla import config, runtime, training

    class Stop(Exception):
        pass

    class StopAfterFirstEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                raise Stop  # as if the machine went away after one epoch

    cfg = config.load(overrides={"data.path": str(tiny_petals), "train.epochs": 2,
                                 "train.batch_size": 8, "output.runs_dir": str(tmp_path),
                                 "output.name": "r"})
    with pytest.raises(Stop):
        training.run(cfg, runtime.detect_for(cfg), log=lambda *a: None,
                  callbacks=[StopAfterFirstEpoch()])
    run = tmp_path / "r"
    assert (run / "backup").is_dir() and not (run / "model.keras").exists()
    _one_line_error(capsys, ["evaluate", str(run)], "did not finish", f"--resume {run}")
    _one_line_error(capsys, ["train", "--resume", str(run), "--epochs", "5"],
                    "drop --epochs")
    _one_line_error(capsys, ["train", "--resume", str(run), "--batch-size", "4"],
                    "drop --batch-size", "its own config and global batch")

    assert main(["train", "--resume", str(run)]) == 0
    with (run / "history.csv").open() as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == ["1", "2"]
    assert (run / "model.keras").is_file() and (run / "metrics.json").is_file()
    assert not (run / "backup").exists()
    _one_line_error(capsys, ["train", "--resume", str(run)], "already finished")


def test_records_of_the_wrong_size_are_one_line(tmp_path, capsys):
    import tensorflow as tf

    from corolla.data import records

    jpeg = tf.io.encode_jpeg(tf.zeros([16, 16, 3], tf.uint8)).numpy()  # not 32x32
    for split in ("train", "val"):
        records.write_shards([records.serialize(jpeg, f"{i:09x}", i % 2) for i in range(16)],
                             tmp_path / "data" / "tfrecords-jpeg-32x32" / split, 32, 2)
    _one_line_error(capsys, ["train", "--data", str(tmp_path / "data"), "--epochs", "1",
                             "--runs-dir", str(tmp_path / "runs")],
                    "an image in the records is not 32x32",
                    "tfrecords-jpeg-32x32/ must all be that size")


def test_a_config_file_value_of_the_wrong_type_names_the_key(tmp_path, capsys):
    (tmp_path / "c.toml").write_text('[train]\nepochs = "many"\n')
    _one_line_error(capsys, ["train", "--config", str(tmp_path / "c.toml")],
                    "train.epochs must be an int, got 'many'")


def test_a_file_whose_name_miscounts_its_records_is_named(tmp_path, tiny_petals, capsys):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tiny_petals, data)
    val = data / "tfrecords-jpeg-32x32" / "val"
    wrong = val / "00-32x32-99.tfrec"
    (val / "00-32x32-16.tfrec").rename(wrong)
    _one_line_error(capsys, ["train", "--data", str(data), "--runs-dir", str(tmp_path / "runs")],
                    f"{wrong} holds 16 records but its name says 99")
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_says_how_to_continue(tiny_petals, tmp_path, capsys, monkeypatch):
    from corolla.training import checkpoint

    saved = checkpoint.Checkpoint.on_epoch_end

    def interrupt(self, epoch, logs=None):
        saved(self, epoch, logs)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.Checkpoint, "on_epoch_end", interrupt)
    code = main(["train", "--data", str(tiny_petals), "--epochs", "2", "--batch-size", "8",
                 "--runs-dir", str(tmp_path), "--name", "r"])
    assert code == 130
    assert capsys.readouterr().err.strip().endswith(
        f"interrupted; continue with: corolla train --resume {tmp_path / 'r'}")


def test_evaluating_on_data_with_other_classes_is_refused(demo_run, tmp_path, capsys):
    import shutil

    root, run = demo_run
    other = tmp_path / "other"
    shutil.copytree(next((root / "cache").iterdir()), other)
    (other / "classes.txt").write_text("a\nb\nc\nd\n")
    _one_line_error(capsys, ["evaluate", str(run), "--data", str(other)],
                    "names other classes, not the 4 this run was trained on")


@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_a_model_trained_at_a_smaller_input_size_evaluates_at_it(tiny_petals, tmp_path):
    """--input-size 16 on 32 px data: the model is built at 16, the saved config says so, and
    evaluate and predict scale the data to it; a larger --input-size keeps the data's size."""
    import keras

    runs = tmp_path / "runs"
    base = ["train", "--data", str(tiny_petals), "--epochs", "1", "--steps-per-epoch", "2",
            "--batch-size", "8", "--runs-dir", str(runs)]
    assert main([*base, "--input-size", "16", "--name", "small"]) == 0
    run = runs / "small"
    config = tomllib.loads((run / "config.toml").read_text())
    assert config["model"]["input_size"] == 16 and config["data"]["image_size"] == 32
    model = keras.saving.load_model(run / "model.keras", compile=False)
    assert model.input_shape == (None, 16, 16, 3)
    assert main(["evaluate", str(run)]) == 0
    assert json.loads((run / "metrics.json").read_text())["split"] == "val"
    assert main(["predict", str(run), "--out", str(tmp_path / "sub.csv")]) == 0
    assert len((tmp_path / "sub.csv").read_text().splitlines()) == 1 + 20
    assert main([*base, "--input-size", "64", "--name", "large"]) == 0
    config = tomllib.loads((runs / "large" / "config.toml").read_text())
    assert config["model"]["input_size"] == 32  # at most the data's size


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`corolla check-data --data D | head -1` ended in a BrokenPipeError traceback."""
    import subprocess
    import sys

    script = ("import sys\nfrom corolla import cli\n"
              "def lines(args):\n    for k in range(200_000):\n        print('row', k)\n"
              "    return 0\n"
              "cli.COMMANDS['info'] = lines\nraise SystemExit(cli.main(['info']))\n")
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
