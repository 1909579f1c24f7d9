"""Which imports of `src/corolla` run inside a function, and why they must, read from the
source (nothing is imported). tests/test_imports_at_top.py holds the rule:

An import sits at its module's top unless one of these holds:
- backend: it brings Keras into a module whose own import does not load it (`keras`,
  `keras_hub`, or a Corolla module that imports them at its top): Keras binds its backend when
  first imported, and `runtime.detect` chooses the backend first;
- optional: its package may be absent (not among pyproject's dependencies, nor TensorFlow,
  which every install has but whose distribution the extras name), or is one platform's own;
- start: its module is loaded by the CLI's parser or by `corolla.api` (`STARTS` and what they
  import at their top), and it adds a heavy library to that module: the parser and the first
  checks answer in a second, before TensorFlow's start-up lines are quieted.

A module's load is what importing it loads: the third-party packages of its top-level imports
(those in `try` and `if` blocks too, not `if TYPE_CHECKING`), its own imports followed, parent
packages included.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from helpers.imports import SRC, _target, imported_names, modules

STARTS = ("corolla.cli", "corolla.api")
LIGHT = {"numpy", "PIL", "imagehash", "tomli_w"}  # 0.2-0.25 s each, needed nearly everywhere
KERAS = {"keras", "keras_hub"}
EVERY_INSTALL = {"tensorflow"}  # a dependency named by the extras (see pyproject's comment)
PLATFORM = {"fcntl", "msvcrt", "winreg"}
# A distribution's name -> the package it installs, where they differ.
INSTALLS = {"scikit-learn": "sklearn", "pillow": "PIL", "tomli-w": "tomli_w"}
STANDARD = set(sys.stdlib_module_names) | {"__future__"}


@dataclass(frozen=True)
class Import:
    module: str
    line: int
    text: str
    own: frozenset[str]      # Corolla modules it runs (parent packages included)
    packages: frozenset[str]  # the top-level packages it names but the standard library's
                              # (one platform's own modules counted)


def required(pyproject: Path = SRC.parent / "pyproject.toml") -> set[str]:
    """The packages every install has: pyproject's dependencies, by the name they import as."""
    names = set(EVERY_INSTALL)
    for spec in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        name = spec.split(";")[0].split("[")[0]
        for mark in "<>=!~ ":
            name = name.split(mark)[0]
        names.add(INSTALLS.get(name.lower(), name.lower().replace("-", "_")))
    return names


def _with_parents(module: str) -> set[str]:
    """`module` and its parent packages: what importing it runs."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def _read(module: str, is_package: bool, node, known) -> tuple[set[str], set[str]]:
    own, packages = set(), set()
    for name in imported_names(module, is_package, node):
        if name.split(".")[0] == "corolla":
            target = _target(name, known)
            own |= (_with_parents(target) if target else set()) - {module}
        elif name.split(".")[0] not in STANDARD - PLATFORM:
            packages.add(name.split(".")[0])
    return own, packages


def _top_nodes(body, typing_only: list) -> list:
    """The import statements that run when a module is imported; those under
    `if TYPE_CHECKING` (which never run) go to `typing_only`."""
    found = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only += [n for n in ast.walk(node)
                            if isinstance(n, (ast.Import, ast.ImportFrom))]
        elif isinstance(node, ast.If):
            found += _top_nodes(node.body, typing_only) + _top_nodes(node.orelse, typing_only)
        elif isinstance(node, ast.Try):
            found += _top_nodes(node.body + node.orelse + node.finalbody, typing_only)
            for handler in node.handlers:
                found += _top_nodes(handler.body, typing_only)
        elif isinstance(node, ast.With):
            found += _top_nodes(node.body, typing_only)
    return found


class Package:
    """The package's modules, each with what its import runs and its imports inside functions."""

    def __init__(self, src: Path = SRC):
        self.known = modules(src)
        self.tops, self.late = {}, []
        for name, path in self.known.items():
            package = path.name == "__init__.py"
            tree = ast.parse(path.read_text(), str(path))
            own, packages = _with_parents(name) - {name}, set()
            typing_only = []
            top = _top_nodes(tree.body, typing_only)
            for node in top:
                o, p = _read(name, package, node, self.known)
                own, packages = own | o, packages | p
            self.tops[name] = (own, packages)
            inside = {id(n) for n in top + typing_only}
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in inside:
                    o, p = _read(name, package, node, self.known)
                    self.late.append(Import(name, node.lineno, ast.unparse(node),
                                            frozenset(o), frozenset(p)))
        self._loads = {}

    def runs(self, module: str) -> set[str]:
        """The Corolla modules importing `module` runs, itself included."""
        found, todo = {module}, [module]
        while todo:
            for other in self.tops[todo.pop()][0]:
                if other not in found:
                    found.add(other)
                    todo.append(other)
        return found

    def loads(self, module: str) -> set[str]:
        """The third-party packages importing `module` loads."""
        if module not in self._loads:
            self._loads[module] = set().union(*(self.tops[m][1] for m in self.runs(module)))
        return self._loads[module]

    def started(self) -> set[str]:
        """The modules the CLI's parser and `corolla.api` load."""
        return set().union(*(self.runs(start) for start in STARTS))

    def reason(self, late: Import, started: set[str], every_install: set[str]) -> str | None:
        """Why `late` must stay inside its function (see the module's docstring), or None."""
        brings = set(late.packages).union(*(self.loads(m) for m in late.own))
        has = self.loads(late.module)
        if brings & KERAS - has:
            return "backend"
        if late.packages - every_install:
            return "optional"
        if late.module in started and brings - LIGHT - has:
            return "start"
        return None

    def needless(self, every_install: set[str] | None = None) -> list[Import]:
        """The imports inside functions that could sit at their module's top."""
        every_install = required() if every_install is None else every_install
        started = self.started()
        return [late for late in self.late if self.reason(late, started, every_install) is None]


if __name__ == "__main__":
    package = Package()
    started, every_install = package.started(), required()
    counts = {}
    for late in package.late:
        why = package.reason(late, started, every_install) or "needless"
        counts[why] = counts.get(why, 0) + 1
        if why == "needless":
            print(f"  {late.module}:{late.line}: {late.text}")
    print(f"imports inside functions: {len(package.late)}, by reason: {counts}")
