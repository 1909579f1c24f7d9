"""A run's backup/state.json as someone else may have written it: the files it names (the
epoch to continue from, the best epoch's weights) are loaded and later deleted by a resumed
run, so each must be a regular file of the backup folder itself; a path elsewhere, a link, or
fields of the wrong type or range are one line naming state.json and the way out, before
anything is loaded or removed."""

from __future__ import annotations

import io
import json
import os
import re
import zipfile

import numpy as np
import pytest

from corolla.errors import UserError
from corolla.files import regular_file_inside
from corolla.runs import paths
from corolla.training import backup

GOOD = {"epochs_done": 2, "weights": "epoch-0001.npz",
        "history": [{"epoch": 1, "loss": 1.5, "val_f1_macro": float("nan")},
                    {"epoch": 2, "loss": 1.2, "val_f1_macro": 0.5}],
        "best_epoch": 1, "best_f1": 0.5, "best": "best-epoch-0001.npz"}


def _backup(tmp_path, **changes):
    """A run's backup folder holding both files GOOD names, with state.json changed by
    `changes`; beside the run, a file of the user's that no run may touch."""
    folder = tmp_path / "run" / paths.BACKUP
    folder.mkdir(parents=True)
    for name in ("epoch-0001.npz", "best-epoch-0001.npz"):
        (folder / name).write_bytes(b"weights")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's")
    (folder / paths.STATE).write_text(json.dumps({**GOOD, **changes}))
    return folder, victim


def test_a_state_as_the_checkpoint_writes_it_reads_back(tmp_path):
    folder, _ = _backup(tmp_path)
    state = backup.read_state(folder)
    assert (state.epochs_done, state.weights, state.best, state.best_f1) == \
        (2, "epoch-0001.npz", "best-epoch-0001.npz", 0.5)


def test_a_state_whose_best_is_the_linear_head_reads_back(tmp_path):
    head = {"val_f1": 0.6, "c": 0.01}
    folder, _ = _backup(tmp_path, best_epoch=backup.LINEAR_HEAD, best_f1=0.6, linear_head=head)
    state = backup.read_state(folder)
    assert (state.best_epoch, state.linear_head) == (backup.LINEAR_HEAD, head)


@pytest.mark.parametrize("key", ["best", "weights"])
@pytest.mark.parametrize("where", ["absolute", "relative", "link"])
def test_a_state_naming_a_file_outside_its_backup_folder_is_refused(tmp_path, key, where):
    """Resuming deletes the best epoch's file when a new epoch beats best_f1, and loads
    `weights`: with "best_f1": -1 that deleted any file the state named."""
    folder, victim = _backup(tmp_path)
    if where == "link":
        os.symlink(victim, folder / "epoch-0002.npz")
    name = {"absolute": str(victim), "relative": "../../victim.txt",
            "link": "epoch-0002.npz"}[where]
    (folder / paths.STATE).write_text(json.dumps({**GOOD, key: name, "best_f1": 0.0}))
    with pytest.raises(UserError) as e:
        backup.read_state(folder)
    message = str(e.value)
    assert "\n" not in message and str(folder / paths.STATE) in message and name in message
    assert "move the backup folder away" in message
    assert victim.read_text() == "the user's"


def test_a_state_that_is_a_link_is_refused(tmp_path):
    folder, _ = _backup(tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    (folder / paths.STATE).rename(elsewhere)
    os.symlink(elsewhere, folder / paths.STATE)
    with pytest.raises(UserError, match=r"state\.json is not a file of the run's own backup "
                                        r"folder \(a link"):
        backup.read_state(folder)


@pytest.mark.parametrize("with_state", [True, False])
def test_a_backup_folder_that_is_a_link_is_refused(tmp_path, with_state):
    """A resumed run writes its epochs into the backup folder and deletes the older ones."""
    folder, _ = _backup(tmp_path)
    if not with_state:
        (folder / paths.STATE).unlink()
    moved = folder.rename(tmp_path / "elsewhere")
    os.symlink(moved, folder)
    with pytest.raises(UserError, match=re.escape(
            f"{folder} is a link (to {moved}), not the run's own backup folder; move the "
            f"backup folder away")):
        backup.read_state(folder)


@pytest.mark.parametrize("changes, says", [
    ({"epochs_done": "2"}, "epochs_done is '2', not a count of epochs"),
    ({"epochs_done": -7}, "epochs_done is -7, not a count"),
    ({"epochs_done": 99999}, "epochs_done is 99999, not a count of epochs (0 to 10000)"),
    ({"epochs_done": True}, "epochs_done is True"),
    ({"history": [1, 2]}, "history is not a list of epochs"),
    ({"history": "[]"}, "history is not a list of epochs"),
    ({"history": [{"epoch": 1, "loss": "x"}, {}]}, "history is not a list of epochs"),
    ({"history": [{"epoch": 1}] * 3}, "history has 3 epochs, more than the 2 done"),
    ({"best_epoch": 2}, "best_epoch is 2, not one of the 2 epochs done"),
    ({"best_epoch": "1"}, "best_epoch is '1'"),
    ({"best_epoch": -1}, "best_epoch is -1, not one of the 2 epochs done"),  # no linear head
    ({"best_epoch": -2, "linear_head": {"val_f1": 0.4, "c": 0.01}},
     "best_epoch is -2, not one of the 2 epochs done nor the linear head"),
    ({"linear_head": {"val_f1": float("nan"), "c": 0.01}}, "linear_head is {'val_f1': nan"),
    ({"linear_head": [0.4]}, "linear_head is [0.4], not a head's val macro F1 and C"),
    ({"best_f1": float("nan")}, "best_f1 is nan, not a macro F1"),
    ({"best_f1": -1}, "best_f1 is -1, not a macro F1"),
    ({"best": 7}, "best is 7, not a file name"),
    ({"weights": ["epoch-0001.npz"]}, "weights is ['epoch-0001.npz'], not a file name"),
    ({"weights": "epoch-0009.npz"}, "names 'epoch-0009.npz' as its weights, which is missing"),
])
def test_a_state_of_wrong_types_or_ranges_is_one_line(tmp_path, changes, says):
    folder, _ = _backup(tmp_path, **changes)
    with pytest.raises(UserError) as e:
        backup.read_state(folder)
    message = str(e.value)
    assert says in message and "\n" not in message and str(folder / paths.STATE) in message
    assert message.endswith("move the backup folder away to start the run's training over")


def test_a_name_inside_a_folder_is_a_plain_name_of_a_regular_file(tmp_path):
    (tmp_path / "a.npz").write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "a.npz", tmp_path / "link.npz")
    os.mkfifo(tmp_path / "pipe.npz")
    assert regular_file_inside(tmp_path, "a.npz") == tmp_path / "a.npz"
    for name in ("link.npz", "pipe.npz", "sub", "missing.npz", "", ".", "..", "sub/../a.npz",
                 str(tmp_path / "a.npz"), "a.npz\0", None, 3):
        assert regular_file_inside(tmp_path, name) is None, name


@pytest.mark.parametrize("content", ["not a zip", "pickled", "vast"])
def test_a_backup_file_that_is_not_arrays_is_one_line(tmp_path, content):
    path = tmp_path / "epoch-0001.npz"
    if content == "not a zip":
        path.write_bytes(b"PK not really an archive")
    elif content == "pickled":  # loading it would run pickle: refused, not loaded
        np.savez(path, np.array([{"a": 1}], dtype=object))
    else:  # a header declaring 8 GB in a few bytes: refused before numpy allocates it
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": "<f4", "fortran_order": False, "shape": (50_000, 40_000)})
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("arr_0.npy", header.getvalue() + b"\0" * 64)
    with pytest.raises(UserError) as e:
        backup.read_arrays(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).endswith("move the backup folder away to start the run's training over")
