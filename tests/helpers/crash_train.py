"""Runs the `corolla` command with a fault injected: the process dies (os._exit(3): no clean-up,
as under SIGKILL) at a chosen point. Every process also prints the first epoch it trains, so
tests can see where each one resumed. With CRASH_SIGNAL=TERM in the environment the process
is sent SIGTERM at the point instead, and ends as the command ends then.

    python crash_train.py POINT corolla-args...

POINT: none | epoch_end:N (after epoch N's backup) | mid_epoch:N (during epoch N) |
backup:N (epoch N's weights written, not yet renamed into place) | history:N (epoch N's
state.json written, history.csv not yet) | save (model.keras written under its temporary name)
| evaluate (during evaluation) | predict (during prediction) | folder (the run folder made,
its config.toml not yet written) | full:N (the disk fills while epoch N's backup is written:
its writes fail with ENOSPC) | fill:N (a file fills the runs folder's file system, a
small one, to 8 KiB of free space when epoch N's backup begins). At full and fill the process
does not die: the command ends as it does. N counts from 0.
"""

import contextlib
import os
import shutil
import sys

point, _, arg = sys.argv[1].partition(":")
arg = int(arg) if arg else None


def die(where):
    print(f"CRASH {where} (PID {os.getpid()})", flush=True)
    if os.environ.get("CRASH_SIGNAL") == "TERM":  # stopped as `docker stop` stops it
        import signal
        import time

        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler raises inside it
    os._exit(3)


import corolla.evaluation.labelled  # noqa: E402
import corolla.evaluation.unlabelled  # noqa: E402
import corolla.files  # noqa: E402
import corolla.training.backup  # noqa: E402
import corolla.training.checkpoint  # noqa: E402
import corolla.training.fit  # noqa: E402
from corolla.runs import paths  # noqa: E402

_run = corolla.training.fit.run


def run(*args, callbacks=(), **kwargs):
    import keras

    class Fault(keras.callbacks.Callback):
        first = None

        def on_epoch_begin(self, epoch, logs=None):
            if self.first is None:
                self.first = epoch
                print(f"FIRST_EPOCH {epoch}", flush=True)

        def on_train_batch_end(self, batch, logs=None):
            if point == "mid_epoch" and self.current == arg and batch == 1:
                die(f"during epoch {arg}")

        def on_epoch_end(self, epoch, logs=None):  # after Corolla's own checkpoint
            if point == "epoch_end" and epoch == arg:
                _others_first()
                die(f"after epoch {epoch}")

    fault = Fault()
    fault.current = None

    class Epoch(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            fault.current = epoch

    return _run(*args, callbacks=[*callbacks, Epoch(), fault], **kwargs)


def _others_first():
    """Several JAX processes, all at the point: the chief dies last. JAX's coordination
    service, which the chief hosts, aborts the others (SIGABRT) as soon as it is gone: a chief
    that died first would kill a worker still finishing its epoch's end."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        if jax.process_count() > 1:
            import time

            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("crash_train")
            if jax.process_index() == 0:
                time.sleep(2)


def dying_writer(original, name, where):
    """An atomic_path that dies once the file `name` is written, before it is put in place."""
    @contextlib.contextmanager
    def atomic_path(path):
        with original(path) as tmp:
            yield tmp
            if os.path.basename(str(path)) == name:
                die(where)
    return atomic_path


def filling_writer(original, name):
    """An atomic_path under which the disk fills while the file `name` is written: its
    temporary name leads to /dev/full, where every write fails with ENOSPC, as on a full disk."""
    @contextlib.contextmanager
    def atomic_path(path):
        with original(path) as tmp:
            if os.path.basename(str(path)) == name:
                os.symlink("/dev/full", tmp)
                print("DISK FULL", flush=True)
            yield tmp
    return atomic_path


def fill(folder, leave=8192):
    """Leaves `leave` bytes free on the file system holding `folder` (a file `filler` in it
    takes the rest): room for HDF5 to create a file, not to write its first objects. Refused
    on anything but a small file system made for the test."""
    if shutil.disk_usage(folder).total > 64 << 20:
        sys.exit(f"fill: {folder} is not on a small file system made for the test")
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12):
            with contextlib.suppress(OSError):
                while shutil.disk_usage(folder).free >= leave + chunk and f.write(b"\0" * chunk):
                    pass
    print(f"DISK FULL ({shutil.disk_usage(folder).free} bytes free)", flush=True)


corolla.training.run = corolla.training.fit.run = run
if point == "backup":
    corolla.training.backup.atomic_path = dying_writer(
        corolla.training.backup.atomic_path, f"epoch-{arg:04d}.npz", "in the backup")
elif point == "save":
    corolla.files.atomic_path = dying_writer(corolla.files.atomic_path, paths.MODEL,
                                             "in the model save")
elif point == "full":
    corolla.training.backup.atomic_path = filling_writer(
        corolla.training.backup.atomic_path, f"epoch-{arg:04d}.npz")
elif point == "fill":
    _on_epoch_end = corolla.training.checkpoint.Checkpoint.on_epoch_end

    def on_epoch_end(self, epoch, logs=None):
        if epoch == arg:
            fill(self.backup_dir.parent.parent)
        _on_epoch_end(self, epoch, logs)

    corolla.training.checkpoint.Checkpoint.on_epoch_end = on_epoch_end
elif point == "history":
    _write_history = corolla.training.backup.write_history

    def write_history(rows, path):
        if len(rows) == arg + 1:
            die("between the backup and the history")
        _write_history(rows, path)

    corolla.training.backup.write_history = write_history
elif point == "folder":  # the run folder made (and locked), its config.toml not yet written
    import corolla.runs.rundir  # noqa: E402

    def record(*args, **kwargs):
        die("between the run folder and its config")

    corolla.runs.rundir.record = record
elif point in ("evaluate", "predict"):
    module = {"evaluate": corolla.evaluation.labelled,
              "predict": corolla.evaluation.unlabelled}[point]

    def dying(*args, **kwargs):
        die(f"during {point}")

    setattr(module, point, dying)

from corolla.cli import main  # noqa: E402

sys.exit(main(sys.argv[2:]))
