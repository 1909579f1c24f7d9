"""The reference pages, generated from the code at every docs build (never written by hand).

- `reference/commands.md`: every command and flag, read from the parser `corolla.cli` builds
  (the command modules' `add_arguments`), with each flag's value, default and help text.
- `reference/config.md`: every config key, read from `corolla.config.schema`: its section and
  type from the dataclasses, its default, its choices (`_CHOICES`), its range (the `low`
  and `high` each key is declared with, `corolla.config.setting`, which `schema._check` holds
  it to), its flag (`corolla.config.flags.FLAG_KEYS`) and its description (the comments
  beside and above the field).
- `reference/packages.md`: the package map, every package with its modules and what each does,
  read from the maps in the packages' `__init__.py` docstrings (tests/test_package_map.py holds
  those maps whole).

The Python API page (`reference/api.md`) is mkdocstrings' (from the docstrings); it is a
written page holding `::: corolla.api`.

Used two ways: as an MkDocs hook (`hooks:` in mkdocs.yml: `on_files` adds the pages to the
build without writing them into docs/), and from tests/test_docs_reference.py, which checks
that every flag and every key is in them. `python docs/gen_reference.py OUT` writes them into
the folder OUT, to read them without MkDocs. Deterministic: the same code gives the same text
(the help is laid out here, not by argparse at the terminal's width).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
from pathlib import Path

COMMANDS_PAGE = "reference/commands.md"
CONFIG_PAGE = "reference/config.md"
PACKAGES_PAGE = "reference/packages.md"
SRC = Path(__file__).resolve().parents[1] / "src"


def _cell(text) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    text = text.replace("<", "&lt;").replace(">", "&gt;")  # <cache> is no HTML tag
    return text.replace("[", "\\[").replace("]", "\\]")  # [model] is no link


def _code(text) -> str:
    """Text as inline code, for a table cell (a pipe would end the cell: escaped, no code)."""
    text = str(text)
    if "|" in text:
        return text.replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# -- commands ---------------------------------------------------------------------------------

def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """'train' -> its parser, 'bench data' -> a nested one, in `corolla --help`'s order."""
    from corolla import cli

    found = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}".strip()] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(cli.build_parser(), "")
    return found


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Subcommand name -> its one-line help, for a parser with subcommands."""
    helps = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                helps[choice.dest] = choice.help or ""
    return helps


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " \\| ".join(_code(c) for c in action.choices)
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.nargs in ("+", "*"):
        metavar += " ..."
    return _code(metavar)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    text = str(action.default)
    home = str(Path.home())
    if text == home or text.startswith(home + "/"):  # the same page on every machine
        text = "~" + text[len(home):]
    return _code(text if text else '""')


def flag_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str, str]]:
    """(flags, value, default, help) of each argument a command takes (positionals first, as
    its usage line has them); hidden ones (help=SUPPRESS) included, said so."""
    formatter = parser._get_formatter()
    rows = []
    actions = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction,
                                                                argparse._SubParsersAction))]
    for action in sorted(actions, key=lambda a: bool(a.option_strings)):
        names = ", ".join(action.option_strings) or action.dest
        if action.help == argparse.SUPPRESS:
            text = "(not listed by --help)"
        else:
            text = formatter._expand_help(action) if action.help else ""
        rows.append((names, _value(action), _default(action), text))
    return rows


def commands_markdown() -> str:
    from corolla import cli

    parsers = command_parsers()
    top = cli.build_parser()
    helps = _helps(top)
    lines = ["# Commands and flags", "",
             "Generated from the parsers the `corolla` command builds (`corolla.cli`, each "
             "command module's `add_arguments`) at every build of these pages: it is what "
             "`corolla COMMAND --help` prints, laid out as tables. Settings that are also config "
             "keys are listed with their key in the [config reference](config.md).", "",
             "| command | what it does |", "|---|---|"]
    for name in parsers:
        if " " not in name:
            lines.append(f"| [`corolla {name}`](#corolla-{name.replace(' ', '-')}) | "
                         f"{_cell(helps.get(name, ''))} |")
    lines += ["", "Every command also takes `--help`; `corolla --version` prints the version.",
              ""]
    for name, parser in parsers.items():
        lines += [f"## corolla {name}", ""]
        parent = parsers.get(name.rpartition(" ")[0]) if " " in name else top
        summary = _helps(parent).get(name.rpartition(" ")[2], "") if parent else ""
        if summary:
            lines += [_cell(summary), ""]
        if parser.description and parser.description != summary:
            lines += [" ".join(parser.description.split()), ""]
        subs = _helps(parser)
        if subs:
            lines += ["Subcommands: " + ", ".join(
                f"[`{s}`](#corolla-{name.replace(' ', '-')}-{s})" for s in subs) + ".", ""]
        rows = flag_rows(parser)
        if rows:
            lines += ["| flag | value | default | what it does |", "|---|---|---|---|"]
            for flags, value, default, text in rows:
                named = (", ".join(_code(f) for f in flags.split(", "))
                         if flags.startswith("-") else _cell(flags))
                lines.append(f"| {named} | {value} | {default} | {_cell(text)} |")
            lines.append("")
    return "\n".join(lines)


# -- config -----------------------------------------------------------------------------------

def _ranges() -> dict[str, tuple]:
    """Config key -> (lowest, highest or None): the range each key is declared with
    (`corolla.config.setting`), which `schema._check` holds it to."""
    from corolla.config import schema

    return {key: (s.low, s.high) for key, s in schema.SETTINGS.items()
            if s.low is not None or s.high is not None}


def _comments(cls, prefix: str = "") -> dict[str, str]:
    """Field name -> its description: the comment lines just above the field and the one
    beside it, from the dataclass's source."""
    source, _ = inspect.getsourcelines(cls)
    tree = ast.parse("".join(source))
    described, previous = {}, ""
    for node in tree.body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        line = source[node.lineno - 1]
        above, i = [], node.lineno - 2
        while i >= 0 and source[i].strip().startswith("#"):
            above.insert(0, source[i].strip().lstrip("#").strip())
            i -= 1
        beside = line.split("#", 1)[1].strip() if "#" in line.split("=", 1)[-1] else ""
        if not beside and node.end_lineno > node.lineno:  # or first inside a long declaration
            beside = _comment_under(source, node.lineno)
        text = " ".join(p for p in (*above, beside) if p)
        if not text and previous and source[node.lineno - 2].strip():
            # A field right under a commented one, without its own comment: the comment above
            # them speaks for the group (image/label/id features; fold and folds_file).
            text = f"See `{prefix}{previous}`."
        elif above:
            previous = node.target.id
        described[node.target.id] = text
    return described


def _comment_under(source: list[str], lineno: int) -> str:
    """The comment lines just under a field's first line (`x: int = setting(` then `# ...`)."""
    found, i = [], lineno
    while i < len(source) and source[i].strip().startswith("#"):
        found.append(source[i].strip().lstrip("#").strip())
        i += 1
    return " ".join(found)


def config_keys() -> list[dict]:
    """One dict per config key: key, type, default, choices, range, flags (every flag that
    sets it, in any command), keyword (the Python API's), description."""
    from corolla.config import flags, schema

    ranges = _ranges()
    flag_of = {key: dest for dest, key in flags.FLAG_KEYS.items()}
    names = {}  # destination -> every flag that sets it (--cache, --no-cache)
    for parser in command_parsers().values():
        for action in parser._actions:
            for flag in action.option_strings:
                names.setdefault(action.dest, [])
                if flag not in names[action.dest]:
                    names[action.dest].append(flag)
    keys = []
    for section in dataclasses.fields(schema.RunConfig):
        cls = section.default_factory().__class__
        described = _comments(cls, f"{section.name}.")
        for f in dataclasses.fields(cls):
            key = f"{section.name}.{f.name}"
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            dest = flag_of.get(key)
            keys.append({"key": key, "section": section.name, "name": f.name,
                         "type": f.type if isinstance(f.type, str) else f.type.__name__,
                         "default": default, "choices": schema._CHOICES.get(key),
                         "range": ranges.get(key),
                         "flags": names.get(dest, []) if dest else [],
                         "keyword": dest or "", "description": described.get(f.name, "")})
    return keys


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def _range_text(entry: dict) -> str:
    if entry["choices"]:
        return "one of " + ", ".join(_code(c) for c in entry["choices"])
    if entry["range"]:
        low, high = entry["range"]
        return f"{low} to {high}" if high is not None else f"at least {low}"
    return ""


def config_markdown() -> str:
    from corolla.config import schema

    keys = config_keys()
    lines = ["# Config keys", "",
             "Generated from `corolla.config.schema` at every build of these pages: each key's "
             "type and default from the config's dataclasses, its allowed values from the checks "
             "that refuse others, its flag from the table the CLI and the Python API share "
             "(`corolla.config.flags`; the Python keyword is the flag's name with `_`), and its "
             "description from the comments in the schema.", "",
             "A config file (`corolla train --config FILE.toml`) holds these keys in their "
             "sections; a run's `config.toml` is one, with every key resolved. A run's config is "
             "layered **defaults < recipe < `--config` file < flags**. An unknown key or a value "
             "of the wrong type is an error naming it.", "",
             "```toml", "[train]", "epochs = 20", "learning_rate = 0.0005", "", "[data]",
             'augment = ["crop", "flip", "affine", "color"]', "```", "",
             f"`train.folds`: 0 (no k-fold) or a number of folds from 2 to {schema.MAX_FOLDS}. "
             "`train.time_budget`: a duration, a positive number and a unit `s`, `m` or `h` "
             "(`90s`, `10m`, `1.5h`), or empty for none.", ""]
    for section in dict.fromkeys(k["section"] for k in keys):
        lines += [f"## [{section}]", "",
                  "| key | type | default | allowed | flag | what it is |",
                  "|---|---|---|---|---|---|"]
        for k in (k for k in keys if k["section"] == section):
            flag = ", ".join(_code(f) for f in k["flags"])
            lines.append(f"| `{k['key']}` | {k['type']} | {_code(_toml(k['default']))} | "
                         f"{_cell(_range_text(k))} | {flag} | {_cell(k['description'])} |")
        lines.append("")
    return "\n".join(lines)


# -- packages ---------------------------------------------------------------------------------

def package_maps(src: Path = SRC) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(dotted package, its summary, [(module, what it does)]) for every package, read from the
    source (nothing is imported): the `    name: what it does` lines of its `__init__.py`
    docstring are its map, the docstring's first paragraph its summary."""
    found = []
    for init in sorted((src / "corolla").rglob("__init__.py")):
        text = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")), clean=False) or ""
        summary, entries = [], []
        for line in text.splitlines():
            name, colon, what = line.strip().partition(": ")
            if line.startswith("    ") and colon and name.isidentifier():
                entries.append((name, what.strip()))
            elif not entries:
                summary.append(line.strip())
        package = ".".join(init.parent.relative_to(src).parts)
        paragraph = "\n".join(summary).strip().split("\n\n")[0]
        found.append((package, " ".join(paragraph.split()), entries))
    return found


def packages_markdown() -> str:
    lines = ["# Package map", "",
             "Generated from the maps in each package's `__init__.py` docstring. The layers, "
             "lowest first: errors, files -> config -> runtime -> data -> models -> runs -> "
             "evaluation -> training -> report -> flows -> commands -> api, cli (see "
             "[Contributing](../contributing.md#layout)).", ""]
    for package, summary, entries in package_maps():
        lines += [f"## `{package}`", "", summary, "", "| module | what it does |", "|---|---|"]
        lines += [f"| `{name}` | {_cell(what)} |" for name, what in entries]
        lines.append("")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """Page path inside docs/ -> its Markdown."""
    return {COMMANDS_PAGE: commands_markdown(), CONFIG_PAGE: config_markdown(),
            PACKAGES_PAGE: packages_markdown()}


# -- the MkDocs hook --------------------------------------------------------------------------

def on_files(files, config):
    from mkdocs.structure.files import File

    for uri, text in pages().items():
        files.append(File.generated(config, uri, content=text))
    return files


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "reference-out")
    for uri, text in pages().items():
        (out / uri).parent.mkdir(parents=True, exist_ok=True)
        (out / uri).write_text(text + "\n", encoding="utf-8")
        print(out / uri)
