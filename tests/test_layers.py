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
