"""Records written for tests, in the competition layout: damaged as downloads and disks damage
them (an image that is no JPEG, a JPEG whose data is corrupt, a file whose tail is cut off; 32
px, 4 classes), and 16 px ones with a class 10x rarer than the others."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from corolla.data import records
from corolla.data.classes import format_classes_file


SIZE = 32
GOOD = 16  # records per file


def jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    return tf.io.encode_jpeg(rng.integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)).numpy()


NOT_JPEG = b"this is not an image at all"
CORRUPT = jpeg(0)[:20] + b"\0" * 40 + jpeg(0)[60:]  # starts like a JPEG, fails to decode


def write_split_file(root, split: str, index: int, images: list[bytes], cut: int = 0,
                     repeat: bool = False) -> str:
    """One file of `images` (ids "<split><index>-<n>"; with `repeat`, record 1 has record 0's
    id), named for their count; `cut` bytes taken off its end afterwards (a download that
    stopped early)."""
    folder = root / f"tfrecords-jpeg-{SIZE}x{SIZE}" / split
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / records.shard_name(index, SIZE, len(images))
    with tf.io.TFRecordWriter(str(path)) as writer:
        for n, image in enumerate(images):
            named = 0 if repeat and n == 1 else n
            writer.write(records.serialize(image, f"{split[:2]}{index}-{named:04d}",
                                           None if split == "test" else n % 4))
    if cut:
        path.write_bytes(path.read_bytes()[:-cut])
    return str(path)


def damaged_data(root, damage: dict | None = None):
    """train 2x16, val 2x16, test 1x16 good images; `damage`: {(split, file index): kinds}, a
    kind or several: "not_jpeg" (record 3), "corrupt" (record 5), "truncated" (the last record
    cut), "repeated_id" (record 1 has record 0's id)."""
    damage = damage or {}
    (root / "classes.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "classes.txt").write_text(format_classes_file(["a", "b", "c", "d"]))
    paths = {}
    for split, files in (("train", 2), ("val", 2), ("test", 1)):
        for index in range(files):
            images = [jpeg(100 * index + n) for n in range(GOOD)]
            kinds = damage.get((split, index), ())
            kinds = (kinds,) if isinstance(kinds, str) else kinds
            if "not_jpeg" in kinds:
                images[3] = NOT_JPEG
            if "corrupt" in kinds:
                images[5] = CORRUPT
            paths[split, index] = write_split_file(root, split, index, images,
                                                   cut=30 if "truncated" in kinds else 0,
                                                   repeat="repeated_id" in kinds)
    return paths


# One class 10x rarer: `--class-weight balanced` raises its recall.
RARE_SIZE = 16
RARE_CENTRES = (40, 215, 128)  # red value of class 0, 1 and the rare class 2
RARE_JITTER = 75  # the rare class's band overlaps both others: priors decide the overlaps
RARE_TRAIN = {0: 150, 1: 150, 2: 15}  # class 2 is 10x rarer
RARE_VAL = {0: 40, 1: 40, 2: 40}


def write_rare_class(root: Path) -> Path:
    """Solid-colour images whose class is their red band, with one class 10x rarer."""
    rng = np.random.default_rng(0)
    for split, counts in (("train", RARE_TRAIN), ("val", RARE_VAL),
                          ("test", {0: 2, 1: 2, 2: 2})):
        labels = rng.permutation([c for c, n in counts.items() for _ in range(n)])
        serialized = []
        for i, label in enumerate(labels):
            red = RARE_CENTRES[label] + rng.integers(-RARE_JITTER, RARE_JITTER + 1)
            red = int(np.clip(red, 0, 255))
            pixel = np.array([red, *rng.integers(0, 256, 2)], np.uint8)
            image = np.broadcast_to(pixel, (RARE_SIZE, RARE_SIZE, 3)).copy()
            serialized.append(records.serialize(tf.io.encode_jpeg(image, quality=95).numpy(),
                                                f"{split}{i:05d}",
                                                None if split == "test" else int(label)))
        folder = root / f"tfrecords-jpeg-{RARE_SIZE}x{RARE_SIZE}" / split
        records.write_shards(serialized, folder, RARE_SIZE, 1)
    (root / "classes.txt").write_text("common a\ncommon b\nrare\n")
    return root
