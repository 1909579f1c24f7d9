"""The package's layout is its architecture: every import of src/corolla (lazy ones included,
read from the source) runs from a layer to itself or a lower one, and no modules import each
other in a circle. The layers, lowest first, are `helpers/imports.LAYERS`."""

import re

import pytest

from helpers import imports


@pytest.fixture(scope="module")
def graph():
    return imports.imports()


def test_every_module_is_in_a_layer(graph):
    for module in graph:
        imports.layer_of(module)  # KeyError names a module whose top-level name is in none


def test_no_import_runs_against_the_layers(graph):
    assert imports.against_layers(graph) == []


def test_no_import_circles(graph):
    assert imports.circles(graph) == []


def test_the_checks_catch_what_they_are_for():
    """Lazy imports, relative imports and `from package import module` are read; a circle
    and an upward import are found."""
    graph = {"corolla.errors": {"corolla.runs.rundir"}, "corolla.runs.rundir": {"corolla.errors"},
             "corolla.cli": {"corolla.errors"}}
    assert imports.circles(graph) == [["corolla.errors", "corolla.runs.rundir"]]
    assert imports.against_layers(graph) == [("corolla.errors", "corolla.runs.rundir")]


def test_imports_are_read_from_inside_functions_and_relative_forms(tmp_path):
    package = tmp_path / "corolla"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text("def f():\n    from corolla.data import pipeline\n")
    (package / "data" / "__init__.py").write_text("")
    (package / "data" / "pipeline.py").write_text("from . import layout\nfrom ..errors import f\n")
    (package / "data" / "layout.py").write_text("import corolla.data.pipeline\n")
    graph = imports.imports(tmp_path)
    assert graph["corolla.errors"] == {"corolla.data.pipeline"}
    assert graph["corolla.data.pipeline"] == {"corolla.data.layout", "corolla.errors"}
    # errors -> pipeline -> errors and pipeline <-> layout: one circle of three.
    assert imports.circles(graph) == [["corolla.data.layout", "corolla.data.pipeline",
                                       "corolla.errors"]]
    assert imports.against_layers(graph) == [("corolla.errors", "corolla.data.pipeline")]


# What a command module may import from commands/: the shared argparse helpers, not a command.
SHARED = {"corolla.commands", "corolla.commands.arguments"}


def commands_importing_commands(graph) -> list[tuple[str, str]]:
    """(command module, the other command module it imports): a command parses its command line
    and calls a flow; what two commands share lives in flows/ (or in `SHARED`)."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if a.startswith("corolla.commands.") and a not in SHARED
                  and b.startswith("corolla.commands.") and b not in SHARED)


def test_no_command_imports_another(graph):
    assert commands_importing_commands(graph) == []


def test_a_command_importing_another_is_found():
    graph = {"corolla.commands.lr_find": {"corolla.commands.train", "corolla.commands.arguments",
                                          "corolla.flows.lr_find"},
             "corolla.commands.train": {"corolla.commands.arguments", "corolla.flows.train"}}
    assert commands_importing_commands(graph) == [("corolla.commands.lr_find",
                                                   "corolla.commands.train")]


def command_modules_off_the_rule(graph, src=imports.SRC, most: int = 60) -> list[str]:
    """Command modules (`SHARED` aside) over `most` lines or calling no flow: a command parses
    its command line and calls one flow, where the workflow lives."""
    off = []
    for module in sorted(m for m in graph if m.startswith("corolla.commands.") and m not in SHARED):
        path = src.joinpath(*module.split(".")).with_suffix(".py")
        lines = len(path.read_text().splitlines())
        flows = [m for m in graph[module] if m.startswith("corolla.flows.")]
        if lines >= most or not flows:
            off.append(f"{module}: {lines} lines, flows {flows}")
    return off


def test_every_command_is_short_and_calls_a_flow(graph):
    assert command_modules_off_the_rule(graph) == []


def names_in_three_packages(src=imports.SRC) -> dict[str, list[str]]:
    """Module names (not __init__) defined in three packages or more: a name a reader cannot
    place without its package."""
    where: dict[str, list[str]] = {}
    for path in sorted((src / "corolla").rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            where.setdefault(path.stem, []).append(path.parent.name)
    return {name: places for name, places in where.items() if len(places) >= 3}


def test_no_module_name_stands_in_three_packages():
    assert names_in_three_packages() == {}


def test_the_command_and_name_rules_catch_what_they_are_for(tmp_path):
    commands = tmp_path / "corolla" / "commands"
    commands.mkdir(parents=True)
    (commands / "long.py").write_text("x = 1\n" * 61)
    (commands / "short.py").write_text("from corolla.flows import short\n")
    graph = {"corolla.commands.long": {"corolla.flows.long"},
             "corolla.commands.short": {"corolla.errors"}}
    assert command_modules_off_the_rule(graph, tmp_path) == [
        "corolla.commands.long: 61 lines, flows ['corolla.flows.long']",
        "corolla.commands.short: 1 lines, flows []"]
    for package in ("a", "b", "c"):
        (tmp_path / "corolla" / package).mkdir()
        (tmp_path / "corolla" / package / "predict.py").write_text("")
    assert names_in_three_packages(tmp_path) == {"predict": ["a", "b", "c"]}


def module_aliases(src=imports.SRC) -> list[str]:
    """`import X as X_lib` lines in src/corolla: each names a module by a second name, forced
    where a module's name is taken by a variable; a few are fine, many say the names clash."""
    return [f"{path.relative_to(src)}: {line.strip()}"
            for path in sorted((src / "corolla").rglob("*.py"))
            for line in path.read_text().splitlines()
            if re.search(r"\bimport \w+ as \w+_lib\b", line)]


def test_module_aliases_are_few():
    assert len(module_aliases()) <= 10, module_aliases()
