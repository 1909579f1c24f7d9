"""Atomic file writes: a reader (or a resumed run) sees the old file or the new one, never half
of one. Everything a run writes goes through here: the file is written under a temporary name
in the same folder, flushed to disk, then renamed over the target (`os.replace` is atomic
within one file system). Also: folders checked before the work that would write into them, and
the reading of the JSON and CSV records a run keeps, whose damage is one line, and the sizes
an .npz archive declares, checked before any array is inflated; and whether a
path is remote (gs://...) or this machine's, made absolute."""

from __future__ import annotations

import contextlib
import csv
import errno
import itertools
import json
import math
import os
import shutil
import stat
import sys
import uuid
import zipfile
from pathlib import Path

import numpy as np

from corolla.errors import UserError


# What the system says when a file or folder cannot be written or made (a full disk, a quota, a
# file-size limit (`ulimit -f`; Python ignores SIGXFSZ, so the write fails with EFBIG), a folder
# made read-only, a path through a file), as opposed to a bug: the old file stays as it was, and
# the user is told in one line.
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG,
              errno.ENOTDIR)
# TensorFlow's writers (TFRecord, SavedModel) report the same as their own errors, named by the
# system's message: ENOSPC as ResourceExhaustedError, EFBIG as OutOfRangeError.
_TF_UNWRITABLE = {"ResourceExhaustedError": os.strerror(errno.ENOSPC),
                  "OutOfRangeError": os.strerror(errno.EFBIG)}
# ... and where a folder is made with its parents: ENOENT too, where a parent cannot be made
# (HOME=/proc/self/nonexistent; --runs-dir /proc/sys/runs).
UNMAKEABLE = (*UNWRITABLE, errno.ENOENT)


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yields a temporary path beside `path` with the same suffix (writers such as Keras check
    it); on success the file is synced and renamed to `path`, on failure it is removed."""
    path = Path(path)
    base, dot, suffixes = path.name.partition(".")
    tmp = path.with_name(f".{base}.{uuid.uuid4().hex[:8]}.partial{dot}{suffixes}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except OSError as e:
        if e.errno not in UNWRITABLE:  # a bug keeps its traceback
            raise
        _close_hdf5(tmp.parent)
        raise UserError(_cannot_write(path, e.errno)) from None
    finally:
        # Never in place of the error on its way out: on a read-only or full disk the
        # temporary file may not be removable (or may not exist).
        with contextlib.suppress(OSError):
            tmp.unlink()


def unwritable(error: BaseException) -> str | None:
    """Why `error` is a disk that refused a write (the system's words), or None when it is
    something else (a bug keeps its traceback)."""
    if isinstance(error, OSError) and error.errno in UNWRITABLE:
        return error.strerror or os.strerror(error.errno)
    words = _TF_UNWRITABLE.get(type(error).__name__)
    if words is not None and type(error).__module__.startswith("tensorflow") and \
            words in str(error):
        return words
    return None


def _cannot_write(path: Path, code: int) -> str:
    # (HDF5's own message runs over lines: the system's is the one that helps.)
    return (f"could not write {path} ({os.strerror(code)}); free space or fix the folder's "
            f"permissions, then run the command again")


def check_space(path: str | Path, size: int) -> None:
    """Fails in one line, before anything is written, where the file system that would hold
    `path` has less than `size` bytes free. For HDF5's writes: on a disk with room to create
    the file and little more, HDF5 fails inside the closing of its own objects (printing
    "Exception ignored" tracebacks) and leaves them broken, and closing the file then crashes
    the process. (A disk that another process fills meanwhile still can; a large write that
    fails, the commoner case, `atomic_path` handles.)"""
    path = Path(path)
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:  # the write will tell
        return
    if free < size:
        raise UserError(_cannot_write(path, errno.ENOSPC))


def _close_hdf5(folder: Path) -> None:
    """Closes the HDF5 files that a failed write left open for writing in `folder`: Keras'
    save_weights does not close its file when a write fails. HDF5 cannot close a file whose
    last flush fails (the disk is still full): it keeps it open, h5py's finaliser tries again
    at exit (an "Exception ignored" traceback), and HDF5's own clean-up at exit then crashes
    the process (exit 139). The file is being discarded, so its last writes go to an
    anonymous file in memory instead (elsewhere than Linux, the space it took is freed for
    them), and the close succeeds."""
    h5py = sys.modules.get("h5py")
    if h5py is None:  # nothing has written HDF5
        return
    folder = os.path.abspath(folder)
    for fid in h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE):
        with contextlib.suppress(Exception):
            if os.path.dirname(os.path.abspath(os.fsdecode(fid.name))) != folder or \
                    not fid.get_intent() & h5py.h5f.ACC_RDWR:
                continue
            if fid.get_access_plist().get_driver() == h5py.h5fd.SEC2:
                _discard_writes(fid.get_vfd_handle())
            h5py.File(fid).close()


def _discard_writes(fd: int) -> None:
    if not hasattr(os, "memfd_create"):
        os.ftruncate(fd, 0)
        return
    spare = os.memfd_create("corolla-discarded")
    try:
        os.dup2(spare, fd)
    finally:
        os.close(spare)


def remove_partials(folder: str | Path) -> list[str]:
    """Removes the temporary files of writes that a killed process never finished; call it
    only as the folder's one writer. Returns their names."""
    found = sorted(Path(folder).glob(".*.partial*"))
    for path in found:
        path.unlink(missing_ok=True)
    return [p.name for p in found]


PARTIAL_FOLDER = ".partial-"  # .OUT.partial-XXXXXXXX: a folder being written (or killed)
WRITER = ".writer"  # inside it, locked (flock) by the process writing it


def remove_stale_folders(folder: str | Path, what: str, log=print) -> list[Path]:
    """Removes the temporary folders (.OUT.partial-XXXXXXXX) in `folder` of writers that were
    killed (each may be as large as what it was writing): those whose writer's lock is free.
    A live writer's stays; so does one without a lock file (not made this way, or just being
    made). `what`: the writer, for the log ("a conversion")."""
    removed = []
    for tmp in sorted(Path(folder).glob(f".*{PARTIAL_FOLDER}*")):
        lock = tmp / WRITER
        if tmp.is_symlink() or not lock.is_file() or not lock_is_free(lock):
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp)
        log(f"removed {tmp}, left by {what} that was stopped")
    return removed


def hold_lock(path: str | Path, wait: bool = False) -> int:
    """An open file (made if missing) locked (flock) by this process until it is closed (closing
    releases it). Without `wait`, BlockingIOError when another process holds it; with `wait`,
    this waits for it. The kernel drops the lock with its process, however that ends, so a
    killed writer leaves a lock anyone can take (`lock_is_free`)."""
    import fcntl  # POSIX only: importing corolla.files must work where it is missing

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock_is_free(path: str | Path) -> bool:
    """Whether no live process holds the lock file `path` (which must exist)."""
    try:
        os.close(hold_lock(path))  # closing releases it again
    except BlockingIOError:
        return False
    return True


def read_json(path: str | Path, fix: str):
    """A JSON file Corolla wrote; one that was damaged since (cut short, edited) is one line
    naming it and `fix`, what to do about it."""
    try:
        return json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is damaged ({e}); {fix}") from None


def read_history(path: str | Path, most: int | None = None) -> list[dict]:
    """history.csv's rows (one per epoch) with every value a number; a damaged file is one line
    naming it, and so is one of more than `most` rows (read no further: a run trains at most
    so many epochs, and a tampered file of millions would cost minutes and a page of
    hundreds of megabytes)."""
    fix = ("it is rewritten from the backup when a run resumes: move it away to go on without "
           "the training curves")
    try:
        with Path(path).open(newline="") as f:
            rows = list(itertools.islice(csv.DictReader(f), None if most is None else most + 1))
        if most is not None and len(rows) > most:
            raise UserError(f"{path} holds more than {most} epochs, more than a run trains; "
                            f"{fix}")
        # An empty cell (a column an epoch did not log) reads as NaN: a gap in a curve.
        return [{k: (int(v) if k == "epoch" else float(v or "nan")) for k, v in row.items()}
                for row in rows]
    except (ValueError, TypeError, UnicodeDecodeError, csv.Error) as e:
        raise UserError(f"{path} is damaged ({e}); {fix}") from None


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)




def check_folder(folder: str | Path, flag: str = "") -> Path:
    """Fails before the work, not after it: a missing folder, or one this user may not write
    into, is found before a model is loaded. `flag` names the option that chose the folder."""
    folder = Path(folder)
    other = f" or pass {flag} with another one" if flag else ""
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise UserError(f"folder {folder} {what}; create it first{other}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write into {folder} (permission denied); make it writable"
                        f"{other}")
    return folder


def make_folder(folder: str | Path, own: bool = False) -> Path:
    """The folder, made if missing (not its parents: a mistyped path is not built), with a
    refusal of the system as one line. `own`: a folder Corolla names inside a run (its
    predictions/), which a link must not send elsewhere: a link there is refused."""
    folder = Path(folder)
    if own and folder.is_symlink():
        raise UserError(f"{folder} is a link (to {os.readlink(folder)}); Corolla writes a run's "
                        f"files only inside the run: remove the link and run the command again")
    try:
        folder.mkdir(exist_ok=True)
    except FileNotFoundError:
        raise UserError(f"cannot make {folder}: {folder.parent} does not exist") from None
    except OSError as e:
        if e.errno not in UNWRITABLE:
            raise
        raise UserError(f"cannot make {folder} ({e.strerror}); make {folder.parent} writable "
                        f"or write elsewhere") from None
    return folder


def regular_file_inside(folder: str | Path, name) -> Path | None:
    """folder/name where `name` is one plain file name (not absolute, no separator, not `..`)
    and names a regular file there, not a link or a special file; None otherwise. For the
    names a run's own files hold (state.json's weights), and for the files of a run that are
    read into what Corolla writes: a tampered run folder must not lead Corolla to read,
    overwrite or delete a file outside it."""
    if not isinstance(name, str) or name in ("", ".", "..") or \
            any(c in name for c in ("/", os.sep, os.altsep or "/", "\0")):
        return None
    path = Path(folder) / name
    try:
        return path if stat.S_ISREG(path.lstat().st_mode) else None
    except OSError:
        return None


def write_json(data: dict, path: str | Path) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def is_remote(path: str | Path) -> bool:
    """Whether `path` names a place on a remote store (gs://..., or a handle such as hf://)
    rather than this machine's disk: such a path is used as given, never resolved."""
    return "://" in str(path)


def absolute(path: str) -> str:
    """A local path made absolute, so that a run's record still finds it from another working
    folder; a remote one as it is."""
    return path if is_remote(path) else os.path.abspath(path)


# Files from outside (a config, a recipe, a data set's classes.txt, a model, a run's pictures)
# are read only when they are regular files, and only up to a size fit for their kind: a device
# (/dev/zero) never ends and a FIFO blocks its reader forever, and a file of gigabytes where a
# few kilobytes belong would be held in memory whole. The limits, one place for all kinds:
MB = 2**20
MAX_TEXT = 4 * MB  # a config or recipe TOML, a classes.txt (a thousand classes take ~30 kB)
MAX_PICTURE = 32 * MB  # a PNG a report embeds
MAX_MODEL = 8 * 2**30  # a .keras archive (opened by Keras, not read whole), and its contents
MAX_MODEL_JSON = 64 * MB  # the config.json / metadata.json inside one
# A zip member (of a .keras archive, of an .npz) may inflate to this many times its stored size
# (Keras and numpy store members uncompressed; numbers compress little) before it counts as a
# decompression bomb.
MAX_INFLATION = 100


def _kind(mode: int) -> str:
    return ("a regular file" if stat.S_ISREG(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a file")


def file_kind(path: str | Path) -> str:
    """What is at `path` (not a folder): "a regular file", "a FIFO", "a device"..."""
    return _kind(os.stat(path).st_mode)


def check_regular(path: str | Path, what: str, limit: int | None = None) -> int:
    """The size of `path` (followed as given, links included), a regular file of at most
    `limit` bytes; else a one-line UserError naming `what`. Checked before opening: opening a
    FIFO for reading blocks. A missing file raises FileNotFoundError, for the caller to name."""
    info = os.stat(path)
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{what} {str(path)!r} is a folder; pass a file")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{what} {str(path)!r} is not a regular file ({_kind(info.st_mode)}); "
                        f"pass a file")
    if limit is not None and info.st_size > limit:
        raise UserError(f"{what} {str(path)!r} is {size_text(info.st_size)}, more than the "
                        f"{size_text(limit)} a {what} can be; pass the right file")
    return info.st_size


def read_bounded(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of the regular file `path`, of at most `limit` bytes (`check_regular`); one
    that grows past it while read (or a /proc file, which reports no size) is refused too."""
    check_regular(path, what, limit)
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{what} {str(path)!r} is more than the {size_text(limit)} a {what} can "
                        f"be; pass the right file")
    return data


def check_archive(path: str | Path, what: str) -> None:
    """A .keras archive whose members' declared sizes are in bounds, found in its directory
    before anything is inflated: its JSON at most MAX_MODEL_JSON each, no member inflating more
    than MAX_INFLATION times (beyond MAX_MODEL_JSON), all of it at most MAX_MODEL."""
    check_regular(path, what, MAX_MODEL)
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise UserError(f"{what} {str(path)!r} is damaged (not a whole .keras archive: {e}); "
                        f"pass a model Corolla saved") from None
    for m in members:
        json_too_big = m.filename.endswith(".json") and m.file_size > MAX_MODEL_JSON
        if json_too_big or inflates_too_far(m):
            raise UserError(f"{what} {str(path)!r} holds {m.filename!r} of "
                            f"{size_text(m.file_size)} inflated ({size_text(m.compress_size)} "
                            f"stored): not a model Corolla saved; pass the right file")
    if sum(m.file_size for m in members) > MAX_MODEL:
        raise UserError(f"{what} {str(path)!r} inflates to more than {size_text(MAX_MODEL)}; pass "
                        f"the right file")


def inflates_too_far(member: zipfile.ZipInfo) -> bool:
    """Whether a zip member declares more than MAX_INFLATION times its stored size (beyond
    MAX_MODEL_JSON): a decompression bomb, found in the archive's directory."""
    return member.file_size > max(MAX_MODEL_JSON, MAX_INFLATION * member.compress_size)


def size_text(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / MB:.1f} MB" if n >= MB else \
        f"{n / 1024:.0f} kB" if n >= 1024 else f"{n} bytes"


def check_declared(path: Path, again: str) -> None:
    """Each array's size as its .npy header declares it, read from the zip's directory and the
    headers before any array is inflated: an array declaring more than its member holds, or a
    member that inflates past `inflates_too_far`, is refused (numpy would allocate the
    declared array first). Also refuses a file that is no zip (a bare .npy, read whole)."""
    headers = {(1, 0): np.lib.format.read_array_header_1_0,
               (2, 0): np.lib.format.read_array_header_2_0}
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            name = member.filename.removesuffix(".npy")
            if name == member.filename:
                continue
            if inflates_too_far(member):
                raise UserError(f"{path} holds an array {name!r} that inflates from "
                                f"{size_text(member.compress_size)} to "
                                f"{size_text(member.file_size)}; {again}")
            with archive.open(member) as f:
                version = np.lib.format.read_magic(f)
                if version not in headers:
                    raise ValueError(f"{member.filename}: .npy format {version}")
                shape, _, dtype = headers[version](f)
            if math.prod(shape) * dtype.itemsize > member.file_size:
                raise UserError(f"{path} declares an array {name!r} of shape {shape} "
                                f"({size_text(math.prod(shape) * dtype.itemsize)}) in "
                                f"{size_text(member.file_size)}; {again}")


# What Pillow reads (and keras' image_dataset_from_directory lists, plus WebP and TIFF).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def is_image_file(path: Path) -> bool:
    """Whether `path` names an image by its suffix (a hidden file, ._x.jpg, is none)."""
    return path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".")
