"""Recipes: training choices as data. One TOML file per recipe, shipped with the package: a
`description` and the [data] / [model] / [train] sections of a config file (a partial config),
checked by the config's own rules.

A run's config is layered: defaults < recipe < --config file < flags. `recipe = "auto"` picks by
accelerator: on CPUs cpu-finetune when pre-trained weights can be had, else the from-scratch
cpu recipe; a pretrained fine-tuning one on GPUs and TPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from corolla.config.flags import Given
from corolla.config import schema
from corolla.errors import UserError, did_you_mean

FOLDER = Path(__file__).parent / "recipes"  # the shipped recipes, one TOML file each
SECTIONS = ("data", "model", "train")  # what a recipe may set: runtime and output are not its
AUTO = {"cpu": "cpu", "gpu": "effnet-b7-finetune", "tpu": "effnet-b7-finetune"}
# On a CPU "auto" fine-tunes when pre-trained weights can be had (flows.auto.cpu_auto
# decides: it needs the model registry), else it is AUTO["cpu"].
CPU_FINETUNE = "cpu-finetune"
NONE = "none"  # no recipe: the config's plain defaults (a config built in Python, the demo)


@dataclass(frozen=True)
class Recipe:
    name: str  # a shipped recipe's name, or the resolved path of a recipe file
    description: str
    values: dict[str, Any]  # dotted config keys -> values, checked

    def line(self, config: schema.RunConfig) -> str:
        """The run's recipe line: its name and description, and where the run trains another
        model or input size than the description names (the backbone ladder's rung, or the
        user's --model/--size), the one it trains, so the line is never wrong about it."""
        own = schema.with_settings(schema.RunConfig(), self.values).model
        model = config.model
        changed = [f"model {model.name}" if model.name != own.name else "",
                   f"{model.input_size} px" if model.input_size != own.input_size else ""]
        changed = [c for c in changed if c]
        return f"recipe {self.name}: {self.description}" + (
            f" (this run: {', '.join(changed)})" if changed else "")


def names() -> list[str]:
    return sorted(p.stem for p in FOLDER.glob("*.toml"))


def choose(requested: str, accelerator: str) -> str:
    """The recipe "auto" stands for on this accelerator; any other request as it is."""
    return AUTO.get(accelerator, AUTO["cpu"]) if requested == "auto" else requested


def is_file(name_or_path: str) -> bool:
    """A recipe named by a file's path (else a shipped recipe's name)."""
    return "/" in name_or_path or name_or_path.endswith(".toml")


def canonical(name_or_path: str) -> str:
    """How a run records its recipe: a shipped recipe by name, a file by its absolute path
    (the same file however it was spelled: a relative path re-run from the same folder is
    the same command)."""
    return str(Path(name_or_path).resolve()) if is_file(name_or_path) else name_or_path


def load_recipe(name_or_path: str) -> Recipe:
    """A shipped recipe by name, or a recipe file; an unknown key or an ill-typed value is one
    line naming the file and the key."""
    if name_or_path == NONE:
        return Recipe(NONE, "no recipe: the config's defaults", {})
    shipped = FOLDER / f"{name_or_path}.toml"
    if not is_file(name_or_path):
        if not shipped.is_file():
            hint = did_you_mean(name_or_path, ["auto", *names()])
            raise UserError(f"unknown recipe {name_or_path!r}; {hint + ' ' if hint else ''}"
                            f"choose one of: {', '.join(['auto', *names()])} (corolla info "
                            f"--recipes), or pass a recipe file's path")
        path, name = shipped, name_or_path
    else:
        path, name = Path(name_or_path), canonical(name_or_path)
    tree = schema.read_toml(path, "recipe file")
    description = tree.pop("description", "")
    if not isinstance(description, str):
        raise UserError(f"recipe {str(path)!r}: description must be a string, got "
                        f"{description!r}")
    try:
        values = schema.flatten(tree)
        for key in values:
            section, _, rest = key.partition(".")
            if section in {f.name for f in fields(schema.RunConfig)} - set(SECTIONS) or \
                    key == "train.recipe":
                raise UserError(f"{key!r} is not a recipe's to set (a recipe sets "
                                f"{', '.join(f'[{s}]' for s in SECTIONS)}, not train.recipe)")
        schema.with_settings(schema.RunConfig(), values)  # the config's checks, nothing else
    except UserError as e:
        raise UserError(f"recipe {str(path)!r}: {e}") from None
    return Recipe(name, description, values)


def _recipe_keys() -> set[str]:
    defaults = schema.RunConfig().to_dict()
    # (a time budget's plan is Corolla's, kept in the run's time_plan.json, not config.toml)
    return {f"{s}.{k}" for s in SECTIONS for k in defaults[s]} - {"train.recipe"} - \
        set(schema.TIME_PLAN_KEYS)


def is_read(file: schema.ConfigFile | None) -> bool:
    """Whether a run's recipe is read: not when its config file sets every key a recipe could
    (a run's saved config.toml: reproduced without its recipe file, which may be gone)."""
    return not (file is not None and _recipe_keys() <= set(file.values))


def compose(config_path: str | Path | schema.ConfigFile | None, given: Given,
            accelerator: str) -> tuple[schema.RunConfig, Recipe]:
    """The run's config: defaults < recipe < `config_path` < `given`, with train.recipe
    naming the recipe used. A config file that sets every key a recipe could set (a run's saved
    config.toml) leaves the recipe nothing to say: it is not read, so a saved run is reproduced
    without its recipe file."""
    file = schema.config_file(config_path)  # parsed once, for both uses below
    asked = schema.load_config(file, given.values, given.names)  # checks the file and the flags
    name = choose(asked.train.recipe, accelerator)
    tree = file.values if file is not None else {}
    if not is_read(file):
        recipe = Recipe(name, "(every value given by the config file)", {})
    else:
        recipe = load_recipe(name)
    config = schema.with_settings(schema.RunConfig(), recipe.values)
    config = schema.with_settings(config, tree)
    config = schema.with_settings(config, given.values, given.names)
    return schema.with_settings(config, {"train.recipe": recipe.name}), recipe


def table() -> list[dict[str, Any]]:
    """Every shipped recipe: name, model, image size (the data's to read), input size (the
    model's, at most), start size (progressive resizing's first), epochs, description."""
    rows = []
    for name in names():
        recipe = load_recipe(name)
        config = schema.with_settings(schema.RunConfig(), recipe.values)
        rows.append({"name": name, "model": config.model.name,
                     "image_size": config.data.image_size,
                     "input_size": config.model.input_size,
                     "start_size": config.train.start_size, "epochs": config.train.epochs,
                     "description": recipe.description})
    return rows
