"""Imports sit at their module's top, but where the Keras backend must be chosen first, where
the package may be absent, or where the CLI's start would load a heavy library
(helpers/late_imports.py says each). Read from the source; nothing of corolla is imported."""

import textwrap

from helpers.late_imports import Package, required


def test_every_import_inside_a_function_has_a_reason():
    assert [f"{i.module}:{i.line}: {i.text}" for i in Package().needless()] == []


def test_the_packages_every_install_has_are_read_from_pyproject():
    every_install = required()
    assert {"keras", "numpy", "sklearn", "PIL", "tomli_w", "matplotlib", "tensorflow"} \
        <= every_install
    assert not {"jax", "keras_hub", "mlflow", "wandb", "kaggle"} & every_install


def write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "corolla" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_each_reason_is_told_apart_and_a_needless_import_is_found(tmp_path):
    write(tmp_path, {
        "__init__.py": "",
        "cli.py": "from corolla import flows\n",
        "api.py": "",
        "flows.py": """\
            def run():
                import tensorflow as tf      # start: the parser loads this module
                import json                  # needless: the standard library
            """,
        "layers.py": "import keras\n",
        "maths.py": """\
            import tensorflow as tf
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from corolla import flows    # never runs: not an import inside a function
            def f():
                import tensorflow as tf      # needless: the module loads it already
                from corolla import layers   # backend: binds Keras here
                import wandb                 # optional
                import fcntl                 # optional: one platform's
            """,
        "model.py": """\
            import keras
            def g():
                from corolla import layers   # needless: Keras is loaded here already
            """,
    })
    package = Package(tmp_path)
    started, every_install = package.started(), {"keras", "tensorflow"}
    reasons = {(i.module, i.text): package.reason(i, started, every_install)
               for i in package.late}
    assert reasons == {
        ("corolla.flows", "import tensorflow as tf"): "start",
        ("corolla.flows", "import json"): None,
        ("corolla.maths", "import tensorflow as tf"): None,
        ("corolla.maths", "from corolla import layers"): "backend",
        ("corolla.maths", "import wandb"): "optional",
        ("corolla.maths", "import fcntl"): "optional",
        ("corolla.model", "from corolla import layers"): None,
    }
    assert [(i.module, i.line) for i in package.needless(every_install)] == [
        ("corolla.flows", 3), ("corolla.maths", 6), ("corolla.model", 3)]
    assert package.loads("corolla.cli") == set()
    assert package.loads("corolla.maths") == {"tensorflow"}
    assert "corolla.flows" in started and "corolla.maths" not in started
