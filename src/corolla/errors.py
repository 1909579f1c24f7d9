"""The one exception type that means "the user asked for something that cannot work".

The CLI prints its message on one line and exits with status 2; anything else is a bug and keeps
its traceback. Messages say what was received and what to do about it.
"""


class UserError(Exception):
    """A mistake in the input (flags, config, data, environment), not a bug in Corolla."""
