"""`corolla train`: the run's config (defaults < recipe < --config < flags, by accelerator; or
the config of the run it continues), then one run end to end (`commands.run`) or a k-fold run
(`commands.kfold`).

Settings arrive as `flags` (config key -> value, e.g. {"train.epochs": 3}) with `names` (config
key -> how the user wrote it: "--epochs" on the command line, "epochs=" from Python; see
`config.flags`), so that errors name what the user typed.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from corolla import config as config_lib
from corolla import models, runtime
from corolla.commands import arguments, check_data
from corolla.config import flags as flags_lib
from corolla.config import recipe as recipe_lib
from corolla.config.range_test import RangeSettings
from corolla.data.prepare import sources
from corolla.errors import UserError
from corolla.files import absolute
from corolla.models import hub
from corolla.models.registry import HUB_PREFIX
from corolla.report import html as html_report
from corolla.runs import kfold as kfold_rule
from corolla.runs import paths, rundir, tracking
from corolla.runtime.decide import UNKNOWN_ACTIVATIONS, choose_batch


# What a continued run may change: where and how it runs, and whether it skips damaged records
# (what the error about a damaged record met mid-training advises). Nothing else: the run is
# its config.
SESSION = ("runtime.", "data.skip_bad_records")


def _continued(run: Path, run_cfg: config_lib.RunConfig, flags: dict, names: dict):
    """The config of a continued run (`run_cfg`, its config.toml) with the session settings of
    `flags`; a changed data.skip_bad_records is saved into config.toml, which evaluate and
    predict read (the runtime ones are this session's only)."""
    cfg = config_lib.apply(run_cfg, {k: v for k, v in flags.items() if k.startswith(SESSION)},
                           names)
    if cfg.data.skip_bad_records != run_cfg.data.skip_bad_records:
        config_lib.save(config_lib.apply(run_cfg, {
            "data.skip_bad_records": cfg.data.skip_bad_records}), run / paths.CONFIG)
    return cfg


def train_config(config_file: str | config_lib.ConfigFile | None = None, flags: dict | None = None,
                 names: dict | None = None, resume: str | Path | None = None,
                 log=print) -> tuple[config_lib.RunConfig, Path | None]:
    """(the config of the run to train, the unfinished run folder it continues or None).
    `resume`: continue that run with its own config (only `SESSION` settings may change). A run
    named like an unfinished one that has the same settings continues it too (the same command
    after a kill); a config file's own run name, if taken, gets a fresh one."""
    flags, names = dict(flags or {}), dict(names or {})
    if "train.epochs" in flags and "train.time_budget" in flags:
        # Both fix the length of training: neither silently wins.
        raise UserError(f"{names.get('train.epochs', '--epochs')} and "
                        f"{names.get('train.time_budget', '--time')} both set how long to "
                        f"train; give one (with the time, the epochs follow from it)")
    if "train.time_budget" in flags and not resume:
        # A budget given is planned anew: a saved config's plan (`--config runs/X/config.toml`)
        # was its own budget's.
        flags["train.time_plan"], flags["train.time_steps"] = "", 0
    if resume:
        fixed = sorted(names.get(k, k) for k in flags if not k.startswith(SESSION))
        if fixed or config_file:
            raise UserError(f"{names.get('resume', '--resume')} continues a run with its own "
                            f"config and global batch; drop "
                            f"{', '.join(fixed) or names.get('config', '--config')} (only "
                            f"runtime flags and "
                            f"{names.get('data.skip_bad_records', '--skip-bad-records')} may "
                            f"change)")
        resume, run_cfg = rundir.load_unfinished(resume)
        return _continued(resume, run_cfg, flags, names), resume
    cfg = config_lib.load(config_file, flags, names)
    again = Path(cfg.output.runs_dir) / cfg.output.name
    if "output.name" in flags and rundir.status(again) == rundir.FINISHED_STATUS:
        # Said first, before the backend is chosen (a finished run is never the folder this
        # command's chief has just made; other taken names are checked on the chief, in `train`).
        rundir.check_free(cfg.output.runs_dir, cfg.output.name)
    if "output.name" in flags and rundir.status(again) != rundir.FINISHED_STATUS \
            and (again / paths.CONFIG).is_file():
        # The same named command after a kill (preemption): continue that run.
        resume, run_cfg = rundir.load_unfinished(again)
        _check_same_command(run_cfg, flags, names, again)
        log(f"run {str(again)!r} exists and did not finish: continuing it (as --resume)")
        cfg = _continued(resume, run_cfg, flags, names)
    elif config_file and "output.name" not in flags and cfg.output.name:
        # A saved config (runs/X/config.toml) names its own run: a rerun gets a fresh one.
        free = rundir.free_name(cfg.output.runs_dir, cfg.output.name)
        if free != cfg.output.name:
            log(f"run name {cfg.output.name!r} from {config_file} is taken; this run is "
                f"{free!r}")
            cfg = config_lib.apply(cfg, {"output.name": free})
    return cfg, resume


def check_first(cfg: config_lib.RunConfig, config_file: config_lib.ConfigFile | None,
                flags: dict, names: dict | None, resume: Path | None = None) -> None:
    """What can be checked without work, before the backend (and TensorFlow), the recipe's
    resolution, a data conversion or a time probe: a new run's local data path can be data
    (`sources.check_source`: it exists, a CSV has the columns, a folder an image), its model is
    known, its local weights exist, keras-hub is installed where the model or the weights need
    it; a continued run's model can be built here. The model is the one asked for, else the
    named recipe's (`recipe auto` chooses one later, and says which)."""
    names = names or {}
    if resume is not None:
        hub.require(cfg.model.name, f"run {str(resume)!r} (model {cfg.model.name})")
        return
    sources.check_source(cfg.data.path)
    asked = _asked(config_file, flags)
    recipe = recipe_lib.load(cfg.train.recipe).values if cfg.train.recipe != "auto" and \
        recipe_lib.is_read(config_file) else {}
    model = asked.get("model.name") or recipe.get("model.name") or \
        (cfg.model.name if cfg.train.recipe != "auto" else None)
    weights = asked.get("model.weights", recipe.get("model.weights"))
    models.check_choice(model, weights, _as_given(names, asked, cfg, "model.name", model),
                        _as_given(names, asked, cfg, "model.weights", weights))


def _as_given(names: dict, asked: dict, cfg: config_lib.RunConfig, key: str, value) -> str:
    """How a message names a model or weights setting: as the user wrote it (`--model X`,
    `model="X"`), else as the recipe's (`recipe R's model X`)."""
    word = {"model.name": "model", "model.weights": "weights"}[key]
    if key in asked:
        return flags_lib.as_written(names.get(key, f"--{word}"), value)
    return f"recipe {cfg.train.recipe}'s {word} {value}"


def _check_same_command(saved: config_lib.RunConfig, flags: dict, names: dict, run) -> None:
    """A run continued by re-running its command must get the settings it started with."""
    if flags.get("train.recipe") == "auto":  # picked by the hardware: the run has the one used
        flags = {k: v for k, v in flags.items() if k != "train.recipe"}
    flags = {k: v for k, v in flags.items()  # (set above, not given)
             if k not in ("train.time_plan", "train.time_steps")}
    given = config_lib.apply(saved, {k: v for k, v in flags.items()
                                     if not k.startswith((*SESSION, "output."))})
    if "data.path" in flags:
        given = config_lib.apply(given, {"data.path": absolute(flags["data.path"])})
    if "train.recipe" in flags:  # a recipe file by any spelling of its path
        given = config_lib.apply(given, {"train.recipe": recipe_lib.canonical(
            flags["train.recipe"])})
    differ = [f"{names.get(k, k)} {_get(given, k)!r} (the run has {_get(saved, k)!r})"
              for k in flags if not k.startswith((*SESSION, "output."))
              and _get(given, k) != _get(saved, k)]
    if differ:
        raise UserError(f"run {str(run)!r} exists with other settings: {'; '.join(differ)}; "
                        f"continue it with `corolla train --resume {run}` or choose another "
                        f"{names.get('output.name', '--name')}")


def _get(cfg: config_lib.RunConfig, key: str):
    section, _, name = key.partition(".")
    return getattr(getattr(cfg, section), name)


def for_plan(config_file: str | config_lib.ConfigFile | None, flags: dict, names: dict | None,
             plan, log=print):
    """(config, plan, recipe) of a new run: `recipe.compose` for the accelerator of `plan`
    (detected from the config without its recipe: the hardware decides "auto"; on a CPU, also
    whether pre-trained weights can be had; on a GPU or TPU, `accelerator_auto`), and the plan
    with the batch the recipe sets."""
    config_file = config_lib.config_file(config_file)  # one parse for every step below
    auto = config_lib.load(config_file, flags, names).train.recipe == "auto"
    if auto and plan.accelerator == "cpu":
        name, why = cpu_auto(config_file, flags)
        log(f"recipe auto on a CPU: {name} ({why})")
        flags = {**flags, "train.recipe": name}
    elif auto:
        decided, why = accelerator_auto(config_file, flags, plan)
        log(f"recipe auto on a {plan.accelerator.upper()}: {decided['train.recipe']} ({why})")
        flags = {**flags, **decided}  # decided holds none of the user's keys but these two
    config, recipe = recipe_lib.compose(config_file, flags, names, plan.accelerator)
    return (config, plan.with_batch(config.train.batch_size, config.train.global_batch_size),
            recipe)


def cpu_auto(config_file: str | config_lib.ConfigFile | None, flags: dict) -> tuple[str, str]:
    """(the recipe "auto" stands for on a CPU, why): cpu-finetune when the weights of its model
    (or of the --model asked) can be had now (`models.weights_available`: a local copy, a
    cache, or a download decided in seconds), else the from-scratch cpu recipe."""
    asked = _asked(config_file, flags)
    finetune = recipe_lib.load(recipe_lib.CPU_FINETUNE).values
    model = asked.get("model.name", finetune["model.name"])
    ok, why = models.weights_available(model, asked.get("model.weights",
                                                        finetune["model.weights"]))
    if ok:
        return recipe_lib.CPU_FINETUNE, f"{model}: {why}"
    _refuse_unavailable(asked, model)
    return recipe_lib.AUTO["cpu"], f"no pre-trained weights to fine-tune, {why}; from scratch"


def _refuse_unavailable(asked: dict, model: str) -> None:
    """`--weights imagenet` asked for and not to be had now is an error, said before the recipe
    is announced: a run "from scratch" announced, then the download tried anyway, is two lines
    of which the second contradicts the first."""
    if asked.get("model.weights") == "imagenet":
        raise UserError(models.weights_unavailable(model))


def _asked(config_file: str | config_lib.ConfigFile | None, flags: dict) -> dict:
    """The config keys the user set: the --config file's, then the flags."""
    asked = config_lib.config_file(config_file).values if config_file else {}
    asked.update(flags)
    return asked


def accelerator_auto(config_file: str | config_lib.ConfigFile | None, flags: dict,
                     plan) -> tuple[dict, str]:
    """(config values, why) of "recipe auto" on a GPU or TPU, decided before training from the
    data, the weights and the card. The values hold no key the user set, except train.recipe
    (auto, decided) and a preset folder's translation (below).

    - the recipe: the accelerator's fine-tuning one when its model's (or --model's) weights can
      be had now (`models.weights_available`, as `cpu_auto`), else the from-scratch `cpu`
      recipe with weights none; a keras-hub preset folder as --weights, without --model, is
      that preset (`hub:FOLDER`);
    - the image size: the recipe's when a TFRecord layout has it, else the layout's nearest; an
      image folder or CSV is converted at the recipe's;
    - the per-replica batch: `runtime.decide.choose_batch`, from the device's memory and the
      model's activations at its input size; the peak learning rate follows it when the
      recipe's scale_lr is "replicas" (a rate per 16 images a replica).
    """
    from corolla.data import layout as layout_lib

    asked = _asked(config_file, flags)
    name = recipe_lib.AUTO[plan.accelerator]
    recipe = recipe_lib.load(name).values
    model = asked.get("model.name", recipe["model.name"])
    weights = asked.get("model.weights", recipe["model.weights"])
    decided = {}
    if "model.name" not in asked and os.path.isdir(weights) and hub.is_preset_folder(weights):
        ok, why = True, f"the keras-hub preset folder {weights}"
        model = f"{HUB_PREFIX}{os.path.abspath(weights)}"
        decided.update({"model.name": model, "model.weights": "imagenet"})
    else:
        ok, why = models.weights_available(model, weights)
        why = f"{model}: {why}" if ok else \
            f"no pre-trained weights to fine-tune, {why}; from scratch"
    if not ok:
        _refuse_unavailable(asked, model)
        name = recipe_lib.AUTO["cpu"]  # the from-scratch recipe
        recipe = recipe_lib.load(name).values
        if "model.weights" not in asked:
            decided["model.weights"] = "none"
        if "model.name" not in asked:
            model = recipe["model.name"]  # the recipe's own model, at its own size
        if model != recipe["model.name"] and "model.input_size" not in asked:
            decided["model.input_size"] = 0  # the model's own size, not the recipe model's
    decided["train.recipe"] = name
    spec = models.get(model)

    size = asked.get("data.image_size") or recipe.get("data.image_size", 0)
    examples, path = 0, asked.get("data.path", "")
    if path and sources.kind_of(path) == "layout":
        sizes = layout_lib.available_sizes(path)
        wanted = size or asked.get("model.input_size") or recipe.get("model.input_size") or \
            spec.image_size
        size = layout_lib.choose_size(sizes, asked.get("data.image_size", 0), wanted)
        if "data.image_size" not in asked and size != recipe.get("data.image_size", size):
            decided["data.image_size"] = size
            why += f"; image size {size} (the data's nearest to {recipe['data.image_size']})"
        examples = layout_lib.open_layout(path, size).split("train").count
    input_size = asked.get("model.input_size", decided.get("model.input_size",
                                                               recipe.get("model.input_size")))
    input_size = min(input_size or size or spec.image_size, size or spec.image_size)

    memory = plan.hardware.device_memory if plan.hardware else 0
    if "train.batch_size" not in asked and "train.global_batch_size" not in asked:
        activations = spec.activations or UNKNOWN_ACTIVATIONS
        batch = choose_batch(memory, input_size, activations, plan.precision,
                             examples, plan.replicas, recipe["train.batch_size"])
        decided["train.batch_size"] = batch
        memory = ("memory unknown: the recipe's" if not memory else
                  f"{memory / 2**30:.0f} GiB" if memory >= 2**30 else f"{memory >> 20} MiB")
        why += (f"; batch {batch} a replica ({memory}, {spec.name} at {input_size} px, "
                f"{plan.precision})")
        if recipe.get("train.scale_lr") == "replicas" and "train.learning_rate" not in asked:
            rate = config_lib.rate(recipe["train.learning_rate"] * batch
                                   / recipe["train.batch_size"])
            decided["train.learning_rate"] = rate
            why += f", peak learning rate {rate:g} x replicas"
    return decided, why


def train(config_file: str | None = None, flags: dict | None = None, names: dict | None = None,
          resume: str | Path | None = None, log=print,
          strict: bool = False) -> tuple[Path | None, dict | None]:
    """`corolla train`: checks the data (once per data set, `commands.check_data`: copies
    across splits are a warning, an error with `strict`), trains, evaluates on val and writes
    submission.csv. Returns (run folder, val metrics; a k-fold run's: its out-of-fold scores);
    (None, None) on a worker that is not the chief."""
    config_file = config_lib.config_file(config_file)  # parsed at its first use, and only then
    flags, lr_find = split_lr_find(flags, names, resume)
    given_resume = resume
    cfg, resume = train_config(config_file, flags, names, resume, log)
    if lr_find is not None and resume is not None and given_resume is None:
        log(f"{_find_flag(names)}: run {str(resume)!r} continues at the rate it has, "
            f"{cfg.train.learning_rate:g}")
        lr_find = None
    if lr_find is not None and cfg.train.folds:
        raise UserError(f"{_find_flag(names)} is not for k-fold runs "
                        f"({names.get('train.folds', '--folds')}); find a rate once with "
                        f"`corolla lr-find --data ...` and pass it as "
                        f"{names.get('train.learning_rate', '--lr')} RATE")
    if not cfg.data.path:
        given = (names or {}).get("data.path", "--data")
        raise UserError(f"no data given; pass {given} with a folder holding tfrecords-jpeg-SxS/ "
                        f"(or data.path in {(names or {}).get('config', '--config')})")
    check_first(cfg, config_file, flags, names, resume)
    plan = runtime.detect_for(cfg)  # first: it picks the Keras backend
    if plan.is_chief:  # a missing package or a server down: one line, before anything runs
        tracking.check(cfg.output.track, cfg.output.runs_dir)
        if resume is None:  # a name taken: said before the recipe, the data check, a probe
            rundir.check_free(cfg.output.runs_dir, cfg.output.name)
    if resume is None:  # a new run: defaults < recipe < --config < flags, by accelerator
        name = cfg.output.name  # (a saved config's name may have been replaced by a free one)
        cfg, plan, recipe = for_plan(config_file, flags, names, plan, log)
        cfg = config_lib.apply(cfg, {"output.name": name})
        log(f"recipe {recipe.name}: {recipe.description}")
    from corolla.data import datasets

    checked = check_data.for_training(cfg.data.path, datasets.features_of(cfg.data), strict,
                                      log=log, skip_bad_records=cfg.data.skip_bad_records)
    if kfold_rule.is_parent(cfg):
        from corolla.commands import kfold

        run_dir, metrics = kfold.train_folds(cfg, plan, log=log, resume=resume)
    else:
        from corolla.commands import run

        run_dir, metrics = run.train_evaluate_predict(cfg, plan, log=log, resume=resume,
                                                      lr_find=lr_find)
    if run_dir is not None and checked is not None:  # the chief: the run keeps its check

        check_data.save_with_run(run_dir, checked)
        html_report.write(run_dir)
    tracking.finish(run_dir, log, [run_dir / paths.REPORT] if run_dir else ())
    return run_dir, metrics


def _find_flag(names: dict | None) -> str:
    """How the user asked for the range test: `--lr find`, `learning_rate="find"`."""
    return flags_lib.as_written((names or {}).get("train.learning_rate", "--lr"), arguments.FIND)


def split_lr_find(flags: dict | None, names: dict | None, resume=None):
    """(the flags without train.learning_rate "find", the range test's settings or None). The
    rate of a continued run is its own: finding one is an error there."""
    flags = dict(flags or {})
    rate = flags.get("train.learning_rate")
    if not (isinstance(rate, str) and rate.strip().lower() == arguments.FIND):
        return flags, None
    if resume:
        raise UserError(f"{_find_flag(names)} finds the rate of a new run; a continued run "
                        f"({(names or {}).get('resume', '--resume')}) keeps the rate it trains "
                        f"at: drop {_find_flag(names)}")
    del flags["train.learning_rate"]
    return flags, RangeSettings()


HELP = "train on data in the competition layout, then evaluate on val and write submission.csv"


def add_arguments(p, lr_find: bool = False) -> None:
    """Train's flags; `lr_find`: those of a run's settings only, for `corolla lr-find` (no
    --resume, --folds, --strict)."""
    _data_and_model_flags(p, resume=not lr_find)
    _schedule_flags(p)
    _run_flags(p, folds=not lr_find)
    _recipe_flags(p)
    if lr_find:
        arguments.batch(p)
        arguments.runtime(p)
        return
    p.add_argument("--strict", action="store_true", help="copies of images across train, val "
                   "and test (found by the data check run before training) are an error, not "
                   "a warning")
    arguments.batch(p, "; not with --resume: a run keeps its global batch")
    arguments.runtime(p)


def main(args) -> int:
    run_dir, _ = train(args.config, *arguments.settings(args), resume=args.resume,
                       strict=args.strict)
    if run_dir is not None:
        print(f"done: {run_dir}")
    return 0


def _recipe_default(key: str) -> str:
    """A train flag's default, which the recipe sets: "default: the recipe's; cpu: 32,
    cpu-finetune: 7" (the values of the recipes `--recipe auto` picks on a CPU)."""
    values = []
    for name in (recipe_lib.AUTO["cpu"], recipe_lib.CPU_FINETUNE):
        config = config_lib.apply(config_lib.RunConfig(), recipe_lib.load(name).values)
        section, _, field = key.partition(".")
        value = getattr(getattr(config, section), field)
        value = ",".join(value) or "none" if isinstance(value, list) else \
            {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
        values.append(f"{name}: {value:g}" if isinstance(value, float) else f"{name}: {value}")
    return f"default: the recipe's; {', '.join(values)}"


def _data_and_model_flags(p, resume: bool = True) -> None:
    p.add_argument("--config", help="TOML file with [data] [model] [train] [runtime] [output]")
    if resume:
        p.add_argument("--resume", metavar="RUN", help="continue an interrupted run from its "
                       "last completed epoch, with its own config and global batch (runtime flags "
                       "may change)")
    p.add_argument("--data", help="folder (local or gs://) holding tfrecords-jpeg-SxS/, or an "
                   "image folder (one subfolder per class) or a CSV of path,label, converted "
                   "once into a cache (see corolla convert)")
    p.add_argument("--image-size", type=int, help="which tfrecords-jpeg-SxS to read (images: "
                   "the size to convert to; default, or 0: the one nearest the input size, or "
                   "the model's)")
    p.add_argument("--model", help="registered model name (corolla info --models), or "
                   "hub:PRESET: a keras-hub preset name or local preset folder; "
                   + _recipe_default("model.name"))
    p.add_argument("--weights", help="none, imagenet (Keras downloads it; a hub preset's own "
                   "weights), a local backbone weights file, or (efficientnet_lite0) a local "
                   "keras-hub preset folder; " + _recipe_default("model.weights"))
    p.add_argument("--input-size", type=int, metavar="S", help="the size the model sees, at "
                   "most: larger images are scaled down to S as they are decoded (0: the "
                   "data's size); " + _recipe_default("model.input_size"))
    p.add_argument("--start-size", type=int, metavar="S", help="progressive resizing: the "
                   "first epochs at S px, growing to the input size over the ramp "
                   "(train.size_ramp_start/end: fractions of the epochs); 0 = off; "
                   + _recipe_default("train.start_size"))
    p.add_argument("--freeze-backbone", dest="train_backbone", action="store_false",
                   default=None, help="train only the classifier head")


def _schedule_flags(p) -> None:
    p.add_argument("--epochs", type=int, help=_recipe_default("train.epochs"))
    p.add_argument("--time", metavar="DURATION", type=arguments.duration,
                   help="train for this long (90s, 10m, 1.5h): "
                   "the recipe's schedule fitted to it, its epochs from a timed probe (not "
                   "with --epochs)")
    p.add_argument("--lr", dest="learning_rate", type=arguments.rate_or_find,
                   metavar="RATE|find", help="peak learning rate, or find: the suggestion of "
                   "a range test on the run's own model first (corolla lr-find); "
                   + _recipe_default("train.learning_rate"))
    p.add_argument("--steps-per-epoch", type=int, help="default, or 0: one pass over train")
    p.add_argument("--seed", type=int, help=f"seeds initialisation, order and augmentation "
                   f"(default {config_lib.RunConfig().train.seed})")
    p.add_argument("--deterministic", action="store_true", default=None,
                   help="ordered reads and TensorFlow op determinism: the same seed gives a "
                        "bit-identical run on the same machine (slower input)")
    arguments.augment(p, _recipe_default("data.augment"))
    p.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                   help="keep decoded training images in memory (--no-cache: decode every "
                        "epoch); " + _recipe_default("data.cache"))
    p.add_argument("--skip-bad-records", action="store_true", default=None,
                   help="skip damaged records (images that do not decode, a file's damaged "
                        "tail) and count them per file at the end, instead of stopping")


def _run_flags(p, folds: bool = True) -> None:
    if folds:
        p.add_argument("--folds", type=int, metavar="K", help="k-fold: train K models on "
                       "train+val split into K stratified folds (RUN/fold-1 ... fold-K), score "
                       "their pooled out-of-fold predictions, average their test "
                       "probabilities; default 0 (off)")
    p.add_argument("--runs-dir", help="where run directories go (default: runs)")
    p.add_argument("--name", help="run directory name inside --runs-dir (default: "
                   "<model>-<timestamp>)")
    p.add_argument("--track", choices=config_lib.TRACKERS, help="also send the run (its "
                   "config, every epoch's figures, the final scores, report.html) to MLflow "
                   "(MLFLOW_TRACKING_URI, else RUNS_DIR/mlflow.db) or Weights & Biases (its "
                   "own environment: WANDB_MODE=offline works without a network); default none")


def _recipe_flags(p) -> None:
    g = p.add_argument_group("recipe and training options (flags override the recipe and "
                             "--config)")
    g.add_argument("--recipe", help=f"auto (default: on CPUs {recipe_lib.CPU_FINETUNE} when "
                   f"pre-trained weights can be had, else {recipe_lib.AUTO['cpu']}; "
                   f"{recipe_lib.AUTO['gpu']} on GPUs and TPUs), a recipe's name "
                   f"({', '.join(recipe_lib.names())}; corolla info --recipes) or a recipe file")
    g.add_argument("--schedule", choices=config_lib.SCHEDULES, help="cosine (per step: "
                   "warm-up, cosine decay) or ramp (the tutorial's per epoch: ramp-up, sustain, "
                   "exponential decay)")
    g.add_argument("--warmup-epochs", type=float, help="epochs of linear ramp-up to the peak; "
                   + _recipe_default("train.warmup_epochs"))
    g.add_argument("--optimizer", choices=config_lib.OPTIMIZERS,
                   help=_recipe_default("train.optimizer"))
    g.add_argument("--weight-decay", type=float, help="decoupled weight decay (not on "
                   "normalization scales and offsets, nor biases); "
                   + _recipe_default("train.weight_decay"))
    g.add_argument("--label-smoothing", type=float, help=_recipe_default("train.label_smoothing"))
    g.add_argument("--dropout", type=float, help="dropout before the classifier head; "
                   + _recipe_default("model.dropout"))
    g.add_argument("--ema", action="store_true", default=None, help="keep an exponential moving "
                   "average of the weights: validated, kept and saved instead of the raw ones")
    _phase_flags(g)
    g.add_argument("--accumulation-steps", type=int, help="average the gradients of N batches "
                   "per update (a larger effective batch when it does not fit)")
    g.add_argument("--early-stopping-patience", type=int, help="stop after N epochs without a "
                   "better val macro F1 (default 0: off)")
    g.add_argument("--class-weight", metavar="none|balanced|FILE", help="weigh the loss per "
                   "class: balanced (inverse class frequency in train) or a file of "
                   "class,weight lines; default none")
    g.add_argument("--refit", action="store_true", default=None, help="once validated, train "
                   "the model again on train + val for the epochs found, and predict the test "
                   "split with it (val scores stay the validated model's; --time covers both)")


def _phase_flags(g) -> None:
    g.add_argument("--frozen-epochs", type=int, help="two-phase fine-tuning: train only the "
                   "head for N epochs (on cached features when the augmentation is none or "
                   "flip), then everything at the rate x --finetune-lr-scale; "
                   + _recipe_default("train.frozen_epochs"))
    g.add_argument("--finetune-lr-scale", type=float,
                   help=_recipe_default("train.finetune_lr_scale"))
    g.add_argument("--unfreeze-fraction", type=float, help="the part of the backbone trained "
                   "once it thaws, from the top (cheaper steps below 1); "
                   + _recipe_default("train.unfreeze_fraction"))
