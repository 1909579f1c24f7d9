"""Every import of `src/corolla`, lazy ones included, read from the source (nothing is
imported), held against the declared layer order. The test (tests/test_layers.py) uses it; run
as a script it prints the figures the layout is judged by:

    python tests/helpers/imports.py          # circles, imports against the layers, top-level
                                             # modules, the longest functions
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# The layers, lowest first: a module imports only from its own layer or those before it.
# A name is a top-level module or package of corolla.
LAYERS = (
    ("errors", "files", "credentials", "stopping"),
    ("config",),
    ("runtime",),
    ("data",),
    ("models",),
    ("scoring",),
    ("runs",),
    ("training",),
    ("evaluation",),
    ("report",),
    ("flows",),
    ("commands",),
    ("api", "cli", "__main__", "__init__"),
)


def modules(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (packages by __init__)."""
    found = {}
    for path in sorted((src / "corolla").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The corolla module `name` stands for: itself, or its longest known prefix (an attribute
    imported from a module)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imported_names(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The dotted names an import statement of `module` imports (relative ones made absolute;
    `from a import b` gives a.b, which is the module a.b or a name in a); [] for another node."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}".strip(".")
    return [f"{base}.{alias.name}" for alias in node.names]


def imports(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the corolla modules it imports anywhere in its source."""
    known = modules(src)
    graph = {}
    for name, path in known.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for imported in imported_names(name, path.name == "__init__.py", node):
                target = _target(imported, known)
                if target is not None and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def layer_of(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise KeyError(f"{module}: its top-level name {top!r} is in no layer of LAYERS")


def against_layers(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every import of a higher layer from a lower one."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if layer_of(b) > layer_of(a))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def top_level(src: Path = SRC) -> list[str]:
    """What a newcomer sees in src/corolla: its modules and packages."""
    return sorted(p.name for p in (src / "corolla").iterdir()
                  if (p.suffix == ".py" or (p / "__init__.py").is_file()))


def longest_functions(src: Path = SRC, n: int = 5) -> list[tuple[int, str]]:
    """(lines, module:function) of the longest functions, longest first."""
    found = []
    for name, path in modules(src).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((node.end_lineno - node.lineno + 1, f"{name}:{node.name}"))
    return sorted(found, reverse=True)[:n]


if __name__ == "__main__":
    graph = imports()
    groups = circles(graph)
    print(f"import circles: {len(groups)}")
    for group in groups:
        print(f"  {' '.join(group)}")
    try:
        wrong = against_layers(graph)
    except KeyError as e:
        print(f"imports against the layers: not counted ({e})")
    else:
        print(f"imports against the layers: {len(wrong)}")
        for a, b in wrong:
            print(f"  {a} -> {b}")
    tops = top_level()
    print(f"top-level modules and packages: {len(tops)}: {' '.join(tops)}")
    print("longest functions:")
    for lines, where in longest_functions():
        print(f"  {lines:4d}  {where}")
