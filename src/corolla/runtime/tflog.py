"""TensorFlow's C++ start-up lines, kept off the terminal without hiding what matters.

`quiet_logs` sets TF_CPP_MIN_LOG_LEVEL=3, which silences TensorFlow's C++ logging once
it is set up. But while `import tensorflow` loads its shared libraries, each library's own copy
of absl logs before anything has set a level, straight to file descriptor 2 (so Python's logging
never sees the lines either). With TensorFlow 2.21 on a CPU machine every command began with,
twice (the framework library, then the profiler plugin):

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795537248.824541    2252 port.cc:153] oneDNN custom operations are on. ...
    I0000 00:00:1795346533.231385    3537 cudart_stub.cc:31] Could not find cuda drivers on ...

Later lines (cuInit failing when the devices are listed, the CPU-feature notice) obey the
level, so the import is the only moment to cover: `quiet_tensorflow_import` points fd 2
at a pipe while `tensorflow` is first imported, then replays every captured line that is not in
`NOISE`, so an unexpected warning still shows, and replays everything when the import raises.
A user who sets TF_CPP_MIN_LOG_LEVEL=0 gets TensorFlow's lines untouched.

The captured bytes go to a helper process (this file run as a script), not to a temporary
file: when TensorFlow aborts during the import (it does when the CPU lacks instructions it was
built for, after printing why) no code of ours runs again, and the helper, seeing the pipe close
without our end marker, replays everything it got.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import logging
import os
import re
import subprocess
import sys

# What loading TensorFlow prints whatever TF_CPP_MIN_LOG_LEVEL says; no other line is dropped.
# Searched for anywhere in a line: the log prefix differs between TensorFlow versions.
NOISE = tuple(re.compile(p) for p in (
    # absl's banner, once per library that logs before absl is initialised.
    rb"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
    # The CUDA stub of a CUDA-enabled build, on a machine without NVIDIA's driver.
    rb"\] Could not find cuda drivers on your machine, GPU will not be used\.$",
    # CUDA builds registering their plugins twice (TensorFlow 2.14+, tensorflow/tensorflow#62075).
    rb"\] Unable to register cu(DNN|FFT|BLAS) factory: Attempting to register factory for plugin",
    rb"\] computation placer already registered\. Please check linkage",
    # The oneDNN notice: logged under the level since TensorFlow 2.21, once per library that
    # links oneDNN (twice on CPU builds). TF_CPP_MIN_LOG_LEVEL=0 still shows it.
    rb"\] oneDNN custom operations are on\. ",
))

# The end of the captured bytes: whether the wrapped block returned or raised. Without either,
# the process died inside the block.
_RETURNED = b"\0corolla-tflog:returned\0"
_RAISED = b"\0corolla-tflog:raised\0"


# CUDA builds asking NVIDIA's driver when TensorFlow first lists its devices: an E-level line
# at TF_CPP_MIN_LOG_LEVEL=2 (notebooks' setting) that reads like a fault. Dropped only where
# nothing suggests a GPU (`hardware.probe_tensorflow`); where something does, it is kept, and
# Corolla's own line says why the GPU goes unused.
NO_GPU_NOISE = rb"\] failed call to cuInit: "


def drop_noise(data: bytes, extra: tuple[bytes, ...] = ()) -> bytes:
    """`data` without the lines that match `NOISE` (or the `extra` patterns); every other byte
    is kept."""
    patterns = NOISE + tuple(re.compile(p) for p in extra)
    return b"".join(line for line in data.splitlines(keepends=True)
                    if not any(p.search(line.rstrip(b"\r\n")) for p in patterns))


@contextlib.contextmanager
def filtered_stderr(extra: tuple[bytes, ...] = ()):
    """Holds back what is written to fd 2 (by C++ or Python) inside the block, then replays it
    without `NOISE` if the block returned (or was interrupted by Ctrl-C), or all of it if the
    block raised or the process died. `extra`: more patterns to drop (ASCII regexes).

    Works whether fd 2 is a terminal, a pipe or a file. If the helper cannot start, the block
    runs unfiltered.
    """
    sys.stderr.flush()  # what was written before the block goes out first
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 at all: nothing to keep clean
        yield
        return
    try:
        # Its own session: a Ctrl-C during the import must not kill what holds the lines.
        helper = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__),
                                   *(p.decode() for p in extra)],
                                  stdin=subprocess.PIPE, stdout=saved, stderr=saved,
                                  start_new_session=True)
    except (OSError, ValueError):
        os.close(saved)
        yield
        return
    os.dup2(helper.stdin.fileno(), 2)
    marker = _RAISED
    try:
        yield
        marker = _RETURNED
    except KeyboardInterrupt:  # the user stopped it: no failure to explain, so no noise
        marker = _RETURNED
        raise
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            os.write(2, marker)
        os.dup2(saved, 2)
        os.close(saved)
        with contextlib.suppress(OSError):
            helper.stdin.close()
        try:  # the replay must come before anything printed after the block
            helper.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a child of ours holds the pipe: it replays later
            pass


def quiet_tensorflow():
    """What the CLI and the Python API run their commands under: TensorFlow's first import
    filtered (`quiet_tensorflow_import`) and its later C++ logging at level 3 (`quiet_logs`),
    unless the user set TF_CPP_MIN_LOG_LEVEL (0 shows everything; 1 or 2 keep their level for
    later lines, while the start-up noise, printed whatever the level, stays off)."""
    quiet_import = quiet_tensorflow_import()  # before quiet_logs() sets the level
    quiet_logs()
    return quiet_import


def quiet(function):
    """`function` run under `quiet_tensorflow`: for the public entry points outside the
    notebook API that may be the first to import TensorFlow (`runtime.detect`,
    `models.create_model`), so that they are as quiet as `corolla.train()`."""
    @functools.wraps(function)
    def quietly(*args, **kwargs):
        with quiet_tensorflow():
            return function(*args, **kwargs)

    return quietly


def quiet_logs() -> None:
    """Keeps TensorFlow's C++ logging (CUDA probes on CPU machines) off the terminal, unless the
    user asked for it with TF_CPP_MIN_LOG_LEVEL."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def quiet_tensorflow_import():
    """A context manager under which the first `import tensorflow`, wherever it happens, runs
    inside `filtered_stderr`. It does nothing if the user asked for every line
    (TF_CPP_MIN_LOG_LEVEL=0), TensorFlow is already imported, or an outer block filters the
    import already. (Notebooks often set 2, and the start-up lines below ignore it: they are
    still filtered then.)

    The import is wrapped where it happens, rather than done up front, because it must follow
    the Keras backend choice (`runtime.detect` makes it) and because a command that ends early
    (a user error found before detection) should not pay for it.
    """
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() == "0" or "tensorflow" in sys.modules \
            or any(isinstance(f, _QuietFirstImport) for f in sys.meta_path):
        return contextlib.nullcontext()
    return _finder_installed(_QuietFirstImport("tensorflow"))


@contextlib.contextmanager
def _finder_installed(finder):
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)


class _QuietFirstImport(importlib.abc.MetaPathFinder):
    """Finds `name` as the other finders do, with a loader that runs it in `filtered_stderr`."""

    def __init__(self, name: str):
        self.name, self.finding = name, False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self.finding:
            return None
        self.finding = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.finding = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _FilteredLoader(spec.loader)
        return spec


class _FilteredLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps its real loader: importlib.resources and friends ask it.
        module.__loader__ = module.__spec__.loader = self.loader
        with filtered_stderr():
            self.loader.exec_module(module)
        if module.__name__ == "tensorflow":
            python_logs_at_warning(module)


def python_logs_at_warning(tensorflow) -> None:
    """In an interactive shell (Jupyter, where `sys.ps1` is set) TensorFlow's Python logger
    starts at INFO and prints to stdout ("INFO:tensorflow:Assets written to: ..." on every
    export); elsewhere it shows warnings only. Made the same everywhere: warnings only."""
    with contextlib.suppress(Exception):  # an older or stripped TensorFlow: left as it is
        logger = tensorflow.get_logger()  # configures it, as its first use would
        if logger.level == logging.INFO:
            logger.setLevel(logging.WARNING)


def _replay() -> None:
    """The helper: reads the captured bytes until the pipe closes, writes them to its stdout
    (the original stderr) without `NOISE` only if the block returned."""
    data = sys.stdin.buffer.read()
    if data.endswith(_RETURNED):
        data = drop_noise(data[:-len(_RETURNED)], tuple(a.encode() for a in sys.argv[1:]))
    elif data.endswith(_RAISED):
        data = data[:-len(_RAISED)]
    with contextlib.suppress(BrokenPipeError):  # the reader left (`corolla ... | head`)
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    _replay()
