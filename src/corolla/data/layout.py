"""Finds a data set in the competition layout, on a local disk or on gs://:

    PATH/tfrecords-jpeg-192x192/{train,val,test}/NN-192x192-COUNT.tfrec
    PATH/classes.txt            (optional; without it, the competition's 104 classes)

Record counts come from the file names, as in the competition (no pass over the data).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass

import tensorflow as tf

from corolla.data.records import COMPETITION, Features, check_framing
from corolla.data.classes import (CLASSES_FILE, COMPETITION_CLASSES, check_names,
                                  read_classes_file)
from corolla.data.folders import size_folders
from corolla.errors import UserError
from corolla.files import MAX_TEXT, check_regular, file_kind, is_remote

SPLITS = ("train", "val", "test")
# A record file's name, NN-SxS-COUNT.tfrec: its count is what `check` holds the file to.
FILE_NAME = re.compile(r"^\d+-(\d+)x(\d+)-(\d+)\.tfrec$")


@dataclass(frozen=True)
class RecordFile:
    path: str
    count: int


@dataclass(frozen=True)
class Split:
    name: str
    files: tuple[RecordFile, ...]
    labelled: bool
    features: Features = COMPETITION  # the feature names in the files (see records.Features)
    stored_size: int = 0  # the images' size in the files (SxS); 0 = unknown (as asked)

    @property
    def count(self) -> int:
        return sum(f.count for f in self.files)

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]


@dataclass(frozen=True)
class Layout:
    root: str
    image_size: int
    class_names: tuple[str, ...]
    available_sizes: tuple[int, ...]
    # The path the user gave when it is not `root`: an image folder or CSV converted into root.
    source: str = ""
    features: Features = COMPETITION

    @property
    def size_dir(self) -> str:
        return f"{self.root}/tfrecords-jpeg-{self.image_size}x{self.image_size}"

    def split(self, name: str) -> Split:
        """The split's files; a missing or empty split is a user error."""
        folder = f"{self.size_dir}/{name}"
        paths = sorted(tf.io.gfile.glob(f"{folder}/*.tfrec"))
        if not paths:
            raise UserError(f"no .tfrec files in {folder}; the {name} split is needed here "
                            f"(layout: tfrecords-jpeg-SxS/{{train,val,test}}/NN-SxS-COUNT.tfrec)")
        for path in paths:  # before tf.data opens one: a FIFO would block it, unkillably
            if not is_remote(path):
                check_regular(path, "record file")
                check_framing(path)
        return Split(name, tuple(RecordFile(p, _count(p)) for p in paths),
                     labelled=name != "test", features=self.features,
                     stored_size=self.image_size)

    def has_split(self, name: str) -> bool:
        return bool(tf.io.gfile.glob(f"{self.size_dir}/{name}/*.tfrec"))


def with_source(layout: Layout, source: str) -> Layout:
    return dataclasses.replace(layout, source=source)


def with_features(layout: Layout, features: Features) -> Layout:
    return dataclasses.replace(layout, features=features)


def _count(path: str) -> int:
    match = FILE_NAME.match(path.rsplit("/", 1)[-1])
    if match:
        return int(match.group(3))
    # Not named like the competition's files: count the records once (a full read).
    return int(tf.data.TFRecordDataset(path).reduce(0, lambda n, _: n + 1))


def available_sizes(path: str) -> dict[int, str]:
    """{image size: folder} for the tfrecords-jpeg-SxS folders at `path` (or `path` itself)."""
    path = path.rstrip("/")
    if not path:
        raise UserError("no data path given; pass --data with a folder holding "
                        "tfrecords-jpeg-SxS/{train,val,test}/")
    if not tf.io.gfile.isdir(path):
        what = "does not exist" if not tf.io.gfile.exists(path) else "is not a folder" \
            if is_remote(path) else f"is {file_kind(path)}, not a folder"
        raise UserError(f"data path {path!r} {what}; pass --data with a folder holding "
                        f"tfrecords-jpeg-SxS/{{train,val,test}}/")
    sizes = size_folders(path, tf.io.gfile.listdir)
    if not sizes:
        raise UserError(f"no tfrecords-jpeg-SxS folder in {path!r}; expected the competition "
                        f"layout {path}/tfrecords-jpeg-192x192/{{train,val,test}}/*.tfrec")
    return sizes


def choose_size(sizes, requested: int, preferred: int) -> int:
    """The requested size, else the available size nearest the model's preferred one."""
    if requested:
        if requested not in sizes:
            found = ", ".join(map(str, sorted(sizes)))
            raise UserError(f"image size {requested} is not present in the data (found {found});"
                            f" pass --image-size {min(sizes, key=lambda s: abs(s - requested))}")
        return requested
    return min(sizes, key=lambda s: (abs(s - preferred), -s))


def open_layout(path: str, image_size: int = 0, preferred_size: int = 224) -> Layout:
    sizes = available_sizes(path)
    size = choose_size(sizes, image_size, preferred_size)
    size_dir = sizes[size]
    root = size_dir.rsplit("/", 1)[0]
    classes_path = f"{root}/{CLASSES_FILE}"
    if not is_remote(classes_path) and os.path.exists(classes_path):
        class_names = read_classes_file(classes_path)  # refused unless a regular file
    elif is_remote(classes_path) and tf.io.gfile.exists(classes_path):
        with tf.io.gfile.GFile(classes_path, "rb") as f:
            class_names = read_classes_file(classes_path, f.read(MAX_TEXT + 1))
    else:
        class_names = COMPETITION_CLASSES
    # Checked here, before a run folder is made for it (a run records its classes).
    return Layout(root=root, image_size=size, class_names=check_names(class_names, classes_path),
                  available_sizes=tuple(sorted(sizes)))
