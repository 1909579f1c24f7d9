"""Signal handlers installed for a block and put back after it, in one place: the CLI's stop on
SIGTERM and SIGHUP (`cli._stop_on_signals`) and a block a stop must not cut in two (`held`).
Python runs handlers in the main thread only and allows installing them there only: elsewhere
nothing is installed (nor can SIGKILL ever be handled).
"""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def handled(names, handler, keep=lambda name, current: False, unblock: bool = False):
    """`handler` for each of the signals `names` (SIGTERM, ...) this platform has, except those
    whose current handler `keep(name, current)` leaves in place. `unblock`: those handled are
    also unblocked for the block, as a parent process may have blocked them. Yields
    {signal number: the handler it had}; after the block the handlers, then the mask, are put
    back."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for name in names:
            signum = getattr(signal, name, None)
            if signum is not None and not keep(name, signal.getsignal(signum)):
                previous[signum] = signal.signal(signum, handler)
    unblock = unblock and previous and hasattr(signal, "pthread_sigmask")  # POSIX
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, previous) if unblock else None
    try:
        yield previous
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@contextlib.contextmanager
def held():
    """A stop asked for by Ctrl-C, SIGTERM or SIGHUP (a KeyboardInterrupt wherever the main
    thread is) held until the block is done, then delivered to the handler that was there. A
    signal ignored, or handled outside Python (getsignal's None), is left as it is."""
    got = []
    try:
        with handled(("SIGINT", "SIGTERM", "SIGHUP"), lambda signum, frame: got.append(signum),
                     keep=lambda name, current: current in (None, signal.SIG_IGN)):
            yield
    finally:
        if got:
            signal.raise_signal(got[0])
