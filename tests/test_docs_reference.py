"""The documentation's references are generated from the code (docs/gen_reference.py, an MkDocs
hook) and miss nothing: every flag of every command's parser, every config key of the schema
with its default. And the README stays a quick start: its set-up commands on the first screen,
the test command the one .ci/run runs, its links into docs/ resolving. Fast, no network, no
MkDocs needed (`mkdocs build --strict` in .ci/run renders the pages)."""

import argparse
import dataclasses
import re
import tomllib

import pytest

from corolla import cli
from corolla.config import schema
from helpers.processes import REPO
from helpers.reference import gen_reference

README = REPO / "README.md"
SET_UP = 'pip install ".[tensorflow]" && corolla demo'
TESTS = 'pip install -e ".[test]" && python -m pytest'


@pytest.fixture(scope="module")
def reference():
    return gen_reference()


@pytest.fixture(scope="module")
def pages(reference):
    return reference.pages()


def _sections(page: str) -> dict[str, str]:
    """'corolla train' -> its section of the commands page."""
    parts = re.split(r"^## (corolla [a-z -]+)$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, nested ones (bench data) included, walked here on their own."""
    found = {}

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}"] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(cli.build_parser(), "corolla ")
    return found


def test_every_command_and_flag_is_in_the_commands_reference(pages, reference):
    sections = _sections(pages[reference.COMMANDS_PAGE])
    parsers = _parsers()
    assert set(parsers) == set(sections), set(parsers) ^ set(sections)
    assert {f"corolla {name}" for name in cli.COMMANDS} <= set(sections)
    for name, parser in parsers.items():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in sections[name], (name, flag)
            if not action.option_strings:  # a positional, by its name
                assert f"| {action.dest} |" in sections[name], (name, action.dest)
            if action.help and action.help != argparse.SUPPRESS:  # its help text, laid flat
                first = reference._cell(" ".join(action.help.split())[:30].split("%")[0])
                assert first in sections[name], (name, action.dest, first)


def test_every_config_key_is_in_the_config_reference(pages, reference):
    page = pages[reference.CONFIG_PAGE]
    config = schema.RunConfig()
    for section in dataclasses.fields(config):
        assert f"## [{section.name}]" in page
        for field in dataclasses.fields(getattr(config, section.name)):
            key = f"{section.name}.{field.name}"
            rows = [line for line in page.splitlines() if line.startswith(f"| `{key}` |")]
            assert len(rows) == 1, key
            default = getattr(getattr(config, section.name), field.name)
            shown = reference._toml(default)
            assert f"`{shown}`" in rows[0], (key, shown, rows[0])
    # The ranges are read from the rule that enforces them: one of them, as a sample.
    epochs = next(line for line in page.splitlines() if line.startswith("| `train.epochs` |"))
    assert f"1 to {schema.MAX_EPOCHS}" in epochs and "`--epochs`" in epochs
    backend = next(line for line in page.splitlines() if line.startswith("| `runtime.backend`"))
    assert all(f"`{choice}`" in backend for choice in schema.BACKENDS)


def test_the_references_are_deterministic(reference):
    assert reference.pages() == reference.pages()


def test_the_readme_is_a_quick_start():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200, len(lines)
    first_screen = "\n".join(lines[:30])
    assert SET_UP in first_screen and TESTS in first_screen
    assert "../shared" not in text  # a user has no ../shared
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert TESTS in ci  # CI runs the README's test command verbatim
    assert "mkdocs build --strict" in ci
    for target in re.findall(r"\]\((docs/[^)#\s]+)", text):
        assert (REPO / target).is_file(), target


def test_the_package_map_page_names_every_module_of_every_package(pages, reference):
    page = pages[reference.PACKAGES_PAGE]
    sections = dict(zip(*[iter(re.split(r"^## `([\w.]+)`$", page, flags=re.M)[1:])] * 2))
    src = REPO / "src" / "corolla"
    for init in src.rglob("__init__.py"):
        package = ".".join(init.parent.relative_to(src.parent).parts)
        names = {p.stem for p in init.parent.glob("*.py") if not p.stem.startswith("__")}
        names |= {p.parent.name for p in init.parent.glob("*/__init__.py")}
        rows = set(re.findall(r"^\| `(\w+)` \|", sections[package], flags=re.M))
        assert rows == names, package


def test_the_readme_and_the_sites_front_page_give_the_same_time_budget_figures():
    """The same sentence of measured figures on both front pages, not two versions of it."""
    def figures(path):
        text = " ".join(path.read_text(encoding="utf-8").split())
        return re.findall(r"\(with Lite0, `--time 6m` [^)]*\)", text)

    readme, index = figures(README), figures(REPO / "docs" / "index.md")
    assert len(readme) == 1 and readme == index, (readme, index)


def test_every_documented_docs_build_is_quiet_and_on_mkdocs_1():
    """Material for MkDocs prints a banner about MkDocs 2.0 on every build: each command the
    docs give sets the variable that keeps it off, as CI does, and the extra stays below 2."""
    for path in (README, REPO / "docs" / "contributing.md", REPO / ".ci" / "run"):
        text = " ".join(path.read_text(encoding="utf-8").split())
        commands = re.findall(r"(\S+ )mkdocs (?:serve|build)", text)
        assert commands and all(c == "NO_MKDOCS_2_WARNING=1 " for c in commands), (path, commands)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(spec.replace(" ", "").startswith("mkdocs>=") and "<2" in spec
               for spec in extras["docs"]), extras["docs"]


def test_the_headless_notebook_command_is_installed_by_the_test_extra():
    guide = (REPO / "docs" / "guides" / "python.md").read_text(encoding="utf-8")
    assert "jupyter execute examples/your_photos.ipynb --output" in guide
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(spec.startswith("nbclient") for spec in extras["test"])  # `jupyter execute`


def test_the_readmes_python_snippet_trains_a_run_its_commands_have_not():
    """Followed top to bottom, the README's commands make runs/garden: its Python snippet, run
    next, must not ask for that name again (a finished run's name is refused)."""
    text = README.read_text(encoding="utf-8")
    shell = set(re.findall(r"--name (\S+)", "".join(re.findall(r"```bash\n(.*?)```", text, re.S))))
    python = "".join(re.findall(r"```python\n(.*?)```", text, re.S))
    assert shell and re.search(r"corolla\.train\(", python)
    assert not shell & set(re.findall(r"\bname=\"([^\"]+)\"", python)), shell
