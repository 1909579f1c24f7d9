"""time_plan.json: a timed run's plan in its own file, not in the user's config.toml; read
back as written, checked as a file from anywhere, and an older run's config.toml plan read as
its plan."""

import json
import tomllib

import pytest
import tomli_w

from corolla import config
from corolla.errors import UserError
from corolla.runs import paths, rundir, time_plan_file

PLANNED = {"train.time_budget": "10m", "train.epochs": 14, "train.frozen_epochs": 1,
           "model.input_size": 160, "train.time_plan": "14 epochs of ~38 s",
           "train.steps_per_epoch": 40, "train.time_steps": 31, "train.time_steps_from": 9,
           "train.time_steps_later": 36}


def _saved(tmp_path):
    """A run folder whose config holds a plan, saved as a run saves it."""
    planned = config.load_config(overrides=PLANNED)
    rundir.save(tmp_path, planned)
    return planned


def test_a_plan_is_written_to_its_own_file_and_read_back_as_the_run_trains_by_it(tmp_path):
    planned = _saved(tmp_path)
    toml = tomllib.loads((tmp_path / paths.CONFIG).read_text())["train"]
    assert not {"time_plan", "time_steps", "time_steps_from", "time_steps_later"} & set(toml)
    assert toml["time_budget"] == "10m"  # the user's
    record = json.loads((tmp_path / paths.TIME_PLAN).read_text())
    assert (record["plan"], record["steps"], record["steps_from"], record["steps_later"]) == \
        ("14 epochs of ~38 s", 31, 9, 36)
    assert rundir.config_of(tmp_path) == planned


def test_a_run_without_a_plan_writes_no_plan_file(tmp_path):
    rundir.save(tmp_path, config.load_config(overrides={"train.epochs": 3}))
    assert not (tmp_path / paths.TIME_PLAN).exists()
    assert rundir.config_of(tmp_path).train.epochs == 3


def test_the_plan_files_schedule_holds_where_config_toml_differs(tmp_path):
    """A kill between a plan made again's two writes leaves the file's schedule, written
    first."""
    _saved(tmp_path)
    config.save_config(config.load_config(overrides={**PLANNED, "train.epochs": 9}),
                       tmp_path / paths.CONFIG)
    assert rundir.config_of(tmp_path).train.epochs == 14


@pytest.mark.parametrize("change", [
    {"steps": -1}, {"steps": "31"}, {"steps_from": 10**6}, {"steps_later": 0},
    {"budget": "5m"}, {"plan": "x" * 20_000}, {"plan": 3}, {"extra": 1},
    {"schedule": {"train.epochs": 14}}, {"schedule": "x"},
])
def test_a_tampered_plan_file_is_one_line_naming_it(tmp_path, change):
    _saved(tmp_path)
    path = tmp_path / paths.TIME_PLAN
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, **change}))
    with pytest.raises(UserError) as e:
        rundir.config_of(tmp_path)
    text = str(e.value)
    assert text.startswith(f"{path} is not a time plan Corolla wrote") and "\n" not in text


def test_a_plan_files_schedule_out_of_range_or_damaged_json_is_one_line(tmp_path):
    _saved(tmp_path)
    path = tmp_path / paths.TIME_PLAN
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "schedule": {**record["schedule"],
                                                       "train.epochs": -4}}))
    with pytest.raises(UserError, match=r"is not a time plan Corolla wrote \(its schedule: "):
        rundir.config_of(tmp_path)
    path.write_text('{"budget": ')
    with pytest.raises(UserError, match=f"^{path} is damaged"):
        rundir.config_of(tmp_path)


def test_an_older_runs_plan_in_config_toml_is_read_as_its_plan_and_moved_when_saved(tmp_path):
    planned = config.load_config(overrides=PLANNED)
    (tmp_path / paths.CONFIG).write_text(tomli_w.dumps(planned.to_dict()))  # as versions did
    assert rundir.config_of(tmp_path) == planned
    rundir.save(tmp_path, rundir.config_of(tmp_path))
    assert "time_plan" not in tomllib.loads((tmp_path / paths.CONFIG).read_text())["train"]
    assert rundir.config_of(tmp_path) == planned


def test_the_schedule_keys_are_those_a_plan_sets():
    from corolla.training.timing import budget

    t = config.load_config().train
    assert set(budget.shaped(t, 5)) | {"model.input_size"} == set(time_plan_file.SCHEDULE)


def test_resuming_a_run_whose_plan_file_was_tampered_with_is_one_line_naming_it(tmp_path):
    from corolla.flows.train import train_config

    run = tmp_path / "r"
    run.mkdir()
    _saved(run)
    path = run / paths.TIME_PLAN
    path.write_text(json.dumps({**json.loads(path.read_text()), "steps_from": "nine"}))
    with pytest.raises(UserError) as e:
        train_config(resume=str(run), log=lambda *a: None)
    assert str(e.value).startswith(f"{path} is not a time plan Corolla wrote (its steps_from ")
    assert "\n" not in str(e.value)
