"""The competition's TFRecord format: labelled records hold `image` (JPEG bytes), `class`
(int64) and `id` (bytes); test records hold `image` and `id`. Parsing and writing live here."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf

from corolla.errors import DATA_ERROR, UserError

LABELLED = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "id": tf.io.FixedLenFeature([], tf.string),
}
UNLABELLED = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "id": tf.io.FixedLenFeature([], tf.string),
}


@dataclass(frozen=True)
class Features:
    """The names of the image, label and id features in a data set's records: the
    competition's by default; others through the config (data.image_feature, ...), so that
    TFRecords written by other tools are read as they are, by the same parser."""
    image: str = "image"
    label: str = "class"
    id: str = "id"

    def spec(self, labelled: bool, image: bool = True) -> dict:
        spec = {self.id: LABELLED["id"]}
        if image:
            spec[self.image] = LABELLED["image"]
        if labelled:
            spec[self.label] = LABELLED["class"]
        return spec


COMPETITION = Features()


def parse_features(serialized: tf.Tensor, labelled: bool, features: Features = COMPETITION,
                   image: bool = True) -> dict[str, tf.Tensor]:
    """One record's features under the competition's names ("image", "class", "id"), whatever
    they are called in the file. A vector of records (a batch) gives batched features."""
    serialized = tf.convert_to_tensor(serialized)
    parse = tf.io.parse_single_example if serialized.shape.rank == 0 else tf.io.parse_example
    example = parse(serialized, features.spec(labelled, image))
    names = {"id": features.id, "image": features.image, "class": features.label}
    return {name: example[key] for name, key in names.items() if key in example}


# What to do about a damaged record (the skip is a training flag; evaluate and predict follow the
# run's config).
SKIP_HINT = ("replace the file, or skip damaged records with --skip-bad-records "
             "(data.skip_bad_records = true)")

# The first two bytes of the formats `decode_jpeg` reads: JPEG, and also PNG, GIF, BMP and WebP.
_MAGIC = (b"\xff\xd8", b"\x89P", b"GI", b"BM", b"RI")


def is_image(data: tf.Tensor) -> tf.Tensor:
    """Whether the bytes start like an image `decode_jpeg` can read: bytes that are no image at
    all (a converter's bug, an empty feature) are found without decoding, by the check before
    training and in the stream. Three ops, as it runs for every record; a JPEG whose data is
    corrupt passes, and fails only when decoded."""
    return tf.reduce_any(tf.equal(tf.strings.substr(data, 0, 2), _MAGIC))


def record_named(path: tf.Tensor, index: tf.Tensor, example_id: tf.Tensor) -> list:
    """How a record is named in the errors raised inside tf.data ("record 5 (id 0a1b2c3d4) of
    PATH"): the pieces of an assertion's data, which the CLI joins. Not joined here: a string op
    would run for every record, while the assertion formats its data only when it fails (and
    without a guard only when all of it is string or int32)."""
    return ["record ", tf.cast(index, tf.int32), " (id ", example_id, ") of ", path]


def resize(image: tf.Tensor, image_size: int, antialias: bool = False) -> tf.Tensor:
    """uint8 [H, W, 3] -> uint8 [S, S, 3], bilinear (area-averaged when shrinking with
    `antialias`), rounded and saturated back to bytes."""
    image = tf.image.resize(image, [image_size, image_size], antialias=antialias)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)


def scaled_decode(jpeg: tf.Tensor, image_size: int,
                  stored_size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Image bytes of a `stored_size` image -> (uint8 [image_size, image_size, 3], the stored
    image's [height, width], to check). A JPEG scaled by 1/2, 1/4 or 1/8 comes straight out of
    the decoder (libjpeg scales in the DCT, decoding less, so it costs less than the full image;
    figures: docs/benchmarks.md#figures-behind-the-defaults); any other size, and the other
    formats `decode_jpeg` reads (PNG...), are decoded whole and resized (area-averaged when
    smaller)."""
    def whole():
        image = tf.io.decode_jpeg(jpeg, channels=3)
        return resize(image, image_size, antialias=True), tf.shape(image)[:2]

    ratio = stored_size // image_size
    if image_size * ratio != stored_size or ratio not in (2, 4, 8):
        return whole()
    return tf.cond(tf.equal(tf.strings.substr(jpeg, 0, 2), _MAGIC[0]),
                   lambda: (tf.io.decode_jpeg(jpeg, channels=3, ratio=ratio),
                            tf.image.extract_jpeg_shape(jpeg)[:2]), whole)


def _not_stored(stored: int) -> str:
    return (f"{DATA_ERROR}: an image in the records is not {stored}x{stored}; the images under "
            f"tfrecords-jpeg-{stored}x{stored}/ must all be that size")


def _declared_size(jpeg: tf.Tensor, stored: int) -> tf.Tensor:
    """[height, width] that a JPEG's header declares, read before it is decoded, since a header
    may declare 65535 x 65535 pixels (12 GB decoded) in a few bytes. Other formats declare
    `stored` here and are checked once decoded."""
    return tf.cond(tf.equal(tf.strings.substr(jpeg, 0, 2), _MAGIC[0]),
                   lambda: tf.image.extract_jpeg_shape(jpeg)[:2],
                   lambda: tf.constant([stored, stored], tf.int32))


def decode_image(jpeg: tf.Tensor, image_size: int, where: list | None = None,
                 decode=None, stored_size: int = 0) -> tf.Tensor:
    """JPEG bytes -> uint8 [S, S, 3] with a static shape (TPUs need one). The records hold
    `stored_size` images (0: `image_size`), checked on the JPEG's header and scaled to
    `image_size` as they are decoded (`scaled_decode`). `decode` (JPEG bytes -> uint8 [S, S, 3])
    replaces the decoding, e.g. a random crop that decodes only its window.

    Inside tf.data only a TensorFlow error can be raised: the assertions carry the DATA_ERROR
    marker, and the CLI prints their message as one line. `where` (see `record_named`) names the
    record whose bytes are no image (TensorFlow's own error would name no file)."""
    checks = []
    if where is not None:
        checks.append(tf.debugging.Assert(is_image(jpeg), [
            f"{DATA_ERROR}: ", *where, " holds no image: its bytes do not start like a JPEG "
            f"(nor like another format TensorFlow decodes); {SKIP_HINT}"]))
    stored = stored_size or image_size
    declared = _declared_size(jpeg, stored)
    checks.append(tf.debugging.Assert(tf.reduce_all(tf.equal(declared, stored)),
                                      [_not_stored(stored)]))
    with tf.control_dependencies(checks):
        if decode is not None:
            # Checked already, on the header read above (a crop's own size says nothing of
            # the stored image's); `decode` reads only JPEGs, and fails on other formats.
            return tf.ensure_shape(decode(jpeg), [image_size, image_size, 3])
        if stored == image_size:
            image = tf.io.decode_jpeg(jpeg, channels=3)
            size = tf.shape(image)[:2]
        else:
            image, size = scaled_decode(jpeg, image_size, stored)
    check = tf.debugging.Assert(tf.reduce_all(tf.equal(size, stored)), [_not_stored(stored)])
    with tf.control_dependencies([check]):
        return tf.ensure_shape(tf.identity(image), [image_size, image_size, 3])


def parse(serialized: tf.Tensor, image_size: int, labelled: bool,
          source: tuple[tf.Tensor, tf.Tensor] | None = None,
          features: Features = COMPETITION, stored_size: int = 0) -> dict[str, tf.Tensor]:
    """One record -> {"image": uint8 [S,S,3], "id": string, "label": int32 (labelled only)}.
    `source`: (file path, record index in the file), to name the record in errors;
    `stored_size`: the records' image size, when not S (see `decode_image`)."""
    example = parse_features(serialized, labelled, features)
    where = None if source is None else record_named(*source, example["id"])
    out = {"image": decode_image(example["image"], image_size, where,
                                 stored_size=stored_size),
           "id": example["id"]}
    if labelled:
        out["label"] = tf.cast(example["class"], tf.int32)
    return out


def parse_meta(serialized: tf.Tensor, labelled: bool,
               features: Features = COMPETITION) -> dict[str, tf.Tensor]:
    """Id (and label) without decoding the image: cheap, for lining predictions up with ids."""
    example = parse_features(serialized, labelled, features, image=False)
    out = {"id": example["id"]}
    if labelled:
        out["label"] = tf.cast(example["class"], tf.int32)
    return out


def serialize(jpeg: bytes, example_id: str, label: int | None = None) -> bytes:
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
        "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[example_id.encode()])),
    }
    if label is not None:
        feature["class"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def shard_name(index: int, image_size: int, count: int) -> str:
    """The competition's file name: the record count is part of it (`NN-SxS-COUNT.tfrec`)."""
    return f"{index:02d}-{image_size}x{image_size}-{count}.tfrec"


def write_shards(records: list[bytes], split_dir: str | Path, image_size: int,
                 num_shards: int) -> list[str]:
    """Writes serialized records round-robin into `num_shards` files; returns their paths."""
    tf.io.gfile.makedirs(str(split_dir))
    num_shards = max(1, min(num_shards, len(records)))
    paths = []
    for index in range(num_shards):
        shard = records[index::num_shards]
        path = f"{split_dir}/{shard_name(index, image_size, len(shard))}"
        with tf.io.TFRecordWriter(path) as writer:
            for record in shard:
                writer.write(record)
        paths.append(path)
    return paths


# A record is framed as: length (uint64 little-endian), the length's masked CRC (4 bytes), the
# data, the data's masked CRC (4 bytes).
_HEADER, _FOOTER = 12, 4


def check_framing(path: str) -> None:
    """Refuses, in one line, a local record file in which a record declares more bytes than the
    whole file holds: TensorFlow's reader allocates the declared length before reading it, and
    a vast one (2^40 bytes) crashes the process rather than raising. Reads only the headers
    (12 bytes a record); a file cut short within its last record is left to the reader, which
    names it as a damaged tail."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        position, index = 0, 0
        while position + _HEADER <= size:
            f.seek(position)
            (length,) = struct.unpack("<Q", f.read(8))
            if length > size:
                raise UserError(f"{path}: record {index} declares {length:,} bytes, more than "
                                f"the whole file ({size:,}); the file is damaged: convert the "
                                f"data again, or move the file away")
            position += _HEADER + length + _FOOTER
            index += 1
