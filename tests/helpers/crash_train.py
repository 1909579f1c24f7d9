"""Runs the `corolla` command with a fault injected: the process dies (os._exit, no clean-up,
as under SIGKILL) right after epoch N's checkpoint was written. Every process also prints the
first epoch it trains, so tests can see where each one resumed.

    python crash_train.py N corolla-args...      (N = -1: no crash, only the epoch lines)
"""

import os
import sys

crash_after = int(sys.argv[1])

import corolla.train  # noqa: E402
import corolla.train.fit  # noqa: E402

_run = corolla.train.fit.run


def run(*args, callbacks=(), **kwargs):
    import keras

    class Fault(keras.callbacks.Callback):
        first = None

        def on_epoch_begin(self, epoch, logs=None):
            if self.first is None:
                self.first = epoch
                print(f"FIRST_EPOCH {epoch}", flush=True)

        def on_epoch_end(self, epoch, logs=None):  # after Corolla's own checkpoint
            if epoch == crash_after:
                print(f"CRASH after epoch {epoch}", flush=True)
                os._exit(3)

    return _run(*args, callbacks=[*callbacks, Fault()], **kwargs)


corolla.train.run = corolla.train.fit.run = run

from corolla.cli import main  # noqa: E402

sys.exit(main(sys.argv[2:]))
