"""The run `corolla train` trains: its config (defaults < recipe < --config < flags, by
accelerator; or the config of the run it continues), then one run end to end (`flows.run`) or
a k-fold run (`flows.kfold`).

Settings arrive as one `Given` (`config.flags`): the values by config key (e.g.
{"train.epochs": 3}) and how the user wrote each key ("--epochs" on the command line, "epochs="
from Python), so that errors name what the user typed.
"""

from __future__ import annotations

from pathlib import Path

from corolla import config as config_lib
from corolla import models, runtime
from corolla.config import recipe as recipe_lib
from corolla.config.flags import Given
from corolla.config.range_test import FIND, RangeSettings
from corolla.config.schema import UNPLANNED
from corolla.data.prepare import sources
from corolla.errors import UserError
from corolla.files import absolute
from corolla.flows import auto, check_data
from corolla.models import hub
from corolla.report import html as html_report
from corolla.runs import kfold as kfold_rule
from corolla.runs import paths, rundir, tracking
from corolla.runtime import clock


# What a continued run may change: where and how it runs, and whether it skips damaged records
# (what the error about a damaged record met mid-training advises). Nothing else: the run is
# its config.
SESSION = ("runtime.", "data.skip_bad_records")


def _continued(run: Path, run_cfg: config_lib.RunConfig, given: Given):
    """The config of a continued run (`run_cfg`, its config.toml and time plan) with the
    session settings `given`; a changed data.skip_bad_records is saved into config.toml, which
    evaluate and predict read (the runtime ones are this session's only)."""
    cfg = config_lib.with_settings(run_cfg, given.only(*SESSION).values, given.names)
    if cfg.data.skip_bad_records != run_cfg.data.skip_bad_records:
        rundir.save(run, config_lib.with_settings(run_cfg, {
            "data.skip_bad_records": cfg.data.skip_bad_records}))
    return cfg


def train_config(config_file: str | config_lib.ConfigFile | None = None,
                 given: Given = Given(), resume: str | Path | None = None,
                 log=print) -> tuple[config_lib.RunConfig, Path | None]:
    """(the config of the run to train, the unfinished run folder it continues or None).
    `resume`: continue that run with its own config (only `SESSION` settings may change). A run
    named like an unfinished one that has the same settings continues it too (the same command
    after a kill); a config file's own run name, if taken, gets a fresh one."""
    if "train.epochs" in given and "train.time_budget" in given:
        # Both fix the length of training: neither silently wins.
        raise UserError(f"{given.name('train.epochs', '--epochs')} and "
                        f"{given.name('train.time_budget', '--time')} both set how long to "
                        f"train; give one (with the time, the epochs follow from it)")
    if "train.time_budget" in given and not resume:
        # A budget given is planned anew: a saved config's plan (`--config runs/X/config.toml`)
        # was its own budget's.
        given = given.with_values(UNPLANNED)
    if resume:
        fixed = sorted(given.name(k) for k in given if not k.startswith(SESSION))
        if fixed or config_file:
            raise UserError(f"{given.name('resume', '--resume')} continues a run with its own "
                            f"config and global batch; drop "
                            f"{', '.join(fixed) or given.name('config', '--config')} (only "
                            f"runtime flags and "
                            f"{given.name('data.skip_bad_records', '--skip-bad-records')} may "
                            f"change)")
        resume, run_cfg = rundir.load_unfinished(resume)
        return _continued(resume, run_cfg, given), resume
    cfg = config_lib.load_config(config_file, given.values, given.names)
    again = Path(cfg.output.runs_dir) / cfg.output.name
    if "output.name" in given and rundir.status(again) == rundir.FINISHED_STATUS:
        # Said first, before the backend is chosen (a finished run is never the folder this
        # command's chief has just made; other taken names are checked on the chief, in `train`).
        rundir.check_free(cfg.output.runs_dir, cfg.output.name, given)
    if "output.name" in given and rundir.status(again) != rundir.FINISHED_STATUS \
            and (again / paths.CONFIG).is_file():
        # The same named command after a kill (preemption): continue that run.
        resume, run_cfg = rundir.load_unfinished(again)
        _check_same_command(run_cfg, given, again)
        log(f"run {str(again)!r} exists and did not finish: continuing it (as --resume)")
        cfg = _continued(resume, run_cfg, given)
    elif config_file and "output.name" not in given and cfg.output.name:
        # A saved config (runs/X/config.toml) names its own run: a rerun gets a fresh one.
        free = rundir.free_name(cfg.output.runs_dir, cfg.output.name)
        if free != cfg.output.name:
            log(f"run name {cfg.output.name!r} from {config_file} is taken; this run is "
                f"{free!r}")
            cfg = config_lib.with_settings(cfg, {"output.name": free})
    return cfg, resume


def check_first(cfg: config_lib.RunConfig, config_file: config_lib.ConfigFile | None,
                given: Given, resume: Path | None = None) -> None:
    """What can be checked without work, before the backend (and TensorFlow), the recipe's
    resolution, a data conversion or a time probe: a new run's local data path can be data
    (`sources.check_source`: it exists, a CSV has the columns, a folder an image), its model is
    known, its local weights exist, keras-hub is installed where the model or the weights need
    it; a continued run's model can be built here. The model is the one asked for, else the
    named recipe's (`recipe auto` chooses one later, and says which)."""
    if resume is not None:
        hub.require(cfg.model.name, f"run {str(resume)!r} (model {cfg.model.name})")
        return
    sources.check_source(cfg.data.path)
    asked = auto.asked_keys(config_file, given.values)
    recipe = recipe_lib.load_recipe(cfg.train.recipe).values if cfg.train.recipe != "auto" and \
        recipe_lib.is_read(config_file) else {}
    model = asked.get("model.name") or recipe.get("model.name") or \
        (cfg.model.name if cfg.train.recipe != "auto" else None)
    weights = asked.get("model.weights", recipe.get("model.weights"))
    models.check_choice(model, weights, _as_given(given, asked, cfg, "model.name", model),
                        _as_given(given, asked, cfg, "model.weights", weights))


def _as_given(given: Given, asked: dict, cfg: config_lib.RunConfig, key: str, value) -> str:
    """How a message names a model or weights setting: as the user wrote it (`--model X`,
    `model="X"`), else as the recipe's (`recipe R's model X`)."""
    word = {"model.name": "model", "model.weights": "weights"}[key]
    if key in asked:
        return given.written(key, value, f"--{word}")
    return f"recipe {cfg.train.recipe}'s {word} {value}"


def _check_same_command(saved: config_lib.RunConfig, given: Given, run) -> None:
    """A run continued by re-running its command must get the settings it started with."""
    if given.get("train.recipe") == "auto":  # picked by the hardware: the run has the one used
        given = given.without("train.recipe")
    given = given.without(*UNPLANNED)  # (set above, not given)
    flags = {k: v for k, v in given.values.items() if not k.startswith((*SESSION, "output."))}
    asked = config_lib.with_settings(saved, flags)
    if "data.path" in flags:
        asked = config_lib.with_settings(asked, {"data.path": absolute(flags["data.path"])})
    if "train.recipe" in flags:  # a recipe file by any spelling of its path
        asked = config_lib.with_settings(asked, {"train.recipe": recipe_lib.canonical(
            flags["train.recipe"])})
    differ = [f"{given.name(k)} {_get(asked, k)!r} (the run has {_get(saved, k)!r})"
              for k in flags if _get(asked, k) != _get(saved, k)]
    if differ:
        raise UserError(f"run {str(run)!r} exists with other settings: {'; '.join(differ)}; "
                        f"continue it with `corolla train --resume {run}` or choose another "
                        f"{given.name('output.name', '--name')}")


def _get(cfg: config_lib.RunConfig, key: str):
    section, _, name = key.partition(".")
    return getattr(getattr(cfg, section), name)


def for_plan(config_file: str | config_lib.ConfigFile | None, given: Given, plan, log=print):
    """(config, plan, recipe) of a new run: `recipe.compose` for the accelerator of `plan`
    (detected from the config without its recipe: the hardware decides "auto"; on a CPU, also
    whether pre-trained weights can be had; on a GPU or TPU, `auto.accelerator_auto`), and the
    plan with the batch the recipe sets."""
    config_file = config_lib.config_file(config_file)  # one parse for every step below
    wants_auto = config_lib.load_config(config_file, given.values,
                                        given.names).train.recipe == "auto"
    if wants_auto and plan.accelerator == "cpu":
        name, decided, why = auto.cpu_auto(config_file, given.values)
        log(f"recipe auto on a CPU: {name} ({why})")
        given = given.with_values({"train.recipe": name, **decided})
    elif wants_auto:
        decided, why = auto.accelerator_auto(config_file, given.values, plan)
        log(f"recipe auto on a {plan.accelerator.upper()}: {decided['train.recipe']} ({why})")
        given = given.with_values(decided)  # decided holds none of the user's keys but these two
    config, recipe = recipe_lib.compose(config_file, given, plan.accelerator)
    return (config, plan.with_batch(config.train.batch_size, config.train.global_batch_size),
            recipe)


def train(config_file: str | None = None, given: Given = Given(),
          resume: str | Path | None = None, log=print,
          strict: bool = False, began: float | None = None) -> tuple[Path | None, dict | None]:
    """`corolla train`: checks the data (once per data set, `flows.check_data`: copies
    across splits are a warning, an error with `strict`), trains, evaluates on val and writes
    submission.csv. Returns (run folder, val metrics; a k-fold run's: its out-of-fold scores);
    (None, None) on a worker that is not the chief. `began`: when the command started
    (`clock.default_clock()`'s time): a time budget counts from there, the data's conversion and the
    imports included (None: from its training's start)."""
    config_file = config_lib.config_file(config_file)  # parsed at its first use, and only then
    given, lr_find = split_lr_find(given, resume)
    given_resume = resume
    cfg, resume = train_config(config_file, given, resume, log)
    if lr_find is not None and resume is not None and given_resume is None:
        log(f"{_find_flag(given)}: run {str(resume)!r} continues at the rate it has, "
            f"{cfg.train.learning_rate:g}")
        lr_find = None
    if lr_find is not None and cfg.train.folds:
        raise UserError(f"{_find_flag(given)} is not for k-fold runs "
                        f"({given.name('train.folds', '--folds')}); find a rate once with "
                        f"`corolla lr-find --data ...` and pass it as "
                        f"{given.name('train.learning_rate', '--lr')} RATE")
    if not cfg.data.path:
        raise UserError(f"no data given; pass {given.name('data.path', '--data')} with a folder "
                        f"holding tfrecords-jpeg-SxS/ (or data.path in "
                        f"{given.name('config', '--config')})")
    check_first(cfg, config_file, given, resume)
    plan = runtime.detect_for(cfg)  # first: it picks the Keras backend
    if plan.is_chief:  # a missing package or a server down: one line, before anything runs
        tracking.check(cfg.output.track, cfg.output.runs_dir)
        if resume is None:  # a name taken: said before the recipe, the data check, a probe
            rundir.check_free(cfg.output.runs_dir, cfg.output.name, given)
    if resume is None:  # a new run: defaults < recipe < --config < flags, by accelerator
        name = cfg.output.name  # (a saved config's name may have been replaced by a free one)
        cfg, plan, recipe = for_plan(config_file, given, plan, log)
        cfg = config_lib.with_settings(cfg, {"output.name": name})
        log(recipe.line(cfg))
    from corolla.data import datasets

    checked = check_data.for_training(cfg.data.path, datasets.features_of(cfg.data), strict,
                                      log=log, skip_bad_records=cfg.data.skip_bad_records)
    if kfold_rule.is_parent(cfg):
        from corolla.flows import kfold

        run_dir, metrics = kfold.train_folds(cfg, plan, log=log, resume=resume, began=began)
    else:
        from corolla.flows import run

        run_dir, metrics = run.train_evaluate_predict(cfg, plan, log=log, resume=resume,
                                                      lr_find=lr_find, began=began)
    if run_dir is not None and checked is not None:  # the chief: the run keeps its check

        check_data.save_with_run(run_dir, checked)
        html_report.write(run_dir)
    tracking.finish(run_dir, log, [run_dir / paths.REPORT] if run_dir else ())
    if run_dir is not None:
        log(done_line(run_dir, cfg.train.time_budget, began, resumed=resume is not None))
    return run_dir, metrics


def done_line(run_dir: Path, budget: str, began: float | None, resumed: bool) -> str:
    """The command's last line: the run, and for a new timed run (`budget`: its
    train.time_budget), the command's wall time against it (`done in 5.8 min of --time 6m
    (97%): runs/garden`)."""
    if not budget or resumed or began is None:
        return f"done: {run_dir}"
    took = clock.default_clock().since(began)
    return (f"done in {took / 60:.1f} min of --time {budget} "
            f"({took / config_lib.duration_seconds(budget):.0%}): {run_dir}")


def _find_flag(given: Given) -> str:
    """How the user asked for the range test: `--lr find`, `learning_rate="find"`."""
    return given.written("train.learning_rate", FIND, "--lr")


def split_lr_find(given: Given, resume=None) -> tuple[Given, RangeSettings | None]:
    """(the settings without train.learning_rate "find", the range test's settings or None).
    The rate of a continued run is its own: finding one is an error there."""
    rate = given.get("train.learning_rate")
    if not (isinstance(rate, str) and rate.strip().lower() == FIND):
        return given, None
    if resume:
        raise UserError(f"{_find_flag(given)} finds the rate of a new run; a continued run "
                        f"({given.name('resume', '--resume')}) keeps the rate it trains "
                        f"at: drop {_find_flag(given)}")
    return given.without("train.learning_rate"), RangeSettings()

