"""The workflow's steps as library calls: what `corolla train`, `evaluate`, `predict` and
`report` do once their settings are parsed. The CLI and the Python API (`corolla.api`) both call
these, so neither holds logic of its own.

Settings arrive as `flags` (config key -> value, e.g. {"train.epochs": 3}) with `names` (config
key -> how the user wrote it: "--epochs" on the command line, "epochs=" from Python), so that
errors name what the user typed.
"""

from __future__ import annotations

import os
from pathlib import Path

from corolla import config as config_lib
from corolla import rundir
from corolla.errors import UserError


def train_config(config_file: str | None = None, flags: dict | None = None,
                 names: dict | None = None, resume: str | Path | None = None,
                 log=print) -> tuple[config_lib.RunConfig, Path | None]:
    """(the config of the run to train, the unfinished run folder it continues or None).
    `resume`: continue that run with its own config (only runtime settings may change). A run
    named like an unfinished one that has the same settings continues it too (the same command
    after a kill); a config file's own run name, if taken, gets a fresh one."""
    flags, names = dict(flags or {}), dict(names or {})
    if resume:
        fixed = sorted(names.get(k, k) for k in flags if not k.startswith("runtime."))
        if fixed or config_file:
            raise UserError(f"--resume continues a run with its own config and global batch; "
                            f"drop {', '.join(fixed) or '--config'} (only runtime flags may "
                            f"change)")
        resume, run_cfg = rundir.load_unfinished(resume)
        return config_lib.apply(run_cfg, flags, names), resume
    cfg = config_lib.load(config_file, flags, names)
    again = Path(cfg.output.runs_dir) / cfg.output.name
    if "output.name" in flags and rundir.status(again) != rundir.FINISHED_STATUS \
            and (again / rundir.CONFIG).is_file():
        # The same named command after a kill (preemption): continue that run.
        resume, run_cfg = rundir.load_unfinished(again)
        _check_same_command(run_cfg, flags, names, again)
        log(f"run {str(again)!r} exists and did not finish: continuing it (as --resume)")
        cfg = config_lib.apply(run_cfg, {k: v for k, v in flags.items()
                                         if k.startswith("runtime.")}, names)
    elif config_file and "output.name" not in flags and cfg.output.name:
        # A saved config (runs/X/config.toml) names its own run: a rerun gets a fresh one.
        free = rundir.free_name(cfg.output.runs_dir, cfg.output.name)
        if free != cfg.output.name:
            log(f"run name {cfg.output.name!r} from {config_file} is taken; this run is "
                f"{free!r}")
            cfg = config_lib.apply(cfg, {"output.name": free})
    return cfg, resume


def _check_same_command(saved: config_lib.RunConfig, flags: dict, names: dict, run) -> None:
    """A run continued by re-running its command must get the settings it started with."""
    if flags.get("train.recipe") == "auto":  # picked by the hardware: the run has the one used
        flags = {k: v for k, v in flags.items() if k != "train.recipe"}
    given = config_lib.apply(saved, {k: v for k, v in flags.items()
                                     if not k.startswith(("runtime.", "output."))})
    if "data.path" in flags and "://" not in flags["data.path"]:
        given = config_lib.apply(given, {"data.path": os.path.abspath(flags["data.path"])})
    differ = [f"{names.get(k, k)} {_get(given, k)!r} (the run has {_get(saved, k)!r})"
              for k in flags if not k.startswith(("runtime.", "output."))
              and _get(given, k) != _get(saved, k)]
    if differ:
        raise UserError(f"run {str(run)!r} exists with other settings: {'; '.join(differ)}; "
                        f"continue it with `corolla train --resume {run}` or choose another "
                        f"--name")


def _get(cfg: config_lib.RunConfig, key: str):
    section, _, name = key.partition(".")
    return getattr(getattr(cfg, section), name)


def train(config_file: str | None = None, flags: dict | None = None, names: dict | None = None,
          resume: str | Path | None = None, log=print) -> tuple[Path | None, dict | None]:
    """`corolla train`: trains, evaluates on val and writes submission.csv (`corolla.flow`).
    Returns (run folder, val metrics); (None, None) on a worker that is not the chief."""
    from corolla import runtime

    cfg, resume = train_config(config_file, flags, names, resume, log)
    if not cfg.data.path:
        given = (names or {}).get("data.path", "--data")
        raise UserError(f"no data given; pass {given} with a folder holding tfrecords-jpeg-SxS/ "
                        f"(or data.path in --config)")
    plan = runtime.detect_for(cfg)  # first: it picks the Keras backend
    if resume is None:  # a new run: defaults < recipe < --config < flags, by accelerator
        from corolla import recipes

        name = cfg.output.name  # (a saved config's name may have been replaced by a free one)
        cfg, plan, recipe = recipes.for_plan(config_file, flags, names, plan)
        cfg = config_lib.apply(cfg, {"output.name": name})
        log(f"recipe {recipe.name}: {recipe.description}")
    from corolla.flow import train_evaluate_predict

    return train_evaluate_predict(cfg, plan, log=log, resume=resume)


def inference_plan(run, flags: dict | None = None, names: dict | None = None):
    """The plan to evaluate or predict with a trained run on this machine: the run's config
    with this machine's strategy and its own batch, unless runtime or batch settings say
    otherwise (other settings are the run's own and are ignored)."""
    from corolla import kfold, runtime

    kfold.refuse_parent(run)  # a k-fold parent holds fold runs, not a model
    _, run_cfg = rundir.load(run)
    flags = {k: v for k, v in (flags or {}).items() if k.startswith(("runtime.", "train."))}
    cfg = config_lib.apply(run_cfg, {"runtime.strategy": "auto", "train.global_batch_size": 0,
                                     **flags}, names or {})
    return runtime.detect_for(cfg)  # first: it picks the Keras backend


def evaluate(run, flags: dict | None = None, names: dict | None = None,
             data: str | None = None, out: str | Path | None = None, tta: int = 1,
             log=print) -> dict:
    """`corolla evaluate`: scores the run on val (metrics.json, pictures, predictions,
    report.html); returns the metrics. `tta`: test-time augmentation views (1: none)."""
    from corolla.evaluation import tta as tta_lib

    tta_lib.check(tta)  # before the run is opened and a backend picked
    plan = inference_plan(run, flags, names)
    from corolla.evaluation import evaluate as evaluate_lib

    return evaluate_lib.evaluate_run(run, plan, data_path=data, out=out, log=log, tta=tta)


def predict(run, flags: dict | None = None, names: dict | None = None,
            data: str | None = None, out: str | Path | None = None, force: bool = False,
            tta: int = 1, log=print) -> Path:
    """`corolla predict`: writes the run's checked submission.csv; returns its path. `tta`:
    test-time augmentation views (1: none)."""
    from corolla.evaluation import tta as tta_lib

    tta_lib.check(tta)
    plan = inference_plan(run, flags, names)
    from corolla.evaluation import predict as predict_lib

    return predict_lib.predict_run(run, plan, data_path=data, out=out, force=force, log=log,
                                   tta=tta)


def report(folder) -> Path:
    """`corolla report`: writes FOLDER/report.html from what the folder holds."""
    from corolla.report import html as html_report

    return html_report.write(folder)
