"""The one exception type that means "the user asked for something that cannot work".

The CLI prints its message on one line and exits with status 2; anything else is a bug and keeps
its traceback. Messages say what was received and what to do about it.
"""

import difflib
import re


class UserError(Exception):
    """A mistake in the input (flags, config, data, environment), not a bug in Corolla."""


# Starts the message of data errors raised inside tf.data (where only TensorFlow errors can be
# raised), so that the CLI can tell a bad record from a bug.
DATA_ERROR = "corolla data error"


# A missing TensorFlow (see pyproject.toml: no distribution is a hard dependency), wherever it
# is first imported; the runtime says it too when --backend tensorflow is asked for.
NO_TENSORFLOW = ('TensorFlow is not installed, and Corolla reads its data with tf.data on every '
                 'backend; run: pip install "corolla[tensorflow]" (or tensorflow-cpu on a TPU '
                 'host or beside jax[cuda12])')


def closest(word: str, choices) -> str | None:
    """The choice closest to `word` (a misspelt flag, model, recipe or format; case aside), or
    None when none is close."""
    lowered = {str(c).lower(): str(c) for c in choices}
    close = difflib.get_close_matches(str(word).lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def did_you_mean(word: str, choices) -> str:
    """"did you mean X?" (`closest`), or "": every "unknown ..." message asks it here."""
    found = closest(word, choices)
    return f"did you mean {found}?" if found else ""


def shown(value, limit: int = 60) -> str:
    """A value read from a file someone else wrote, as a one-line message quotes it: its repr
    (a newline stays escaped), cut at `limit` (never a whole file of it)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def first_line(error: BaseException, limit: int = 200, typed: bool = False) -> str:
    """A library's exception as a few words for a one-line message: the first line of its
    text (its type's name when it has none), secrets scrubbed, cut at `limit`; `typed`: led by
    its type's name (where the type says what went wrong: ConnectionError, MlflowException)."""
    text = str(error).strip().splitlines()
    line = scrub(text[0]) if text else ""
    if typed or not line:
        line = f"{type(error).__name__}: {line}" if line else type(error).__name__
    return line[:limit]


# What a library's message may quote of an address a user configured: the password of
# scheme://user:password@host, and the values of query parameters that name a credential.
_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&;][\w.-]*(?:token|key|secret|password|passwd|pwd|auth|signature|sig|credential)"
    r"[\w.-]*=)[^&\s#'\"]+")


def scrub(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by ***."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub("***@", text))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during training: the CLI says how to continue the run."""

    def __init__(self, run_dir=None):
        super().__init__(run_dir)
        self.run_dir = run_dir


# A stop asked for by a signal (SIGTERM, SIGHUP). The CLI's handler raises KeyboardInterrupt,
# but Python drops an exception raised where it cannot propagate (inside a weakref callback or
# a __del__: "Exception ignored in ..."), and a library may turn it into an error of its own.
# So the handler also records the signal here, the long loops (batches, images, files) call
# `check_stop`, and a lost stop is raised again at the next one.
_stop: list[int] = []


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
