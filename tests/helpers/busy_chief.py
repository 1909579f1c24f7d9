"""Runs the `corolla` command with the chief's training epochs each SECONDS longer than its
time probe measured from the third on (its host busier once the plan was made again, after the
first or the second): a time plan falls behind.

    python busy_chief.py SECONDS corolla-args...
"""

import sys
import time

import corolla.training
import corolla.training.fit

seconds = float(sys.argv[1])
_run = corolla.training.fit.run


def run(config, plan, *args, callbacks=(), **kwargs):
    import keras  # after the command has chosen the backend

    class Busier(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch >= 2:
                time.sleep(seconds)

    busier = [Busier()] if plan.is_chief else []
    return _run(config, plan, *args, callbacks=[*callbacks, *busier], **kwargs)


corolla.training.run = corolla.training.fit.run = run

from corolla.cli import main  # noqa: E402

sys.exit(main(sys.argv[2:]))
