"""The competition layout's folder names, read without TensorFlow: `corolla train` tells a
layout from an image folder (`prepare.sources.kind_of`) before it imports TensorFlow, and
`layout` finds the same folders on a bucket."""

from __future__ import annotations

import re

# The competition layout's size folders, tfrecords-jpeg-SxS (`size_folders`).
SIZE_DIR = re.compile(r"^tfrecords-jpeg-(\d+)x(\d+)$")


def size_folders(path: str, list_names) -> dict[int, str]:
    """{image size: folder} of the competition layout at `path`: `path` itself when it is a
    tfrecords-jpeg-SxS folder, else the entries `list_names(path)` names that are (the same S
    twice). Names only: `prepare.sources.kind_of` lists a local folder with os.listdir, without
    TensorFlow; `layout` lists a bucket with tf.io.gfile."""
    own = SIZE_DIR.match(path.rsplit("/", 1)[-1])
    if own:
        return {int(own.group(1)): path}
    sizes = {}
    for name in list_names(path):
        match = SIZE_DIR.match(name.rstrip("/"))
        if match and match.group(1) == match.group(2):
            sizes[int(match.group(1))] = f"{path}/{name.rstrip('/')}"
    return sizes
