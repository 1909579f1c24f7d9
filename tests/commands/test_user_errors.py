"""Reliability, round two (issue 19): each test is one probe that failed before, named by its
item. Bad input is one line and exit 2; nothing a run wrote is lost or overwritten; a stopped
run says how to continue."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from corolla.cli import main
from helpers.images import class_folders
from helpers.processes import REPO, SCRIPTS


def _one_line(capsys, code, *needles):
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("corolla: error:"), err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.slow
def test_4_a_run_folder_killed_before_its_config_is_taken_over(tiny_petals, tmp_path):
    """kill -9 between the folder's mkdir and its config.toml: the same command starts the run
    in it, instead of 'already exists'. A folder holding anything else is still refused."""
    base = ["train", "--data", str(tiny_petals), "--epochs", "1", "--steps-per-epoch", "1",
            "--batch-size", "8", "--runs-dir", str(tmp_path)]
    (tmp_path / "empty").mkdir()
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / ".lock").write_text("process 1 on elsewhere")  # held by nobody
    for name in ("empty", "locked"):
        assert main([*base, "--name", name]) == 0
        assert (tmp_path / name / "FINISHED").is_file()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("someone's")
    assert main([*base, "--name", "mine"]) == 2
    assert (tmp_path / "mine" / "notes.txt").read_text() == "someone's"


def _start_training(tiny_petals, run, start):
    """`corolla train` for 500 tiny epochs in a child process, `start` run in the child before
    Python (its inherited signal state); returns once its first epoch is backed up."""
    command = [sys.executable, "-m", "corolla", "train", "--data", str(tiny_petals),
               "--epochs", "500", "--batch-size", "8", "--runs-dir", str(run.parent),
               "--name", run.name]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                               preexec_fn=start)
    deadline = time.monotonic() + 240
    while not (run / "backup" / "state.json").is_file():  # an epoch is done
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(process.communicate()[1])
        time.sleep(0.2)
    return process


def _epochs_done(run) -> int:
    import json

    return json.loads((run / "backup" / "state.json").read_text())["epochs_done"]


def _stops_with_one_line(process, signum, run):
    try:
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signum, err
    assert err.strip().splitlines()[-1] == f"corolla: interrupted; continue with: corolla " \
                                          f"train --resume {run}"
    assert "Traceback" not in err
    assert (run / "backup" / "state.json").is_file() and not (run / "FINISHED").exists()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_5_sigterm_and_sighup_stop_a_run_as_ctrl_c_does(tiny_petals, tmp_path, signum):
    """`docker stop`, Kubernetes and Slurm send SIGTERM: one line with the command that
    continues the run, exit 128 + the signal, and the run continues from its backup. Started
    with both signals blocked, as some job runners start their jobs (CI once did, and the run
    trained all 500 epochs through the signal): the run unblocks what it handles. Their
    handlers start as the system's defaults whatever this process inherited (under `nohup`
    SIGHUP is ignored, and an ignored SIGHUP is kept: see the next test)."""
    def blocked():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})

    run = tmp_path / "r"
    _stops_with_one_line(_start_training(tiny_petals, run, blocked), signum, run)


@pytest.mark.slow
def test_5_under_nohup_a_closed_terminal_does_not_stop_the_run(tiny_petals, tmp_path):
    """`nohup corolla train ...` starts the run with SIGHUP ignored: it must outlive its
    terminal (it once took SIGHUP over and stopped); SIGTERM still stops it."""
    def nohup():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGHUP})

    run = tmp_path / "r"
    process = _start_training(tiny_petals, run, nohup)
    process.send_signal(signal.SIGHUP)
    after = _epochs_done(run) + 2  # an epoch begun after the signal is done
    deadline = time.monotonic() + 120
    try:
        while _epochs_done(run) < after:
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.2)
    except BaseException:
        process.kill()
        raise
    _stops_with_one_line(process, signal.SIGTERM, run)


def _lost_stop(signum=signal.SIGTERM):
    """A signal whose handler runs inside a weakref callback, where Python drops the
    handler's KeyboardInterrupt ("Exception ignored in ...") and carries on."""
    import weakref

    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing, lambda r: signal.raise_signal(signum))
    del thing
    return ref


def test_a_stop_lost_inside_a_weakref_callback_is_raised_at_the_next_check():
    """`timeout 300 corolla explain ...` once ran 7 minutes past its SIGTERM: the handler's
    KeyboardInterrupt was raised in a weakref callback and discarded."""
    from corolla import cli, errors

    with pytest.raises(KeyboardInterrupt):
        with cli._stop_on_signals() as received:
            _lost_stop()
            assert received == [signal.SIGTERM]  # here: the handler ran, its exception lost
            errors.check_stop()  # the next batch's (image's, file's) check raises it again
    assert errors.stop_signal() is None  # cleared with the handlers: main may run again


def test_every_stop_ends_as_interrupted_with_the_signals_status(monkeypatch, capsys):
    """Wherever a stop lands: lost in a callback and never checked again, turned by a library
    into an error of its own (matplotlib's savefig raised `ValueError: Invalid affine
    transformation matrix`), or as the command fails: `corolla: interrupted`, exit 143."""
    from corolla import cli

    def lost(args):
        _lost_stop()
        return 0

    def in_a_library(args):
        try:
            signal.raise_signal(signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode; this is never finished
        except KeyboardInterrupt:
            raise ValueError("Invalid affine transformation matrix") from None

    def then_a_user_error(args):
        _lost_stop()
        raise cli.UserError("the data is gone")

    for command in (lost, in_a_library, then_a_user_error):
        monkeypatch.setitem(cli.COMMANDS, "info", command)
        assert main(["info"]) == 128 + signal.SIGTERM, command.__name__
        err = capsys.readouterr().err
        assert err.strip().splitlines()[-1] == "corolla: interrupted", err
        assert "ValueError" not in err and "the data is gone" not in err
        assert "Exception ignored" not in err  # the lost stop's traceback is not printed


@pytest.mark.large
def test_explain_stops_on_sigterm_wherever_it_lands(trained, tmp_path):
    """A long explain signalled at several points of its work: each ends within seconds as
    `corolla: interrupted`, exit 143, no traceback."""
    import numpy as np
    from PIL import Image

    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for k in range(400):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            photos / f"{k}.png")
    for k, delay in enumerate((0.0, 0.35, 1.1, 2.3)):
        command = [sys.executable, "-m", "corolla", "explain", str(trained), str(photos),
                   "--out", str(tmp_path / f"explained-{k}")]
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        try:
            process.stdout.readline()  # the first picture is written: the work is under way
            time.sleep(delay)
            process.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert time.monotonic() - sent < 30
        assert process.returncode == 128 + signal.SIGTERM, err
        assert err.strip().splitlines()[-1] == "corolla: interrupted", err
        assert "Traceback" not in err and "Exception ignored" not in err, err


@pytest.fixture(scope="module")
def trained(tiny_petals, tmp_path_factory):
    """A finished tiny run; tests that change it work on a copy."""
    runs = tmp_path_factory.mktemp("runs")
    assert main(["train", "--data", str(tiny_petals), "--epochs", "1", "--steps-per-epoch", "2",
                 "--batch-size", "8", "--runs-dir", str(runs), "--name", "t"]) == 0
    return runs / "t"


@pytest.mark.slow
def test_9_a_damaged_model_is_one_line_naming_the_way_out(trained, tmp_path, capsys):
    run = shutil.copytree(trained, tmp_path / "t")
    capsys.readouterr()
    data = (run / "model.keras").read_bytes()
    (run / "model.keras").write_bytes(data[: len(data) // 2])  # a copy cut short
    _one_line(capsys, main(["evaluate", str(run)]), f"{run / 'model.keras'} is damaged",
              f"copy {run / 'last.keras'}")


@pytest.mark.parametrize("content, says", [
    ("[train]\nepochs = 2\n".encode("utf-16"), "is not UTF-8 text"),
    (None, "is a folder; pass a .toml file"),
])
def test_11_a_config_that_is_not_utf8_or_is_a_folder_is_one_line(tmp_path, capsys, content,
                                                                says):
    path = tmp_path / "c.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    _one_line(capsys, main(["train", "--config", str(path), "--data", str(tmp_path)]), says)
    import corolla
    from corolla.errors import UserError

    with pytest.raises(UserError, match=says):
        corolla.train(config=path, data=tmp_path)


def test_11_a_utf8_config_with_a_bom_is_read(tmp_path):
    from corolla import config

    path = tmp_path / "c.toml"
    path.write_bytes("[train]\nepochs = 2\n".encode("utf-8-sig"))
    assert config.load(path).train.epochs == 2


def test_15_a_classes_file_with_a_bom(tmp_path):
    from corolla.data.classes import parse_classes_file

    text = "\ufeffdaisy\nrose\n".encode("utf-8").decode("utf-8")
    assert parse_classes_file(text) == ("daisy", "rose")


@pytest.mark.parametrize("flag, value, says", [
    ("--seed", "-1", "--seed must be an integer from 0"),
    ("--workers", "-3", "--workers must be 0 (every core) or a number"),
])
def test_20_convert_settings_are_checked_before_the_data(tmp_path, capsys, flag, value, says):
    (tmp_path / "src" / "a").mkdir(parents=True)
    _one_line(capsys, main(["convert", str(tmp_path / "src"), str(tmp_path / "out"), flag,
                            value]), says)
    assert not (tmp_path / "out").exists()


def test_22_a_submission_ending_with_an_empty_line_passes(tmp_path):
    from corolla.report import submission

    path = tmp_path / "s.csv"
    path.write_text("id,label\na,1\nb,0\n\n")
    assert submission.check(path, ["a", "b"], 2) == []
    path.write_text("id,label\na,1\n\nb,0\n")  # an empty line inside is still a fault
    assert [p.kind for p in submission.check(path, ["a", "b"], 2)] == ["malformed"]


@pytest.mark.parametrize("bad, says", [("ro\nse", "holds a line break"),
                                       ("   ", "is empty or only spaces")])
def test_3_and_14_class_names_that_classes_txt_cannot_hold_are_refused(tmp_path, capsys, bad,
                                                                       says):
    """A class folder named with a line break would split into two names in classes.txt and
    shift every later label; one of spaces only would vanish from it."""
    from PIL import Image

    for name in ("daisy", bad, "tulip"):
        (tmp_path / "src" / name).mkdir(parents=True)
        for k in range(3):
            Image.new("RGB", (8, 8), (40 * k, 90, 200)).save(tmp_path / "src" / name / f"{k}.png")
    _one_line(capsys, main(["convert", str(tmp_path / "src"), str(tmp_path / "out")]),
              f"class name {bad!r}", says, "rename it")
    assert not (tmp_path / "out").exists()
    _one_line(capsys, main(["train", "--data", str(tmp_path / "src"), "--runs-dir",
                            str(tmp_path / "runs")]), says)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("alike", ["rose ", "Rose"])
def test_class_names_that_differ_only_by_spaces_or_case_are_refused(tmp_path, capsys, alike):
    """`rose/` and `rose /`: check-data counted 2 classes while its JSON said 3, and every
    table showed two `rose` rows."""
    from PIL import Image

    for name in ("rose", alike, "tulip"):
        (tmp_path / "src" / name).mkdir(parents=True)
        for k in range(3):
            Image.new("RGB", (8, 8), (40 * k, 90, 200)).save(tmp_path / "src" / name / f"{k}.png")
    if len(list((tmp_path / "src").iterdir())) < 3:
        pytest.skip("this file system folds case: the two folders are one")
    for command in (["check-data", "--data", str(tmp_path / "src")],
                    ["convert", str(tmp_path / "src"), str(tmp_path / "out")]):
        first, second = sorted(["rose", alike])  # (the folders' sorted order)
        _one_line(capsys, main(command), f"class names {first!r} and {second!r}",
                  "differ only by spaces around them or by case")
    assert not (tmp_path / "out").exists()


def test_3_a_written_classes_file_reads_back_as_the_same_names():
    from corolla.data.classes import COMPETITION_CLASSES, format_classes_file, parse_classes_file
    from corolla.errors import UserError

    # The competition's names end with a space twice: kept exactly.
    assert parse_classes_file(format_classes_file(COMPETITION_CLASSES)) == COMPETITION_CLASSES
    with pytest.raises(UserError, match="occurs twice"):
        format_classes_file(["a", "b", "a"])


def test_6_a_conversion_that_loses_the_race_for_out_says_it_exists(tmp_path, monkeypatch):
    """Two conversions into one OUT: the one that renames second is told OUT exists (one line),
    and the cache's loser reads the winner's conversion."""
    from corolla.data import convert, sources
    from corolla.errors import UserError

    source = sources.scan(class_folders(tmp_path / "src"))
    settings = convert.Settings(image_sizes=(8,), val_fraction=0.5)
    other = tmp_path / "other"
    convert.convert(source, other, settings, log=lambda *a: None)
    real = convert.assign_splits

    def winner_finishes_first(*args):  # the other process renames its OUT meanwhile
        import shutil

        if not out.exists():
            shutil.copytree(other, out)
        return real(*args)

    monkeypatch.setattr(convert, "assign_splits", winner_finishes_first)
    out = tmp_path / "out"
    with pytest.raises(UserError, match="already exists .another process wrote it meanwhile"):
        convert.convert(source, out, settings, log=lambda *a: None)
    assert not list(tmp_path.glob(".out.partial-*"))  # the loser's copy is gone
    out = convert.cache_folder(source, settings, tmp_path / "cache")
    assert convert.cached(source, settings, tmp_path / "cache", log=lambda *a: None) == out


@pytest.fixture
def mounted(tmp_path):
    """A small tmpfs at tmp_path/disk (root and mount(8) needed, as in CI), and a function to
    make it read-only."""
    disk = tmp_path / "disk"
    disk.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(disk)],
                            capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")

    def read_only():
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)

    yield disk, read_only
    subprocess.run(["umount", str(disk)], check=False)


def test_7_read_only_or_wrong_kind_outputs_are_one_line(trained, mounted, tmp_path, capsys,
                                                        monkeypatch):
    disk, read_only = mounted
    monkeypatch.setenv("COROLLA_CACHE_DIR", str(tmp_path / "cache"))
    run = shutil.copytree(trained, disk / "t", ignore=shutil.ignore_patterns("*.keras", "*.png",
                                                                            "logs", "*.html"))
    src = class_folders(tmp_path / "src")
    read_only()
    _one_line(capsys, main(["report", str(run)]), f"could not write {run / 'report.html'}",
              "Read-only file system")
    train = ["train", "--data", str(src), "--image-size", "8", "--batch-size", "2"]
    _one_line(capsys, main([*train, "--runs-dir", str(disk / "runs")]),
              "cannot create a run directory", "Read-only file system")
    _one_line(capsys, main(["convert", str(src), str(disk / "out")]),
              "cannot write the conversion into", "Read-only file system")
    (tmp_path / "file").write_text("")
    _one_line(capsys, main([*train, "--runs-dir", str(tmp_path / "file")]),
              "is a file, not a folder")


def test_8_a_full_disk_during_convert_is_one_line(mounted, tmp_path, capsys):
    disk, _ = mounted
    src = class_folders(tmp_path / "src", n=20, size=96, noise=True)  # ~1 MB of JPEG, on 96 kB
    _one_line(capsys, main(["convert", str(src), str(disk / "out"), "--image-size", "96"]),
              "cannot write the conversion into", "free space")
    assert not list(disk.iterdir())  # nothing half-written is left


@pytest.mark.slow
def test_21_damaged_records_of_a_run_are_one_line_naming_the_file(trained, tmp_path, capsys):
    from corolla.errors import UserError
    from corolla.runs import rundir

    run = shutil.copytree(trained, tmp_path / "t")
    capsys.readouterr()
    (run / "metrics.json").write_text('{"f1_macro": 0.5,')  # cut short
    _one_line(capsys, main(["report", str(run)]), f"{run / 'metrics.json'} is damaged",
              f"corolla evaluate {run}")
    (run / "history.csv").write_text("epoch,loss\n0,0.5\n1,not a number\n")
    _one_line(capsys, main(["evaluate", str(run)]), f"{run / 'history.csv'} is damaged")
    (run / "plan.json").write_text("{")  # what a resumed session adds to
    with pytest.raises(UserError, match=r"plan.json is damaged .* move it away"):
        rundir.record_session(run, plan=None)


@pytest.mark.parametrize("flag", ["--input-size", "--start-size"])
def test_10_a_size_below_the_models_smallest_is_one_line_before_any_folder(tiny_petals,
                                                                          tmp_path, capsys,
                                                                          flag):
    import corolla
    from corolla.errors import UserError

    runs = tmp_path / "runs"
    _one_line(capsys, main(["train", "--data", str(tiny_petals), "--model", "small_cnn", flag,
                            "7", "--runs-dir", str(runs)]),
              "model 'small_cnn' takes images of at least 8 px", f"({flag}")
    for folds in ([], ["--folds", "2"]):
        assert main(["train", "--data", str(tiny_petals), "--model", "small_cnn",
                     "--input-size", "7", "--runs-dir", str(runs), *folds]) == 2
    assert not runs.exists()
    with pytest.raises(UserError, match="at least 8 px"):
        corolla.train(data=tiny_petals, model="small_cnn", input_size=7, runs_dir=runs)


def test_an_input_size_out_of_range_names_input_size_before_a_conversion(tmp_path, capsys,
                                                                           monkeypatch):
    """`--input-size 1` and `100000` on an image folder: the errors named --image-size (the
    conversion's flag, which the user never gave), after the photos were surveyed."""
    from helpers.images import make_photos

    photos = make_photos(tmp_path / "photos", per_class=4) and tmp_path / "photos"
    monkeypatch.setenv("COROLLA_CACHE_DIR", str(tmp_path / "cache"))
    for size, needle in (("1", "the input size (--input-size) is 1"),
                         ("100000", "--input-size must be at most 4096, got 100000")):
        _one_line(capsys, main(["train", "--data", str(photos), "--input-size", size,
                                "--runs-dir", str(tmp_path / "runs")]), needle)
    assert not (tmp_path / "runs").exists()


@pytest.mark.large  # 33s: CI's large step (the README's suite keeps to 20 min)
def test_16_the_advised_skip_bad_records_continues_a_run(tiny_petals, tmp_path, capsys):
    """A damaged record met mid-training advises --skip-bad-records: both ways of continuing the
    run take it (and keep it for evaluate and predict); other settings are still refused."""
    from corolla import config

    crash = SCRIPTS / "crash_train.py"
    command = ["train", "--data", str(tiny_petals), "--epochs", "2", "--batch-size", "16",
               "--runs-dir", str(tmp_path), "--name", "r"]
    for how in (["train", "--resume", str(tmp_path / "r")], command):
        shutil.rmtree(tmp_path / "r", ignore_errors=True)
        died = subprocess.run([sys.executable, str(crash), "mid_epoch:0", *command], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert died.returncode == 3, died.stderr[-2000:]
        assert main([*how, "--epochs", "3"]) == 2
        assert "--epochs" in capsys.readouterr().err
        assert main([*how, "--skip-bad-records"]) == 0
        assert config.load(tmp_path / "r" / "config.toml").data.skip_bad_records
        assert (tmp_path / "r" / "FINISHED").is_file()


def test_17_records_with_other_feature_names_name_the_features_found(tmp_path, capsys):
    import numpy as np
    import tensorflow as tf

    size_dir = tmp_path / "tfrecords-jpeg-8x8"
    for split, n in (("train", 6), ("val", 4)):
        (size_dir / split).mkdir(parents=True)
        with tf.io.TFRecordWriter(str(size_dir / split / f"00-8x8-{n}.tfrec")) as writer:
            for k in range(n):
                jpeg = tf.io.encode_jpeg(np.full((8, 8, 3), 9 * k, np.uint8)).numpy()
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                    "target": tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 3])),
                    "name": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[f"{split}-{k}".encode()]))})).SerializeToString())
    _one_line(capsys, main(["train", "--data", str(tmp_path), "--runs-dir",
                            str(tmp_path / "runs")]),
              "holds records with the features image_raw, name, target, not 'image', 'id', "
              "'class'", "image_feature = ...", "label_feature = ...")


def test_23_messages_name_the_right_thing(tmp_path, capsys, tiny_petals):
    src = class_folders(tmp_path / "src")
    _one_line(capsys, main(["train", "--data", str(tiny_petals), "--augment", "bogus,flip"]),
              "--augment: unknown augmentation 'bogus'")
    (tmp_path / "labels.csv").write_text(f"path,label\n{src / 'daisy'},daisy\n")
    _one_line(capsys, main(["convert", str(tmp_path / "labels.csv"), str(tmp_path / "o")]),
              "line 2:", "is a folder, not an image file")
    _one_line(capsys, main(["convert", str(src), str(tmp_path / "labels.csv" / "out")]),
              f"{tmp_path / 'labels.csv'} (where out would go) is a file, not a folder")


@pytest.mark.slow
def test_23_predict_of_a_folder_run_without_test_split_says_how_to_add_one(tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("COROLLA_CACHE_DIR", str(tmp_path / "cache"))
    src = class_folders(tmp_path / "src")
    assert main(["train", "--data", str(src), "--image-size", "8", "--batch-size", "2",
                 "--epochs", "1", "--steps-per-epoch", "1", "--runs-dir", str(tmp_path / "runs"),
                 "--name", "r"]) == 0
    capsys.readouterr()
    _one_line(capsys, main(["predict", str(tmp_path / "runs" / "r")]),
              f"the data {src} has no test split", "test/ folder")


def test_12_a_file_deleted_during_a_conversion_is_skipped_and_listed(tmp_path, monkeypatch):
    from corolla.data import convert, sources

    source = sources.scan(class_folders(tmp_path / "src"))
    real = convert.assign_splits

    def then_deleted(*args):  # the listing is done: the user deletes a photo meanwhile
        (tmp_path / "src" / "daisy" / "3.png").unlink()
        return real(*args)

    monkeypatch.setattr(convert, "assign_splits", then_deleted)
    summary = convert.convert(source, tmp_path / "out", convert.Settings(
        image_sizes=(8,), val_fraction=0.5, workers=1), log=lambda *a: None)
    assert [i for i, _ in summary.skipped] == ["daisy/3.png"]
    assert summary.images == 11 and (tmp_path / "out" / "convert.json").is_file()


def test_13_a_link_back_into_the_source_is_skipped_with_a_word(tmp_path, capsys):
    from corolla.data import sources

    src = class_folders(tmp_path / "src")
    (src / "toploop").symlink_to(src)
    (src / "daisy" / "inner").symlink_to(src)  # not followed by the listing either
    source = sources.scan(src)
    assert source.class_names == ("daisy", "tulip") and len(source.items) == 12
    assert f"skipped {src / 'toploop'}: a link to {src}, inside the source" in \
        capsys.readouterr().out


@pytest.mark.slow
def test_19_a_giant_image_converts_up_to_the_documented_limit(tmp_path, capsys):
    """Pillow would drop a 400-megapixel photo as a 'decompression bomb'; Corolla reads images
    up to --max-megapixels (1000 by default) and skips larger ones, listed, with the setting."""
    from PIL import Image

    from corolla.data import convert

    big = tmp_path / "big.png"
    Image.new("RGB", (20000, 10000), (200, 30, 60)).save(big)  # 200 megapixels: over Pillow's
    pixels = convert.load_image(str(big), 16)
    assert pixels.shape == (16, 16, 3) and tuple(pixels[8, 8]) == (200, 30, 60)
    with pytest.raises(ValueError, match=r"20000x10000 is 200 megapixels, over the limit of "
                                         r"100 \(--max-megapixels\)"):
        convert._open_rgb(str(big), 16, max_megapixels=100)
    src = class_folders(tmp_path / "src")
    big.rename(src / "daisy" / "big.png")
    assert main(["convert", str(src), str(tmp_path / "out"), "--image-size", "16",
                 "--max-megapixels", "100"]) == 0
    assert "over the limit of 100 (--max-megapixels)" in capsys.readouterr().out


def test_18_a_killed_conversions_folder_is_removed_a_live_ones_kept(tmp_path, capsys):
    from corolla.data import convert

    stale, live = tmp_path / ".out.partial-0000dead", tmp_path / ".other.partial-00001ive"
    for folder in (stale, live):
        folder.mkdir()
        (folder / convert.WRITER).write_text("")
        (folder / "00-8x8-6.tfrec").write_bytes(b"x" * 1000)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"),
        str(live / convert.WRITER)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["convert", str(class_folders(tmp_path / "src")), str(tmp_path / "out"),
                     "--image-size", "8"]) == 0
    finally:
        holder.kill()
        holder.wait()
    assert not stale.exists() and live.is_dir() and (tmp_path / "out").is_dir()
    assert not (tmp_path / "out" / convert.WRITER).exists()
    assert f"removed {stale}, left by a conversion that was stopped" in capsys.readouterr().out


def test_a_cache_or_runs_folder_that_cannot_be_made_is_one_line(tiny_petals, tmp_path,
                                                                monkeypatch, capsys):
    """HOME that cannot be created, and --runs-dir under /proc: raw FileNotFoundError
    tracebacks (`mkdir` with parents)."""
    from helpers.images import make_photos

    photos = tmp_path / "photos"
    make_photos(photos, per_class=4)
    monkeypatch.delenv("COROLLA_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/proc/self/nonexistent")
    tiny = ["--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "4", "--input-size", "16"]
    _one_line(capsys, main(["train", "--data", str(photos), "--runs-dir", str(tmp_path / "r"),
                            *tiny]),
              "cannot make the conversion cache /proc/self/nonexistent/.cache/corolla",
              "COROLLA_CACHE_DIR")
    _one_line(capsys, main(["train", "--data", str(tiny_petals), "--runs-dir",
                            "/proc/sys/runs", *tiny]),
              "cannot create a run directory in '/proc/sys/runs'", "--runs-dir")


def test_a_relative_recipe_file_is_the_same_command_when_re_run(tmp_path, monkeypatch):
    """A killed run started with `--recipe myrecipe2.toml`, re-run as the same command, was
    refused: `exists with other settings: --recipe 'myrecipe2.toml' (the run has
    '/.../myrecipe2.toml')`. The same file by another spelling is the same recipe; another
    file is not."""
    from corolla import config as config_lib
    from corolla.commands import train
    from corolla.errors import UserError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "myrecipe2.toml").write_text('description = "mine"\n')
    (tmp_path / "other.toml").write_text('description = "other"\n')
    saved = config_lib.apply(config_lib.load(),
                             {"train.recipe": str(tmp_path / "myrecipe2.toml")})
    names = {"train.recipe": "--recipe"}
    for spelling in ("myrecipe2.toml", "./myrecipe2.toml", str(tmp_path / "myrecipe2.toml")):
        train._check_same_command(saved, {"train.recipe": spelling}, names, tmp_path / "r")
    with pytest.raises(UserError, match="exists with other settings: --recipe"):
        train._check_same_command(saved, {"train.recipe": "other.toml"}, names, tmp_path / "r")


def test_a_run_without_a_model_says_whether_it_is_being_trained_or_was_stopped(tmp_path,
                                                                                capsys):
    """`report` of a killed run advised `corolla evaluate`, which refuses a killed run; and a
    run still training was told to `--resume`, which is refused while it trains."""
    import os

    from corolla import config as config_lib
    from corolla.files import hold_lock

    run = tmp_path / "kill1"
    run.mkdir()
    config_lib.save(config_lib.load(), run / "config.toml")
    stopped = f"has no model.keras: its training did not finish; continue it with " \
              f"`corolla train --resume {run}`"
    for command in (["report", str(run)], ["evaluate", str(run)],
                    ["export", str(run), "--format", "savedmodel"]):
        _one_line(capsys, main(command), stopped)
    lock = hold_lock(run / ".lock")  # as the training process holds it
    try:
        os.write(lock, b"process 4242 on host")
        for command in (["report", str(run)], ["evaluate", str(run)]):
            line = _one_line(capsys, main(command), "is being trained (by process 4242 on "
                                                    "host)", "use it once its training ends")
            assert "--resume" not in line
    finally:
        os.close(lock)


def test_zero_steps_and_image_size_are_said_to_mean_the_default(capsys):
    """`--steps-per-epoch 0` and `--image-size 0` silently meant "the default" (0 stays valid in
    configs, as a written-out default): `corolla train --help` says so."""
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())

    def help_of(flag):
        return text.split(f"{flag} {flag[2:].upper().replace('-', '_')} ", 1)[1][:200]

    assert help_of("--steps-per-epoch").startswith("default, or 0: one pass over train")
    assert "default, or 0: the one nearest the input size" in help_of("--image-size")


def test_derived_learning_rates_are_saved_as_the_decimals_they_are(tiny_petals, tmp_path):
    """config.toml said `start_learning_rate = 0.00030000000000000003` (a peak of 0.003 over
    10 in binary floating point). Rounded where it is derived, so a resume reads back what an
    uninterrupted run uses."""
    assert main(["train", "--data", str(tiny_petals), "--model", "small_cnn", "--epochs", "1",
                 "--steps-per-epoch", "1", "--batch-size", "8", "--lr", "0.003",
                 "--runs-dir", str(tmp_path), "--name", "r"]) == 0
    saved = (tmp_path / "r" / "config.toml").read_text()
    assert "\nstart_learning_rate = 0.0003\n" in saved, saved
    assert "\nmin_learning_rate = 3e-05\n" in saved, saved
