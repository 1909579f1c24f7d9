"""The competition's TFRecord format: labelled records hold `image` (JPEG bytes), `class`
(int64) and `id` (bytes); test records hold `image` and `id`. Parsing and writing live here."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from corolla.errors import DATA_ERROR

LABELLED = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "id": tf.io.FixedLenFeature([], tf.string),
}
UNLABELLED = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "id": tf.io.FixedLenFeature([], tf.string),
}


def decode_image(jpeg: tf.Tensor, image_size: int) -> tf.Tensor:
    """JPEG bytes -> uint8 [S, S, 3] with a static shape (TPUs need one)."""
    image = tf.io.decode_jpeg(jpeg, channels=3)
    check = tf.debugging.assert_equal(
        tf.shape(image)[:2], [image_size, image_size],
        message=f"{DATA_ERROR}: an image in the records is not {image_size}x{image_size}; "
                f"the images under tfrecords-jpeg-{image_size}x{image_size}/ must all be that "
                f"size")
    with tf.control_dependencies([check]):
        return tf.ensure_shape(tf.identity(image), [image_size, image_size, 3])


def parse(serialized: tf.Tensor, image_size: int, labelled: bool) -> dict[str, tf.Tensor]:
    """One record -> {"image": uint8 [S,S,3], "id": string, "label": int32 (labelled only)}."""
    example = tf.io.parse_single_example(serialized, LABELLED if labelled else UNLABELLED)
    out = {"image": decode_image(example["image"], image_size), "id": example["id"]}
    if labelled:
        out["label"] = tf.cast(example["class"], tf.int32)
    return out


def parse_meta(serialized: tf.Tensor, labelled: bool) -> dict[str, tf.Tensor]:
    """Id (and label) without decoding the image: cheap, for lining predictions up with ids."""
    spec = {k: v for k, v in (LABELLED if labelled else UNLABELLED).items() if k != "image"}
    example = tf.io.parse_single_example(serialized, spec)
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
