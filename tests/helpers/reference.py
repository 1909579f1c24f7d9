"""docs/gen_reference.py, the reference pages' generator, loaded as a module: it is an MkDocs
hook, not part of the package, and tests read what it reads (the parsers, the settings, the
package maps) through it, so that a format is parsed in one place."""

import importlib.util
from functools import cache

from helpers.processes import REPO


@cache
def gen_reference():
    path = REPO / "docs" / "gen_reference.py"
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
