"""Every package's map is whole: the docstring of each `__init__.py` under src/corolla names
each of its modules and subpackages on a line of its own (`    name: what it does`), and names
nothing that is not there. Read from the source, as the generated package-map page reads it
(docs/gen_reference.py `package_maps`); nothing of corolla is imported."""

from pathlib import Path

from helpers.imports import SRC
from helpers.reference import gen_reference


def present(package: Path) -> set[str]:
    """A package's modules (not `__init__`, `__main__`) and subpackages, by bare name."""
    names = {p.stem for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    return names | {p.parent.name for p in package.glob("*/__init__.py")}


def map_errors(src: Path = SRC) -> list[str]:
    """One line per package whose map misses a module or names one that does not exist."""
    errors = []
    for dotted, _, entries in gen_reference().package_maps(src):
        package, names = src.joinpath(*dotted.split(".")), {name for name, _ in entries}
        where = package.relative_to(src).as_posix()
        errors += [f"{where}: {name} is not in the map"
                   for name in sorted(present(package) - names)]
        errors += [f"{where}: the map names {name}, which is not there"
                   for name in sorted(names - present(package))]
    return errors


def test_every_package_map_is_whole():
    assert map_errors() == []


def test_the_check_catches_a_missing_and_an_unknown_module(tmp_path):
    package = tmp_path / "corolla" / "data"
    (package / "sub").mkdir(parents=True)
    (tmp_path / "corolla" / "__init__.py").write_text('"""Top.\n\n    data: the data\n"""\n')
    (tmp_path / "corolla" / "__main__.py").write_text("")
    (package / "__init__.py").write_text('"""Data.\n\n    layout: where\n    gone: was here\n"""\n')
    (package / "layout.py").write_text("")
    (package / "records.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "notes").mkdir()  # a folder without __init__.py is no subpackage
    assert map_errors(tmp_path) == ["corolla/data: records is not in the map",
                                    "corolla/data: sub is not in the map",
                                    "corolla/data: the map names gone, which is not there"]
