"""Files from elsewhere cannot take the host's memory: an image that declares more pixels than
the limit is refused on its header before any pixel is decoded, on every path that decodes
photos (the data check, conversion, predict and explain); integer CSV labels cannot size a
class list far past the labels given; the shuffle buffer holds no more than the split. Each
runs under a memory cap, so a regression fails rather than exhausting the host."""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from corolla import config
from corolla.errors import UserError
from helpers.processes import run_capped


def _png_header(path: Path, width: int, height: int) -> Path:
    """A small PNG file that declares `width` x `height` RGB pixels (its data a few rows): what
    a decompression bomb shows before it is decoded."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"\0" * 4096)) + chunk(b"IEND", b""))
    return path


@pytest.fixture(scope="module")
def bomb_folder(photos, tmp_path_factory) -> Path:
    """Two real photos of a class and, beside them, a 0.x kB PNG declaring 31000 x 31000 and
    one declaring 10000 x 10000 (the tests only read it)."""
    root, _ = photos
    folder = tmp_path_factory.mktemp("bombs") / "photos" / "aster"
    folder.mkdir(parents=True)
    for name in ("00.jpg", "04.jpg"):
        shutil.copy(root / "aster" / name, folder / name)
    _png_header(folder / "bomb.png", 31_000, 31_000)
    _png_header(folder / "large.png", 10_000, 10_000)  # 100 megapixels
    return folder.parent


@pytest.fixture(scope="module")
def photo_paths_capped(bomb_folder) -> dict:
    """What every photo path did with the bombs, in one fresh process with TensorFlow imported
    and 1 GiB left (961 megapixels would be 3.8 GB decoded, 100 megapixels 400 MB): at the
    default limit, the survey, read_many and open_rgb on the 961-megapixel PNG; at
    --max-megapixels 50, the survey and open_rgb on the 100-megapixel one."""
    bomb, large = bomb_folder / "aster" / "bomb.png", bomb_folder / "aster" / "large.png"
    return _ok(run_capped(f"""
import json
from corolla.data.audit import survey
from corolla.data.prepare import image_files

def opened(*args):
    try:
        image_files.open_rgb(*args)
        return "decoded"
    except ValueError as e:
        return str(e)

def errors(result):
    return {{e.id: e.error for e in result.entries}}

default = survey.survey({str(bomb_folder)!r}, log=lambda *a: None)
images, failed = image_files.read_many([{str(bomb)!r}, {str(bomb_folder / 'aster/00.jpg')!r}], 64)
default = {{"survey": errors(default), "read": len(images), "failed": list(failed.values()),
           "open_rgb": opened({str(bomb)!r}, 64)}}
lower = survey.survey({str(bomb_folder)!r}, log=lambda *a: None, max_megapixels=50)
lower = {{"survey": errors(lower), "open_rgb": opened({str(large)!r}, 64, 50)}}
print(json.dumps({{"default": default, "lower": lower}}))
""", gib=1, setup="import tensorflow"))


def _ok(result) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_photo_path_refuses_an_image_over_the_limit_on_its_header(photo_paths_capped):
    """961 megapixels would be 3.8 GB decoded: with 1 GiB left, each path says why it
    skips the file, and reads the real photos beside it."""
    found = photo_paths_capped["default"]
    over = "31000x31000 is 961 megapixels, over the limit of 200"
    assert [e for i, e in found["survey"].items() if i.endswith("bomb.png")] == [
        f"{over} (--max-megapixels)"]
    assert [e for i, e in found["survey"].items() if i.endswith(".jpg")] == ["", ""] or \
        [e for i, e in found["survey"].items() if i.endswith(".jpg")] == [None, None]
    assert found["read"] == 1 and len(found["failed"]) == 1 and over in found["failed"][0]
    assert over in found["open_rgb"]


@pytest.mark.slow
def test_the_data_check_and_conversion_honour_a_lower_limit_before_decoding(photo_paths_capped):
    """--max-megapixels 50: the 100-megapixel PNG is skipped by the check that runs before a
    conversion as by the conversion, both on its header (1 GiB left: 400 MB decoded would pass
    it, the limit is what stops it)."""
    found = photo_paths_capped["lower"]
    over = "10000x10000 is 100 megapixels, over the limit of 50"
    assert [e for i, e in found["survey"].items() if i.endswith("large.png")] == [
        f"{over} (--max-megapixels)"]
    assert over in found["open_rgb"]


def test_integer_labels_far_past_their_count_are_one_line(tmp_path, photos):
    """Labels 0 and 1000000000 would make a billion classes (5 GB of names): one line, under a
    512 MiB cap; labels in the competition's 104 classes, with gaps, are kept as they are."""
    root, _ = photos
    image, other = root / "aster" / "00.jpg", root / "aster" / "04.jpg"
    table = tmp_path / "labels.csv"
    table.write_text(f"path,label\n{image},0\n{other},1000000000\n")
    result = run_capped(f"""
from corolla.data.prepare import sources
from corolla.errors import UserError
try:
    sources.scan_csv({str(table)!r})
except UserError as e:
    print(e)
""", gib=0.5)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == (
        f"label 1000000000 in labels.csv, but only 2 distinct labels: integer labels number the "
        f"classes from 0, so give class names as labels or list the classes in "
        f"{tmp_path / 'classes.txt'}")
    from corolla.data.prepare import sources

    table.write_text(f"path,label\n{image},103\n{other},4\n")
    assert len(sources.scan_csv(table).class_names) == 104
    table.write_text(f"path,label\n{image},0\n{other},2999\n")  # 3,000 classes, 2 given
    with pytest.raises(UserError, match="label 2999 in labels.csv, but only 2 distinct"):
        sources.scan_csv(table)
    table.write_text(f"path,label\n{image},{'9' * 5000}\n")  # more digits than int() reads
    with pytest.raises(UserError, match="label 99999999999999999999 in labels.csv"):
        sources.scan_csv(table)


@pytest.mark.slow
def test_a_shuffle_buffer_past_the_split_holds_only_the_split(tiny_petals):
    """TensorFlow reserves a shuffle buffer whole: a billion slots (24 GB) with 4 GiB left
    train as the split's 64 would; the config refuses more than a million in one line."""
    result = run_capped(f"""
from corolla.data import datasets, pipeline
split = datasets.open_data({str(tiny_petals)!r}).split("train")
ds = pipeline.train_dataset(split, 32, 8, epoch_examples=16, shuffle_buffer=10**9)
print(sum(int(images.shape[0]) for images, _ in ds.take(2)))
""", gib=4, setup="import tensorflow")
    assert result.returncode == 0 and result.stdout.strip().endswith("16"), result.stderr[-2000:]
    with pytest.raises(UserError, match=r"data.shuffle_buffer must be at most 1000000, got "
                                        r"1000000000000"):
        config.load_config(overrides={"data.shuffle_buffer": 10**12})


def _declaring(jpeg: bytes, width: int, height: int) -> bytes:
    """The JPEG with its frame header (SOF0) declaring `width` x `height`; its data unchanged."""
    at = jpeg.index(b"\xff\xc0") + 5  # marker, length (2), precision (1), then height, width
    return jpeg[:at] + struct.pack(">HH", height, width) + jpeg[at + 4:]


@pytest.mark.slow
def test_a_record_whose_jpeg_declares_a_giant_size_is_refused_before_decoding(tmp_path):
    """In the records, a JPEG's header is checked against the folder's size before the image
    is decoded: 60000 x 60000 (10 GB decoded) is the one-line data error, with 1 GiB left."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (10, 200, 30)).save(buffer, format="JPEG")
    (tmp_path / "right.jpg").write_bytes(buffer.getvalue())
    (tmp_path / "giant.jpg").write_bytes(_declaring(buffer.getvalue(), 60000, 60000))
    result = run_capped(f"""
import tensorflow as tf
from corolla.data import records
for name in ("right.jpg", "giant.jpg"):
    try:
        jpeg = tf.io.read_file({str(tmp_path)!r} + "/" + name)
        print(records.decode_image(jpeg, 32).shape)
    except tf.errors.InvalidArgumentError as e:
        print(e.message.splitlines()[0][:200])
""", gib=1, setup="import tensorflow")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "(32, 32, 3)" and "an image in the records is not 32x32" in lines[1], lines
