"""The package's layout is its architecture: every import of src/corolla (lazy ones included,
read from the source) runs from a layer to itself or a lower one, and no modules import each
other in a circle. The layers, lowest first, are `helpers/imports.LAYERS`."""

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
