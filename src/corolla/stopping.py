"""A stop asked for by a signal (SIGTERM, SIGHUP) or by Ctrl-C, as state the long loops read.

The CLI's handler raises KeyboardInterrupt, but Python drops an exception raised where it cannot
propagate (inside a weakref callback or a __del__: "Exception ignored in ..."), and a library
may turn it into an error of its own. So the handler also records the signal here, the long
loops (batches, images, files) call `check_stop`, and a lost stop is raised again at the next
one. `Interrupted` carries the run a stop cut short, so that the CLI can say how to continue it.
"""

_stop: list[int] = []


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during training: the CLI says how to continue the run."""

    def __init__(self, run_dir=None):
        super().__init__(run_dir)
        self.run_dir = run_dir


def request_stop(signum: int) -> None:
    _stop.append(signum)


def stop_signal() -> int | None:
    """The first signal that asked this process to stop, or None."""
    return _stop[0] if _stop else None


def check_stop() -> None:
    """Raises KeyboardInterrupt when a stop was asked for: called by the long loops."""
    if _stop:
        raise KeyboardInterrupt


def clear_stop() -> None:
    _stop.clear()
