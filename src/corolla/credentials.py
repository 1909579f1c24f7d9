"""Credentials kept out of what Corolla prints and logs: a library's message may quote an
address a user configured (a tracking server's URL with a password or a token in it)."""

import re

# The password of scheme://user:password@host, and the values of query parameters that name a
# credential.
_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&;][\w.-]*(?:token|key|secret|password|passwd|pwd|auth|signature|sig|credential)"
    r"[\w.-]*=)[^&\s#'\"]+")


def scrub(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by ***."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub("***@", text))
