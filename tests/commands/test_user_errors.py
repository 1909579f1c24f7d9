"""User mistakes, each a probe that once failed: bad input to `train`, `convert` and the rest is
one line and exit 2, said before any folder is made or any data converted; a run without a
model says whether it is being trained or was stopped."""

import pytest

from corolla.cli import main
from corolla.runs import paths
from helpers.cli import one_line
from helpers.images import class_folders


@pytest.mark.parametrize("content, says", [
    ("[train]\nepochs = 2\n".encode("utf-16"), "is not UTF-8 text"),
    (None, "is a folder; pass a .toml file"),
])
def test_a_config_that_is_not_utf8_or_is_a_folder_is_one_line(tmp_path, capsys, content,
                                                              says):
    path = tmp_path / "c.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    one_line(capsys, main(["train", "--config", str(path), "--data", str(tmp_path)]), says)
    import corolla
    from corolla.errors import UserError

    with pytest.raises(UserError, match=says):
        corolla.train(config=path, data=tmp_path)


@pytest.mark.parametrize("flag, value, says", [
    ("--seed", "-1", "--seed must be an integer from 0"),
    ("--workers", "-3", "--workers must be 0 (every core) or a number"),
])
def test_convert_settings_are_checked_before_the_data(tmp_path, capsys, flag, value, says):
    (tmp_path / "src" / "a").mkdir(parents=True)
    one_line(capsys, main(["convert", str(tmp_path / "src"), str(tmp_path / "out"), flag,
                           value]), says)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bad, says", [("ro\nse", "holds a line break"),
                                       ("   ", "is empty or only spaces")])
def test_class_names_that_classes_txt_cannot_hold_are_refused(tmp_path, capsys, bad,
                                                              says):
    """A class folder named with a line break would split into two names in classes.txt and
    shift every later label; one of spaces only would vanish from it."""
    from PIL import Image

    for name in ("daisy", bad, "tulip"):
        (tmp_path / "src" / name).mkdir(parents=True)
        for k in range(3):
            Image.new("RGB", (8, 8), (40 * k, 90, 200)).save(tmp_path / "src" / name / f"{k}.png")
    one_line(capsys, main(["convert", str(tmp_path / "src"), str(tmp_path / "out")]),
             f"class name {bad!r}", says, "rename it")
    assert not (tmp_path / "out").exists()
    one_line(capsys, main(["train", "--data", str(tmp_path / "src"), "--runs-dir",
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
        one_line(capsys, main(command), f"class names {first!r} and {second!r}",
                 "differ only by spaces around them, by case")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--input-size", "--start-size"])
def test_a_size_below_the_models_smallest_is_one_line_before_any_folder(tiny_petals,
                                                                        tmp_path, capsys,
                                                                        flag):
    import corolla
    from corolla.errors import UserError

    runs = tmp_path / "runs"
    one_line(capsys, main(["train", "--data", str(tiny_petals), "--model", "small_cnn", flag,
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
        one_line(capsys, main(["train", "--data", str(photos), "--input-size", size,
                               "--runs-dir", str(tmp_path / "runs")]), needle)
    assert not (tmp_path / "runs").exists()


def test_records_with_other_feature_names_name_the_features_found(tmp_path, capsys):
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
    one_line(capsys, main(["train", "--data", str(tmp_path), "--runs-dir",
                           str(tmp_path / "runs")]),
             "holds records with the features image_raw, name, target, not 'image', 'id', "
             "'class'", "image_feature = ...", "label_feature = ...")


def test_messages_name_the_right_thing(tmp_path, capsys, tiny_petals):
    src = class_folders(tmp_path / "src")
    one_line(capsys, main(["train", "--data", str(tiny_petals), "--augment", "bogus,flip"]),
             "--augment: unknown augmentation 'bogus'")
    (tmp_path / "labels.csv").write_text(f"path,label\n{src / 'daisy'},daisy\n")
    one_line(capsys, main(["convert", str(tmp_path / "labels.csv"), str(tmp_path / "o")]),
             "line 2:", "is a folder, not an image file")
    one_line(capsys, main(["convert", str(src), str(tmp_path / "labels.csv" / "out")]),
             f"{tmp_path / 'labels.csv'} (where out would go) is a file, not a folder")


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
    one_line(capsys, main(["train", "--data", str(photos), "--runs-dir", str(tmp_path / "r"),
                           *tiny]),
             "cannot make the conversion cache /proc/self/nonexistent/.cache/corolla",
             "COROLLA_CACHE_DIR")
    one_line(capsys, main(["train", "--data", str(tiny_petals), "--runs-dir",
                           "/proc/sys/runs", *tiny]),
             "cannot create a run directory in '/proc/sys/runs'", "--runs-dir")


def test_a_relative_recipe_file_is_the_same_command_when_re_run(tmp_path, monkeypatch):
    """A killed run started with `--recipe myrecipe2.toml`, re-run as the same command, was
    refused: `exists with other settings: --recipe 'myrecipe2.toml' (the run has
    '/.../myrecipe2.toml')`. The same file by another spelling is the same recipe; another
    file is not."""
    from corolla import config as config_lib
    from corolla.config.flags import Given
    from corolla.errors import UserError
    from corolla.flows import train

    monkeypatch.chdir(tmp_path)
    (tmp_path / "myrecipe2.toml").write_text('description = "mine"\n')
    (tmp_path / "other.toml").write_text('description = "other"\n')
    saved = config_lib.with_settings(config_lib.load_config(),
                                     {"train.recipe": str(tmp_path / "myrecipe2.toml")})
    names = {"train.recipe": "--recipe"}
    for spelling in ("myrecipe2.toml", "./myrecipe2.toml", str(tmp_path / "myrecipe2.toml")):
        train._check_same_command(saved, Given({"train.recipe": spelling}, names),
                                  tmp_path / "r")
    with pytest.raises(UserError, match="exists with other settings: --recipe"):
        train._check_same_command(saved, Given({"train.recipe": "other.toml"}, names),
                                  tmp_path / "r")


def test_a_run_without_a_model_says_whether_it_is_being_trained_or_was_stopped(tmp_path,
                                                                               capsys):
    """`report` of a killed run advised `corolla evaluate`, which refuses a killed run; and a
    run still training was told to `--resume`, which is refused while it trains."""
    import os

    from corolla import config as config_lib
    from corolla.files import hold_lock

    run = tmp_path / "kill1"
    run.mkdir()
    config_lib.save_config(config_lib.load_config(), run / paths.CONFIG)
    stopped = f"has no model.keras: its training did not finish; continue it with " \
              f"`corolla train --resume {run}`"
    for command in (["report", str(run)], ["evaluate", str(run)],
                    ["export", str(run), "--format", "savedmodel"]):
        one_line(capsys, main(command), stopped)
    lock = hold_lock(run / paths.LOCK)  # as the training process holds it
    try:
        os.write(lock, b"process 4242 on host")
        for command in (["report", str(run)], ["evaluate", str(run)]):
            line = one_line(capsys, main(command), "is being trained (by process 4242 on "
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


def test_lr_mistakes_are_one_line_naming_the_flag(tmp_path, tiny_petals, capsys):
    """--lr takes a rate or find; find is for a new, single run; the range test's own flags
    are checked before anything is read."""
    from helpers.cli import one_line_error

    data = ["--data", str(tiny_petals), "--runs-dir", str(tmp_path / "runs")]
    one_line_error(capsys, ["train", *data, "--lr", "abc"], "argument --lr", "or find",
                   "'abc'")
    one_line_error(capsys, ["train", "--resume", str(tmp_path / "r"), "--lr", "find"],
                   "--lr find", "--resume", "drop --lr find")
    one_line_error(capsys, ["train", *data, "--lr", "find", "--folds", "2"], "--lr find",
                   "--folds", "corolla lr-find")
    one_line_error(capsys, ["lr-find", *data, "--start", "1", "--end", "0.1"],
                   "--start (1) must be below --end (0.1)")
    # An unset variable (--time "$BUDGET") is refused, not taken as no budget at all.
    one_line_error(capsys, ["train", *data, "--time", ""], "argument --time",
                   "got an empty value")
    one_line_error(capsys, ["lr-find", *data, "--steps", "5"],
                   "--steps must be a whole number from 20")
    # A sweep sized by the user keeps one entry a step: a billion is refused before any array.
    one_line_error(capsys, ["lr-find", *data, "--steps", "1000000000"], "to 10000",
                   "got 1000000000")
    assert not (tmp_path / "runs").exists()
    import corolla
    from corolla.errors import UserError

    with pytest.raises(UserError, match='learning_rate="find" finds the rate of a new run'):
        corolla.train(resume=tmp_path / "r", learning_rate="find")
    with pytest.raises(UserError, match=r"^start= \(1\) must be below end= \(0.1\)"):
        corolla.lr_find(data=tiny_petals, start=1, end=0.1)
    with pytest.raises(UserError, match=r"^steps= must be a whole number .* got 10000000000.0"):
        corolla.lr_find(data=tiny_petals, steps=1e10)


@pytest.mark.parametrize("names", ["a\nb\nc\na\n", "a\nb\nc\nd\u200b\nd\n"])
def test_a_layouts_classes_txt_naming_a_class_twice_is_one_line_before_any_run(tmp_path, capsys,
                                                                               names):
    """Refused only as the run recorded its classes, once its folder was made."""
    from helpers.records import damaged_data

    damaged_data(tmp_path / "data")
    (tmp_path / "data" / "classes.txt").write_text(names)
    one_line(capsys, main(["train", "--data", str(tmp_path / "data"), "--runs-dir",
                           str(tmp_path / "runs"), "--epochs", "1", "--batch-size", "8"]),
             f"in {tmp_path / 'data' / 'classes.txt'}")
    assert not (tmp_path / "runs").exists()
