"""A fast pass over a split before any work is spent on it: every file's record count against
the count its name states, and every label against the class range. No image is decoded."""

from __future__ import annotations

import tensorflow as tf

from corolla.data import records
from corolla.data.layout import Split, _FILE
from corolla.errors import UserError


def _file_summary(path: tf.Tensor, labelled: bool) -> tf.Tensor:
    """[records, smallest label, largest label] of one file (labels 0, -1 when unlabelled)."""
    ds = tf.data.TFRecordDataset(path)
    if not labelled:
        count = ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
        return tf.stack([count, tf.constant(0, tf.int64), tf.constant(-1, tf.int64)])
    labels = ds.map(lambda r: tf.cast(records.parse_meta(r, True)["label"], tf.int64))
    big = tf.constant(2**62, tf.int64)
    return labels.reduce(tf.stack([tf.constant(0, tf.int64), big, -big]),
                         lambda s, y: tf.stack([s[0] + 1, tf.minimum(s[1], y),
                                                tf.maximum(s[2], y)]))


def check_split(split: Split, num_classes: int) -> None:
    """Raises a UserError naming the first file whose name miscounts its records or that holds
    a label outside [0, num_classes)."""
    for file in split.files:
        try:
            count, low, high = (int(v) for v in _file_summary(tf.constant(file.path),
                                                              split.labelled).numpy())
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            raise UserError(f"{file.path} is damaged ({e.message.splitlines()[0]}); replace "
                            f"the file or remove it from the {split.name} split") from None
        named = _FILE.match(file.path.rsplit("/", 1)[-1])
        if named and count != file.count:
            raise UserError(f"{file.path} holds {count} records but its name says {file.count};"
                            f" rename it to end in -{count}.tfrec")
        if split.labelled and count and not (0 <= low and high < num_classes):
            bad = high if high >= num_classes else low
            raise UserError(f"{file.path} has a record with label {bad}, outside the "
                            f"{num_classes} classes [0, {num_classes - 1}]; fix the labels or "
                            f"the data set's classes.txt")
