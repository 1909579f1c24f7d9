"""Library errors as the one line a user can act on, for the CLI and the Python API alike.

A `UserError` is already one. Bad records surface inside tf.data as TensorFlow errors: ours are
assertions whose data (strings, joined here) start with the marker ("assertion failed:
[corolla data error: ] [WHAT] [...]"); TensorFlow's own (a JPEG that does not decode, a damaged
file) name no file, so the data is searched (`data.check.explain`). Anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import contextlib
import re
import sys

from corolla.errors import DATA_ERROR, NO_TENSORFLOW, UserError


def one_line(error: BaseException, note=None) -> str | None:
    """The message for `error`, or None when it is a bug. `note` receives lines that explain
    more (a search of the data may find which file is damaged)."""
    if isinstance(error, UserError):
        return str(error)
    if isinstance(error, ModuleNotFoundError) and error.name == "tensorflow":
        return NO_TENSORFLOW
    message = str(error)
    if DATA_ERROR in message:
        line = message[message.index(DATA_ERROR):].splitlines()[0]
        what = "".join(re.findall(r"\[([^\]]*)\]", f"[{line}"))[len(DATA_ERROR) + 1:]
        return what.strip()
    if type(error).__module__.startswith("tensorflow"):
        from corolla.data import check

        return check.explain(error, note=note)
    return None


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


@contextlib.contextmanager
def as_user_errors(note=_to_stderr):
    """Inside the block, a library error that `one_line` explains is raised as a UserError
    with that line (a bug, or Ctrl-C, passes through as it is)."""
    try:
        yield
    except UserError:
        raise
    except Exception as e:
        what = one_line(e, note)
        if what is None:
            raise
        raise UserError(what) from None
