"""Special files cannot hang a command or take the host's memory: a FIFO (whose opening blocks
its reader), a device (/dev/zero never ends) or a file far larger than its kind, given where
Corolla reads a file from outside (a config, a recipe, a classes.txt, a record shard, a model),
is refused in one line before it is opened; a report leaves out a picture larger than any
plot. Each runs in a process with a memory cap and a timeout, so a regression fails instead of
hanging or exhausting the host."""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from corolla.errors import UserError
from helpers.processes import run_capped

# Says what each call did, in the capped process: the UserError's line, or that it went on.
REFUSED = """
import json
from corolla.errors import UserError
def refused(call):
    try:
        call()
    except UserError as e:
        return str(e)
    return "accepted"
"""


def _refusals(code: str, setup: str = "", gib: float = 0.5) -> dict:
    result = run_capped(REFUSED + code, gib=gib, setup=setup, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_config_or_recipe_that_is_a_fifo_a_device_or_outsize_is_refused_unread(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    big = tmp_path / "big.toml"
    big.write_bytes(b"# a comment: valid TOML, but no config is 5 MB\n" * 110_000)
    found = _refusals(f"""
from corolla import config
from corolla.config import recipe
print(json.dumps({{
    "config fifo": refused(lambda: config.load_config({str(fifo)!r})),
    "config device": refused(lambda: config.load_config("/dev/zero")),
    "config outsize": refused(lambda: config.load_config({str(big)!r})),
    "recipe fifo": refused(lambda: recipe.load_recipe({str(fifo)!r})),
    "recipe device": refused(lambda: recipe.load_recipe("/dev/zero")),
}}))
""", setup="from corolla import config\nfrom corolla.config import recipe")
    assert found == {
        "config fifo": f"config file {str(fifo)!r} is not a regular file (a FIFO); pass a file",
        "config device": "config file '/dev/zero' is not a regular file (a device); pass a file",
        "config outsize": f"config file {str(big)!r} is 4.9 MB, more than the 4.0 MB a config "
                          f"file can be; pass the right file",
        "recipe fifo": f"recipe file {str(fifo)!r} is not a regular file (a FIFO); pass a file",
        "recipe device": "recipe file '/dev/zero' is not a regular file (a device); pass a "
                         "file"}


@pytest.mark.large  # a fresh process importing TensorFlow under a memory cap: CI's large step
def test_a_classes_file_or_a_record_shard_that_is_a_fifo_is_refused_unopened(tmp_path,
                                                                             photos):
    """A photo folder's classes.txt, a TFRecord layout's classes.txt, a shard of a split, a
    k-fold run's fold assignment; and --data naming a device says what it is, not that it
    does not exist."""
    root, _ = photos
    folder = tmp_path / "photos"
    (folder / "aster").mkdir(parents=True)
    (folder / "aster" / "00.jpg").write_bytes((root / "aster" / "00.jpg").read_bytes())
    os.mkfifo(folder / "classes.txt")
    layout = tmp_path / "layout"
    shards = layout / "tfrecords-jpeg-32x32" / "val"
    shards.mkdir(parents=True)
    os.mkfifo(layout / "classes.txt")
    os.mkfifo(shards / "00-32x32-5.tfrec")
    linked = tmp_path / "linked"
    (linked / "tfrecords-jpeg-32x32" / "val").mkdir(parents=True)
    (linked / "classes.txt").symlink_to("/dev/zero")
    found = _refusals(f"""
from corolla.data import folds, layout
from corolla.data.prepare import sources
shards = layout.Layout({str(layout)!r}, 32, ("a",), (32,))
print(json.dumps({{
    "photo folder": refused(lambda: sources.scan_folder({str(folder)!r}, log=lambda *a: None)),
    "layout": refused(lambda: layout.open_layout({str(layout)!r})),
    "layout device": refused(lambda: layout.open_layout({str(linked)!r})),
    "shard": refused(lambda: shards.split("val")),
    "data": refused(lambda: sources.kind_of("/dev/zero")),
    "folds": refused(lambda: folds.Assignment.read({str(layout / 'classes.txt')!r})),
}}))
""", setup="import tensorflow")
    assert found == {
        "photo folder": f"classes file {str(folder / 'classes.txt')!r} is not a regular file "
                        f"(a FIFO); pass a file",
        "layout": f"classes file {str(layout / 'classes.txt')!r} is not a regular file (a "
                  f"FIFO); pass a file",
        "layout device": f"classes file {str(linked / 'classes.txt')!r} is not a regular file "
                         f"(a device); pass a file",
        "shard": f"record file {str(shards / '00-32x32-5.tfrec')!r} is not a regular file (a "
                 f"FIFO); pass a file",
        "data": "data path '/dev/zero' is a device; pass --data with a folder (TFRecord "
                "layout, or images in one subfolder per class) or a CSV of path,label",
        "folds": f"fold assignment {str(layout / 'classes.txt')!r} is not a regular file (a "
                 f"FIFO); pass a file"}


def _model_with_inflating_config(path: Path, size: int) -> Path:
    """A .keras archive whose config.json inflates to `size` bytes (valid JSON: spaces after
    the object) from a few hundred kB, beside a tiny metadata.json."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", '{"keras_version": "3.0.0"}')
        info = zipfile.ZipInfo("config.json")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as member:
            member.write(b'{"class_name": "Sequential", "config": {}}')
            blank = b" " * 2**24
            for _ in range(size // len(blank)):
                member.write(blank)
    return path


@pytest.mark.large  # a fresh process importing TensorFlow under a memory cap: CI's large step
def test_a_model_that_is_special_or_inflates_far_is_refused_before_keras_reads_it(tmp_path):
    """The run's model.keras as a FIFO, as a link to /dev/zero, and as an archive whose
    config.json inflates to 256 MB from 0.3 MB: each one line, under a 0.3 GiB cap."""
    runs = {}
    for name in ("fifo", "device", "bomb"):
        runs[name] = tmp_path / name
        runs[name].mkdir()
    os.mkfifo(runs["fifo"] / "model.keras")
    (runs["device"] / "model.keras").symlink_to("/dev/zero")
    _model_with_inflating_config(runs["bomb"] / "model.keras", 2**28)
    assert (runs["bomb"] / "model.keras").stat().st_size < 2**20
    found = _refusals(f"""
from pathlib import Path
from corolla.evaluation import inference
# The refusals come before the plan is used: none is needed.
print(json.dumps({{name: refused(lambda: inference.load_model(Path(folder), None, 5))
                  for name, folder in {json.dumps({k: str(v) for k, v in runs.items()})}.items()
                  }}))
""", setup="import keras\nfrom corolla.evaluation import inference", gib=0.3)
    model = {k: str(v / "model.keras") for k, v in runs.items()}
    assert found == {
        "fifo": f"model {model['fifo']!r} is not a regular file (a FIFO); pass a file",
        "device": f"model {model['device']!r} is not a regular file (a device); pass a file",
        "bomb": f"model {model['bomb']!r} holds 'config.json' of 256.0 MB inflated (255 kB "
                f"stored): not a model Corolla saved; pass the right file"}


def test_a_report_embeds_no_picture_larger_than_any_plot(tmp_path):
    """Beside a plot, a 64 MB .png (sparse: it takes no disk) is left out, not read into the
    page; links and special files are left out before (`Sources.file`)."""
    Image.new("RGB", (4, 4)).save(tmp_path / "curves.png")
    with open(tmp_path / "vast.png", "wb") as f:
        f.truncate(64 * 2**20)
    found = _refusals(f"""
from pathlib import Path
from corolla.report import html
folder = Path({str(tmp_path)!r})
text = html._pictures(html.Sources(folder, "run", {{}}, folder))
print(json.dumps({{"figures": text.count("<figure>"), "curves": "(curves.png)" in text}}))
""", setup="from corolla.report import html")
    assert found == {"figures": 1, "curves": True}


def test_weights_that_are_a_device_are_said_to_be_one_not_missing():
    from corolla import models
    from corolla.errors import UserError

    with pytest.raises(UserError, match=r"^weights file '/dev/zero' is not a regular file \(a "
                                        r"device\); pass a file$"):
        models.check_weights(models.get("small_cnn"), "/dev/zero")


def test_a_record_declaring_more_bytes_than_its_file_is_refused_before_tensorflow_reads_it(
        tmp_path):
    """A record header claiming 2^40 bytes made TensorFlow's reader allocate them first (the
    process crashed, exit 139); the split's files are read header by header before it."""
    from corolla.data import layout
    from helpers.records import SIZE, jpeg, write_split_file

    path = write_split_file(tmp_path, "val", 0, [jpeg(1), jpeg(2)])
    good = layout.Layout(str(tmp_path), SIZE, ("a", "b", "c", "d"), (SIZE,))
    assert [f.path for f in good.split("val").files] == [path]
    with open(path, "ab") as f:  # a third record's header: 2^40 bytes, then nothing
        f.write(struct.pack("<Q", 1 << 40) + b"\0" * 4)
    with pytest.raises(UserError) as e:
        good.split("val")
    assert str(e.value) == (f"{path}: record 2 declares 1,099,511,627,776 bytes, more than the "
                            f"whole file ({os.path.getsize(path):,}); the file is damaged: "
                            f"convert the data again, or move the file away")
