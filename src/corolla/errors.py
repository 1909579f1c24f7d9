"""`UserError`, the exception that means "the user asked for something that cannot work", and
the wording of its one-line messages: the closest choice to a misspelt word, a value from a
file quoted safely, a library's exception as a few words (credentials scrubbed).

The CLI prints its message on one line and exits with status 2; anything else is a bug and keeps
its traceback. Messages say what was received and what to do about it.
"""

import difflib

from corolla.credentials import scrub


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
