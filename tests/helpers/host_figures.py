"""Measured figures of this project's hosts and data sets in src/corolla's comments and
docstrings, found by a few tell-tale patterns. Such a figure belongs in docs/benchmarks.md
("Figures behind the defaults"), with the command that measures it; the code says the reason.
The test (tests/test_comments.py) uses it; run as a script it prints what it finds:

    python tests/helpers/host_figures.py        # every hit in the scanned folders
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# What is scanned, under src/corolla: folders and modules.
SCANNED = ("api.py", "cli.py", "commands", "config", "credentials.py", "data", "errors.py",
           "evaluation", "files.py", "flows", "models", "report", "runs", "runtime", "scoring",
           "stopping.py", "training")
# Not scanned yet (none left: a module whose comments carry figures being moved goes here).
NOT_YET: tuple[str, ...] = ()

# name -> pattern; each is a sign of a measurement, not of a fact of a format or a library.
PATTERNS = {
    "a host's cores": r"\b\d+-core\b",
    "the project's data set": r"\bflowers5\b",
    "a named card": r"\b(on|an|one) (NVIDIA )?(H100|H200|A100|V100|T4|L4)\b",
    "this host": r"\b(measured|timed|ran|took) on this (host|machine)\b"
                 r"|\bthis (host|machine) (ran|took|trained)\b",
    "a time per unit": r"\b(\d[\d.,]*(-\d[\d.,]*)?|tens of) ?(ms|s|min|minutes|seconds) "
                       r"(an?|per|for) ([\d,]+ |\d+ px )?"
                       r"(epochs?|steps?|images?|compiles?|pass(es)?|runs?)\b",
    "a time on a machine": r"\b\d[\d.,]* ?(ms|s|min) on an?\b",
    "a speed ratio": r"\b\d[\d.]*(x|%) (slower|faster|cheaper)\b",
    "a throughput": r"\b\d[\d,.]* images/s\b",
    "a run's score": r"\bF1 0\.\d+(-0\.\d+)? (after|in|at|with)\b",
    "history": r"\b(a|the) first version\b|\ban earlier version\b|\bruns that tried\b",
}
COMPILED = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in PATTERNS.items()}


def texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every line of a module, class or function docstring."""
    found = [(tok.start[0], tok.string)
             for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and ast.get_docstring(node, clean=False) is not None:
            first = node.body[0]
            found += [(first.lineno + i, line)
                      for i, line in enumerate(first.value.value.splitlines())]
    return sorted(found)


def hits(source: str) -> list[tuple[int, str, str]]:
    """(line, pattern name, the text matched) of each figure in `source`'s comments and
    docstrings. A text's line is joined to the next so that a figure broken over two lines is
    found too (found once, on its first line)."""
    lines = texts(source)
    found = []
    for k, (line, text) in enumerate(lines):
        following = lines[k + 1][1].strip().lstrip("#").strip() \
            if k + 1 < len(lines) and lines[k + 1][0] == line + 1 else ""
        joined = f"{text.strip().lstrip('#').strip()} {following}"
        cut = len(text.strip().lstrip("#").strip())
        for name, pattern in COMPILED.items():
            found += [(line, name, m.group(0)) for m in pattern.finditer(joined)
                      if m.start() < cut]
    return found


def files(src: Path = SRC, scanned=SCANNED) -> list[Path]:
    root = src / "corolla"
    paths = []
    for name in scanned:
        path = root / name
        paths += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return paths


def report(src: Path = SRC, scanned=SCANNED) -> list[str]:
    """One line per figure found: `path:line: pattern name: text`."""
    return [f"{path.relative_to(src).as_posix()}:{line}: {name}: {text}"
            for path in files(src, scanned)
            for line, name, text in hits(path.read_text(encoding="utf-8"))]


if __name__ == "__main__":
    found = report()
    print("\n".join(found) or "none")
    sys.exit(1 if found else 0)
