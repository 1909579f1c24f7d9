"""What the writers do when the system refuses a file or a picture fails half way: one line
naming the file, the old file kept whole, no temporary file left."""

import errno
import os

import pytest

from corolla import files
from corolla.report import plots, submission
from corolla.errors import UserError


def test_a_refused_write_is_one_line(tmp_path, monkeypatch):
    """What the writers do when the system refuses the file (a read-only disk stops root too):
    one line naming the file, and neither the file nor a temporary one left."""
    import numpy as np

    def read_only(src, dst):
        raise OSError(errno.EROFS, "Read-only file system", str(src), str(dst))

    monkeypatch.setattr(os, "replace", read_only)
    for name, write in (
            ("s.csv", lambda path: submission.write(["a"], [1], path)),
            ("m.json", lambda path: files.write_json({"a": 1}, path)),
            ("cm.png", lambda path: plots.plot_confusion_matrix(np.eye(2), ["a", "b"], path))):
        with pytest.raises(UserError) as refused:
            write(tmp_path / name)
        assert str(refused.value).startswith(
            f"could not write {tmp_path / name} (Read-only file system); "), str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_a_picture_that_fails_half_way_leaves_the_old_one(tmp_path, monkeypatch):
    import matplotlib.figure
    import matplotlib.pyplot as plt
    import numpy as np

    path = plots.plot_confusion_matrix(np.eye(2), ["a", "b"], tmp_path / "cm.png")
    old = path.read_bytes()
    assert old.startswith(b"\x89PNG")

    def half_then_fail(self, fname, **kwargs):
        assert kwargs["format"] == "png"
        with open(fname, "wb") as f:
            f.write(b"\x89PNG half a picture")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", half_then_fail)
    with pytest.raises(UserError, match=r"could not write .*cm\.png \(No space left on device\)"):
        plots.plot_confusion_matrix(np.zeros((2, 2)), ["a", "b"], path)
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["cm.png"]  # no temporary file left
    assert plt.get_fignums() == []  # and no figure left open


def test_a_file_size_limit_is_an_unwritable_disk(tmp_path):
    """`ulimit -f`: Python ignores SIGXFSZ, so a write past the limit fails with EFBIG. That is
    a disk that refuses the file, one line, as a full one is (not a traceback)."""
    path = tmp_path / "m.json"
    path.write_text("old")

    with pytest.raises(UserError, match=r"^could not write .*m\.json \(File too large\); free "):
        with files.atomic_path(path) as tmp, tmp.open("w") as f:
            f.write("half")
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))  # as write(2) past the limit
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_tensorflow_writers_out_of_room_or_past_the_size_limit_are_unwritable():
    """TensorFlow's TFRecord and SavedModel writers name ENOSPC and EFBIG by their own errors;
    the same errors for other reasons (the end of a data set) are not a disk's."""
    import tensorflow as tf

    assert files.unwritable(tf.errors.OutOfRangeError(None, None, "/o/a.tfrec; File too large")) \
        == "File too large"
    assert files.unwritable(tf.errors.ResourceExhaustedError(
        None, None, "/o/a.tfrec; No space left on device")) == "No space left on device"
    assert files.unwritable(tf.errors.OutOfRangeError(None, None, "End of sequence")) is None
    assert files.unwritable(OSError(errno.EFBIG, "File too large")) == "File too large"
    assert files.unwritable(OSError(errno.ENOENT, "No such file")) is None
