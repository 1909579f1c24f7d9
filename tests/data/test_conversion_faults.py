"""A conversion meets what happens to folders: another conversion racing for OUT, a file deleted or
a link back into the source, a giant image, a killed conversion's leftovers."""

import os
import subprocess
import sys

import pytest

from corolla.cli import main
from helpers.images import class_folders


def test_a_conversion_that_loses_the_race_for_out_says_it_exists(tmp_path, monkeypatch):
    """Two conversions into one OUT: the one that renames second is told OUT exists (one line),
    and the cache's loser reads the winner's conversion."""
    from corolla.data.prepare import cache, sharding, sources
    from corolla.data.prepare.settings import Settings
    from corolla.errors import UserError

    source = sources.scan(class_folders(tmp_path / "src"))
    settings = Settings(image_sizes=(8,), val_fraction=0.5)
    other = tmp_path / "other"
    sharding.convert(source, other, settings, log=lambda *a: None)
    real = sharding.assign_splits

    def winner_finishes_first(*args):  # the other process renames its OUT meanwhile
        import shutil

        if not out.exists():
            shutil.copytree(other, out)
        return real(*args)

    monkeypatch.setattr(sharding, "assign_splits", winner_finishes_first)
    out = tmp_path / "out"
    with pytest.raises(UserError, match="already exists .another process wrote it meanwhile"):
        sharding.convert(source, out, settings, log=lambda *a: None)
    assert not list(tmp_path.glob(".out.partial-*"))  # the loser's copy is gone
    out = cache.cache_folder(source, settings, tmp_path / "cache")
    assert cache.cached(source, settings, tmp_path / "cache", log=lambda *a: None) == out


def test_a_file_deleted_during_a_conversion_is_skipped_and_listed(tmp_path, monkeypatch):
    from corolla.data.prepare import sharding, sources
    from corolla.data.prepare.settings import Settings

    source = sources.scan(class_folders(tmp_path / "src"))
    real = sharding.assign_splits

    def then_deleted(*args):  # the listing is done: the user deletes a photo meanwhile
        (tmp_path / "src" / "daisy" / "3.png").unlink()
        return real(*args)

    monkeypatch.setattr(sharding, "assign_splits", then_deleted)
    summary = sharding.convert(source, tmp_path / "out", Settings(
        image_sizes=(8,), val_fraction=0.5, workers=1), log=lambda *a: None)
    assert [i for i, _ in summary.skipped] == ["daisy/3.png"]
    assert summary.images == 11 and (tmp_path / "out" / "convert.json").is_file()


def test_a_link_back_into_the_source_is_skipped_with_a_word(tmp_path, capsys):
    from corolla.data.prepare import sources

    src = class_folders(tmp_path / "src")
    (src / "toploop").symlink_to(src)
    (src / "daisy" / "inner").symlink_to(src)  # not followed by the listing either
    source = sources.scan(src)
    assert source.class_names == ("daisy", "tulip") and len(source.items) == 12
    assert f"skipped {src / 'toploop'}: a link to {src}, inside the source" in \
        capsys.readouterr().out


def test_a_link_to_a_folder_holding_the_source_is_skipped_with_a_word(tmp_path, capsys):
    """`up -> ..` gave a class a second copy of every photo; `disk -> /` walked the whole
    disk. A link elsewhere (a class kept on another disk) is still a class."""
    from corolla.data.prepare import sources

    src = class_folders(tmp_path / "src")
    (src / "up").symlink_to(tmp_path)
    (src / "disk").symlink_to("/")
    class_folders(tmp_path / "elsewhere", n=1)
    (src / "rose").symlink_to(tmp_path / "elsewhere" / "daisy")
    source = sources.scan(src)
    assert source.class_names == ("daisy", "rose", "tulip") and len(source.items) == 13
    said = capsys.readouterr().out
    assert f"skipped {src / 'up'}: a link to {tmp_path}, which holds the source" in said
    assert f"skipped {src / 'disk'}: a link to /, which holds the source" in said


def test_class_folders_that_read_as_one_name_are_one_line(tmp_path, capsys):
    """`café` composed and decomposed are two folders to Linux and one name to a reader."""
    src = class_folders(tmp_path / "src")
    for name in ("caf\u00e9", "cafe\u0301"):
        class_folders(tmp_path / "one", n=1)
        (tmp_path / "one" / "daisy").rename(src / name)
        (tmp_path / "one").joinpath("tulip").rename(tmp_path / f"spare-{len(name)}")
    assert main(["convert", str(src), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("corolla: error: class names 'cafe\\u0301' and 'caf\\xe9' in the class "
                          "folders of ") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_class_folders_nested_thousands_deep_are_listed(tmp_path):
    """A tree walk by recursion ended in a RecursionError at about 1,000 folders."""
    from corolla.data.prepare import sources

    src = class_folders(tmp_path / "src", n=1)
    deep = src / "daisy"
    for _ in range(1200):
        deep = deep / "d"
        deep.mkdir()
    (src / "daisy" / "0.png").rename(deep / "0.png")
    try:
        source = sources.scan(src)
        assert sorted(i.id.count("/") for i in source.items) == [1, 1201]
        sources.check_source(str(src))
    finally:  # removed here, deepest first: pytest's recursive removal would not get through
        (deep / "0.png").unlink()
        while deep != src / "daisy":
            deep.rmdir()
            deep = deep.parent


def test_a_path_longer_than_the_system_opens_is_one_line(tmp_path):
    """Made folder by folder (each name short enough), a tree's path can outgrow PATH_MAX,
    where no call opens it by its path (ENAMETOOLONG)."""
    from corolla.data.prepare import sources
    from corolla.errors import UserError

    src = class_folders(tmp_path / "src", n=1)
    fd = os.open(src / "tulip", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(18):  # 18 x 251 bytes: beyond Linux's 4,096
            os.mkdir("x" * 250, dir_fd=fd)
            inner = os.open("x" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    with pytest.raises(UserError, match=r"^cannot list .*\.\.\. \(1[67] folders deep in .*tulip\): "
                                        r"its path is \d+ bytes long, more than the system "
                                        r"opens \(\d+\); move the images to a shallower folder$"):
        sources.scan(src)


@pytest.mark.slow
def test_a_giant_image_converts_up_to_the_documented_limit(tmp_path, capsys):
    """Pillow would drop a 400-megapixel photo as a 'decompression bomb'; Corolla reads images
    up to --max-megapixels (200 by default) and skips larger ones, listed, with the setting."""
    from PIL import Image

    from corolla.data.prepare import image_files

    big = tmp_path / "big.png"
    Image.new("RGB", (20000, 10000), (200, 30, 60)).save(big)  # 200 megapixels: over Pillow's
    pixels = image_files.load_image(str(big), 16)
    assert pixels.shape == (16, 16, 3) and tuple(pixels[8, 8]) == (200, 30, 60)
    with pytest.raises(ValueError, match=r"20000x10000 is 200 megapixels, over the limit of "
                                         r"100 \(--max-megapixels\)"):
        image_files.open_rgb(str(big), 16, max_megapixels=100)
    src = class_folders(tmp_path / "src")
    big.rename(src / "daisy" / "big.png")
    assert main(["convert", str(src), str(tmp_path / "out"), "--image-size", "16",
                 "--max-megapixels", "100"]) == 0
    assert "over the limit of 100 (--max-megapixels)" in capsys.readouterr().out


def test_a_killed_conversions_folder_is_removed_a_live_ones_kept(tmp_path, capsys):
    from corolla.data.prepare import sharding

    stale, live = tmp_path / ".out.partial-0000dead", tmp_path / ".other.partial-00001ive"
    for folder in (stale, live):
        folder.mkdir()
        (folder / sharding.WRITER).write_text("")
        (folder / "00-8x8-6.tfrec").write_bytes(b"x" * 1000)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"),
        str(live / sharding.WRITER)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["convert", str(class_folders(tmp_path / "src")), str(tmp_path / "out"),
                     "--image-size", "8"]) == 0
    finally:
        holder.kill()
        holder.wait()
    assert not stale.exists() and live.is_dir() and (tmp_path / "out").is_dir()
    assert not (tmp_path / "out" / sharding.WRITER).exists()
    assert f"removed {stale}, left by a conversion that was stopped" in capsys.readouterr().out
