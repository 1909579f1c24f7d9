"""time_plan.json: what a time budget's plan decided (`training.timing`), in the run's own
file beside config.toml, which holds what the user asked for: the plan's line, the schedule it
fitted to the time (`SCHEDULE`: epochs, warm-up, input size), a shortened epoch's steps, and
where a plan made again mid-run changed the epochs after it, from which epoch they have how
many steps. The schedule is also in config.toml, which every command that scores or predicts
with the run reads as it is; the file is written first, and where the two differ (a kill
between the writes of a plan made again) the file's holds.

A resumed run continues the plan as it was made: `merged` reads the file into the run's
config (`rundir.config_of`). The file comes from anywhere a run folder can: every field is
checked, and a bad one is one line naming the file. A run folder of an older version holds
the same decisions as train.time_* in its config.toml, which are read as its plan, and moved
into time_plan.json when its config is next saved (`rundir.save`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from corolla.config import RunConfig, with_settings
from corolla.config.schema import MAX_EPOCHS
from corolla.errors import UserError
from corolla.files import read_bounded, write_json
from corolla.runs.paths import TIME_PLAN

MAX_BYTES = 64 * 1024  # a plan's lines, each made again once: a few hundred bytes
MAX_LINE = 16 * 1024
MAX_STEPS = 10**9  # steps an epoch: more is a tampered number, not a plan
# The config keys of the schedule a plan fits to the time (`training.timing.budget.shaped`, and
# the input size it chose).
SCHEDULE = ("model.input_size", "train.epochs", "train.frozen_epochs", "train.warmup_epochs",
            "train.sustain_epochs", "train.lr_decay")


@dataclass(frozen=True)
class Decided:
    """A plan's decisions. `budget`: the train.time_budget it was made for; `plan`: its line
    as the log said it (and each plan made again, after "; "; "" where the epochs' steps were
    set otherwise); `steps`: its epochs' steps where it shortened them (0: the config's);
    `steps_from`, `steps_later`: the epoch (from 0) from which the epochs have `steps_later`
    steps (0, 0: every epoch the same); `schedule`: the config's `SCHEDULE` keys as the plan set
    them."""
    budget: str
    plan: str
    schedule: dict
    steps: int = 0
    steps_from: int = 0
    steps_later: int = 0

    @classmethod
    def of(cls, config: RunConfig) -> Decided | None:
        """The decisions `config` holds (None: none; config.toml holds none of them, so a
        shortened epoch set from Python is kept here too)."""
        t = config.train
        if not (t.time_plan or t.time_steps or t.time_steps_from or t.time_steps_later):
            return None
        tree = config.to_dict()
        schedule = {key: tree[key.partition(".")[0]][key.partition(".")[2]] for key in SCHEDULE}
        return cls(t.time_budget, t.time_plan, schedule, t.time_steps, t.time_steps_from,
                   t.time_steps_later)

    def settings(self) -> dict:
        """The decisions as config settings: the schedule, and those config.toml never holds
        (`config.schema.TIME_PLAN_KEYS`)."""
        return {**self.schedule, "train.time_plan": self.plan, "train.time_steps": self.steps,
                "train.time_steps_from": self.steps_from,
                "train.time_steps_later": self.steps_later}

    def to_dict(self) -> dict:
        return {"budget": self.budget, "plan": self.plan, "schedule": self.schedule,
                "steps": self.steps,
                "steps_from": self.steps_from, "steps_later": self.steps_later}


def write(run_dir: Path, config: RunConfig) -> None:
    """The plan `config` holds into the run's time_plan.json (atomically); nothing without
    one."""
    decided = Decided.of(config)
    if decided is not None:
        write_json(decided.to_dict(), Path(run_dir) / TIME_PLAN)


def read(run_dir: Path, config: RunConfig) -> Decided | None:
    """The run's time_plan.json, checked against the run's `config` (None: no file)."""
    path = Path(run_dir) / TIME_PLAN
    if not path.is_file():
        return None
    fix = "copy it back from a copy of the run, or start a new run"
    try:
        record = json.loads(read_bounded(path, MAX_BYTES, "time plan").decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is damaged ({e}); {fix}") from None
    problem = _problem(record, config)
    if not problem:
        try:  # the schedule's values as the config's checks take them
            with_settings(config, record["schedule"])
        except UserError as e:
            problem = f"its schedule: {e}"
    if problem:
        raise UserError(f"{path} is not a time plan Corolla wrote ({problem}); {fix}")
    return Decided(**record)


def _problem(record, config: RunConfig) -> str:
    """What is wrong with a time_plan.json's `record` for the run of `config`; "" if
    nothing."""
    if not isinstance(record, dict) or set(record) != set(Decided.__dataclass_fields__):
        return f"it must hold exactly {', '.join(Decided.__dataclass_fields__)}"
    if record["budget"] != config.train.time_budget:
        return f"its budget must be the run's train.time_budget, {config.train.time_budget!r}"
    if not isinstance(record["plan"], str) or len(record["plan"]) > MAX_LINE:
        return "its plan must be the plan's line"
    if not isinstance(record["schedule"], dict) or set(record["schedule"]) != set(SCHEDULE):
        return f"its schedule must hold exactly {', '.join(SCHEDULE)}"
    ranges = {"steps": MAX_STEPS, "steps_later": MAX_STEPS, "steps_from": MAX_EPOCHS}
    for name, high in ranges.items():
        if type(record[name]) is not int or not 0 <= record[name] <= high:
            return f"its {name} must be a whole number from 0 to {high}"
    if bool(record["steps_from"]) != bool(record["steps_later"]):
        return "its steps_from and steps_later must be set together"
    return ""


def merged(run_dir: Path, config: RunConfig) -> RunConfig:
    """The run's `config` (its config.toml) with the plan its time_plan.json holds, where it
    has one: the config the run trains by."""
    decided = read(run_dir, config)
    return config if decided is None else with_settings(config, decided.settings())
