"""The `corolla` command. Thin: it parses flags into a RunConfig and calls library functions.

A user mistake ends with one line on stderr and exit status 2; a bug keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from corolla import __version__
from corolla import config as config_lib
from corolla import rundir
from corolla.errors import DATA_ERROR, UserError

# Flag destination -> config key: the one place where flags meet the config.
FLAG_KEYS = {
    "data": "data.path", "image_size": "data.image_size", "augment": "data.augment",
    "cache": "data.cache", "model": "model.name", "weights": "model.weights",
    "train_backbone": "model.train_backbone", "epochs": "train.epochs",
    "batch_size": "train.batch_size", "global_batch_size": "train.global_batch_size",
    "learning_rate": "train.learning_rate", "steps_per_epoch": "train.steps_per_epoch",
    "seed": "train.seed", "deterministic": "train.deterministic",
    "backend": "runtime.backend", "strategy": "runtime.strategy",
    "precision": "runtime.precision", "runs_dir": "output.runs_dir", "name": "output.name",
    "skip_bad_records": "data.skip_bad_records",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the usage block too)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _runtime_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("runtime")
    g.add_argument("--backend", choices=config_lib.BACKENDS,
                   help="Keras backend (default: auto, or KERAS_BACKEND)")
    g.add_argument("--strategy", choices=config_lib.STRATEGIES,
                   help="distribution strategy (default: auto, from the hardware)")
    g.add_argument("--precision", choices=config_lib.PRECISIONS,
                   help="dtype policy (default: auto, from the hardware)")


def _batch_flags(p: argparse.ArgumentParser, note: str = "") -> None:
    g = p.add_argument_group("batch")
    g.add_argument("--batch-size", type=int, help=f"per-replica batch (default 16: the "
                   f"tutorial's 16 x REPLICAS){note}")
    g.add_argument("--global-batch-size", type=int, help=f"fixed global batch, split over the "
                   f"replicas (default: per-replica x replicas){note}")


def _train_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML file with [data] [model] [train] [runtime] [output]")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run from its last "
                   "completed epoch, with its own config and global batch (runtime flags may "
                   "change)")
    p.add_argument("--data", help="folder (local or gs://) holding tfrecords-jpeg-SxS/")
    p.add_argument("--image-size", type=int, help="which tfrecords-jpeg-SxS to read")
    p.add_argument("--model", help="registered model name (corolla info --models), or "
                   "hub:PRESET: a keras-hub preset name or local preset folder")
    p.add_argument("--weights", help="none, imagenet (Keras downloads it; a hub preset's own "
                   "weights), or a local backbone weights file")
    p.add_argument("--freeze-backbone", dest="train_backbone", action="store_false",
                   default=None, help="train only the classifier head")
    defaults = config_lib.RunConfig()
    p.add_argument("--epochs", type=int, help=f"default {defaults.train.epochs}")
    p.add_argument("--lr", dest="learning_rate", type=float,
                   help="peak learning rate (default: the model's)")
    p.add_argument("--steps-per-epoch", type=int, help="default: one pass over train")
    p.add_argument("--seed", type=int, help=f"seeds initialisation, order and augmentation "
                   f"(default {defaults.train.seed})")
    p.add_argument("--deterministic", action="store_true", default=None,
                   help="ordered reads and TensorFlow op determinism: the same seed gives a "
                        "bit-identical run on the same machine (slower input)")
    p.add_argument("--no-augment", dest="augment", action="store_false", default=None,
                   help="train without augmentation (default: flips, zoom-crops, colour)")
    p.add_argument("--cache", action="store_true", default=None,
                   help="keep decoded training images in memory")
    p.add_argument("--skip-bad-records", action="store_true", default=None,
                   help="skip damaged records (images that do not decode, a file's damaged "
                        "tail) and count them per file at the end, instead of stopping")
    p.add_argument("--runs-dir", help="where run directories go (default: runs)")
    p.add_argument("--name", help="run directory name inside --runs-dir (default: "
                   "<model>-<timestamp>)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="corolla", description="Train, evaluate and submit flower "
                     "classifiers on TPUs, GPUs or CPUs.")
    parser.add_argument("--version", action="version", version=f"corolla {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("info", help="hardware, backend, strategy, replicas, global batch")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--models", action="store_true", help="list the registered models")
    _runtime_flags(p)
    _batch_flags(p)

    p = sub.add_parser("demo", help="offline: synthetic petals -> train -> evaluate -> submit")
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "corolla"),
                   help="where the synthetic data set is generated (default ~/.cache/corolla)")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--name", default="")
    p.add_argument("--epochs", type=int)
    p.add_argument("--tiny", action="store_true", help="a few dozen images, one epoch (tests)")
    _runtime_flags(p)
    _batch_flags(p)

    p = sub.add_parser("train", help="train on data in the competition layout, then evaluate "
                       "on val and write submission.csv")
    _train_flags(p)
    _batch_flags(p, "; not with --resume: a run keeps its global batch")
    _runtime_flags(p)

    for name, text in (("evaluate", "score a run on val: metrics.json and plots"),
                       ("predict", "write a run's submission.csv for the test split")):
        p = sub.add_parser(name, help=text)
        p.add_argument("run", help="a run directory, e.g. runs/small_cnn-20261122-101500")
        p.add_argument("--data", help="read the data from here instead of the run's data path")
        if name == "predict":
            p.add_argument("--out", help="submission file (default: RUN/submission.csv); never "
                           "another file of the run")
            p.add_argument("--force", action="store_true",
                           help="let --out replace an existing file")
        else:
            p.add_argument("--out", help="folder for metrics.json and the plots (default: the "
                           "run folder; RUN/eval-<data folder>/ for --data elsewhere)")
        _runtime_flags(p)
        _batch_flags(p, " for inference")

    p = sub.add_parser("ensemble", help="blend several runs' saved probabilities, weights chosen "
                       "on val: a new folder with metrics, predictions and submission.csv")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (or other folders "
                   "holding predictions/val.npz) after `corolla evaluate` and `corolla predict`")
    p.add_argument("--weights", default="auto", help="auto (best val macro F1) or one number "
                   "per run, e.g. 0.6,0.4 (normalised to sum to 1); default auto")
    p.add_argument("--out", help="the new folder to write (default: runs/ensemble-<timestamp>); "
                   "never an existing one")

    p = sub.add_parser("check-submission", help="check a submission.csv against a data set's "
                       "test split: header, every test id once, labels in the class range")
    p.add_argument("file", help="the CSV file to check")
    p.add_argument("--data", required=True, help="the data folder (tfrecords-jpeg-SxS/ with a "
                   "test split, and its classes.txt if any)")
    for p in sub.choices.values():  # error messages name a value's flag, not its config key
        p.set_defaults(flag_names={a.dest: a.option_strings[-1] for a in p._actions
                                   if a.option_strings})
    return parser


def overrides(args: argparse.Namespace) -> dict:
    return {key: getattr(args, dest) for dest, key in FLAG_KEYS.items()
            if getattr(args, dest, None) is not None}


def labels(args: argparse.Namespace) -> dict[str, str]:
    """Config key -> the flag that set it, for error messages ("--epochs must be ...")."""
    names = getattr(args, "flag_names", {})
    return {key: names[dest] for dest, key in FLAG_KEYS.items() if dest in names}


def _info(args) -> int:
    from corolla import models, runtime

    if args.models:
        print(f"{'model':20s} {'size':>6s} {'params':>7s}  imagenet  description")
        for name in models.names():
            spec = models.get(name)
            print(f"{name:20s} {spec.image_size:4d}px {spec.params / 1e6:6.1f}M  "
                  f"{'yes' if spec.imagenet else 'no':8s}  {spec.description}")
        print(f"{'hub:PRESET':20s} {'':6s} {'':7s}  {'preset':8s}  a keras-hub image classifier "
              f"preset or local preset folder (pip install \"corolla[hub]\")")
        return 0
    cfg = config_lib.load(overrides=overrides(args), labels=labels(args))
    plan = runtime.detect_for(cfg)
    info = plan.to_dict()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    hw = info["hardware"]
    found = (f"TPU ({hw['tpu']}, {hw['tpu_cores']} cores)" if hw["tpu"] else
             f"{hw['gpus']} GPU(s)" if hw["gpus"] else
             f"{hw['jax_devices']} {hw['jax_platform'].upper()} device(s) via JAX"
             if hw["jax_platform"] in ("tpu", "gpu") else
             f"CPU ({hw['cpu_devices']} logical device(s))")
    print(f"hardware     {found}")
    print(f"backend      {info['backend']}")
    print(f"strategy     {info['strategy']}")
    print(f"REPLICAS     {info['replicas']}")
    print(f"processes    {info['num_processes']} (this is #{info['process_id']}"
          f"{', chief' if info['is_chief'] else ''})")
    print(f"batch        {info['batch_per_replica']} per replica -> global {info['global_batch']}")
    print(f"precision    {info['precision']}")
    return 0


def _demo(args) -> int:
    from corolla import demo

    flags = overrides(args)
    if args.epochs is not None:
        flags["train.epochs"] = args.epochs
    run_dir, metrics = demo.run(args.cache_dir, args.runs_dir, tiny=args.tiny, name=args.name,
                                overrides=flags)
    if run_dir is not None:
        print(f"demo finished: val macro F1 {metrics['f1_macro']:.4f}; everything is in {run_dir}")
    return 0


def _check_same_command(saved: config_lib.RunConfig, flags: dict, names: dict, run) -> None:
    """A run continued by re-running its command must get the settings it started with."""
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


def _train(args) -> int:
    from corolla import runtime

    resume, flags, names = None, overrides(args), labels(args)
    if args.resume:
        fixed = sorted(names.get(k, k) for k in flags if not k.startswith("runtime."))
        if fixed or args.config:
            raise UserError(f"--resume continues a run with its own config and global batch; "
                            f"drop {', '.join(fixed) or '--config'} (only runtime flags may "
                            f"change)")
        resume, run_cfg = rundir.load_unfinished(args.resume)
        cfg = config_lib.apply(run_cfg, flags, names)
    else:
        cfg = config_lib.load(args.config, flags, names)
        again = Path(cfg.output.runs_dir) / cfg.output.name
        if "output.name" in flags and rundir.status(again) != rundir.FINISHED_STATUS \
                and (again / rundir.CONFIG).is_file():
            # The same named command after a kill (preemption): continue that run.
            resume, run_cfg = rundir.load_unfinished(again)
            _check_same_command(run_cfg, flags, names, again)
            print(f"run {str(again)!r} exists and did not finish: continuing it (as --resume)")
            cfg = config_lib.apply(run_cfg, {k: v for k, v in flags.items()
                                             if k.startswith("runtime.")}, names)
        elif args.config and "output.name" not in flags and cfg.output.name:
            # A saved config (runs/X/config.toml) names its own run: a rerun gets a fresh one.
            free = rundir.free_name(cfg.output.runs_dir, cfg.output.name)
            if free != cfg.output.name:
                print(f"run name {cfg.output.name!r} from {args.config} is taken; this run is "
                      f"{free!r}")
                cfg = config_lib.apply(cfg, {"output.name": free})
    if not cfg.data.path:
        raise UserError("no data given; pass --data with a folder holding tfrecords-jpeg-SxS/ "
                        "(or data.path in --config)")
    plan = runtime.detect_for(cfg)  # first: it picks the Keras backend
    from corolla.flow import train_evaluate_predict

    run_dir, _ = train_evaluate_predict(cfg, plan, resume=resume)
    if run_dir is not None:
        print(f"done: {run_dir}")
    return 0


def _inference(args) -> int:
    from corolla import runtime

    _, run_cfg = rundir.load(args.run)
    flags = {k: v for k, v in overrides(args).items() if k.startswith(("runtime.", "train."))}
    # Inference runs on this machine's plan, with its own batch unless one is given.
    cfg = config_lib.apply(run_cfg, {"runtime.strategy": "auto", "train.global_batch_size": 0,
                                     **flags}, labels(args))
    plan = runtime.detect_for(cfg)  # first: it picks the Keras backend
    from corolla import evaluate, predict

    if args.command == "evaluate":
        evaluate.evaluate_run(args.run, plan, data_path=args.data, out=args.out)
    else:
        predict.predict_run(args.run, plan, data_path=args.data, out=args.out, force=args.force)
    return 0


def _ensemble(args) -> int:
    from corolla import ensemble

    ensemble.ensemble_run(args.runs, weights=args.weights, out=args.out)
    return 0


def _check_submission(args) -> int:
    from corolla import submission
    from corolla.data import layout as layout_lib
    from corolla.data import pipeline

    layout = layout_lib.open_layout(args.data)
    test_ids = pipeline.metadata(layout.split("test"))["ids"]
    problems = submission.check(args.file, test_ids, len(layout.class_names))
    if problems:
        raise UserError(submission.describe(args.file, problems))
    print(f"{args.file}: OK, {submission.row_count(args.file)} rows: every test id of "
          f"{layout.size_dir} once, labels in [0, {len(layout.class_names)})")
    return 0


COMMANDS = {"info": _info, "demo": _demo, "train": _train, "evaluate": _inference,
            "predict": _inference, "ensemble": _ensemble, "check-submission": _check_submission}


def main(argv: list[str] | None = None) -> int:
    from corolla.runtime import tflog
    from corolla.runtime.hardware import quiet_logs

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version, or a flag error (already printed)
        return e.code
    quiet_import = tflog.quiet_tensorflow_import()  # before quiet_logs() sets the level
    quiet_logs()
    try:
        with quiet_import:
            return COMMANDS[args.command](args)
    except UserError as e:
        print(f"corolla: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        # Bad records surface inside tf.data as TensorFlow errors: ours are assertions whose data
        # (strings, joined here) start with the marker: "assertion failed: [corolla data error:
        # ] [WHAT] [...]". TensorFlow's own (a JPEG that does not decode, a damaged file) name
        # no file, so the data is searched.
        message = str(e)
        if DATA_ERROR in message:
            import re

            line = message[message.index(DATA_ERROR):].splitlines()[0]
            what = "".join(re.findall(r"\[([^\]]*)\]", f"[{line}"))[len(DATA_ERROR) + 1:]
            what = what.strip()
        elif type(e).__module__.startswith("tensorflow"):
            from corolla.data import check

            what = check.explain(e, note=lambda note: print(note, file=sys.stderr))
            if what is None:
                raise
        else:
            raise
        print(f"corolla: error: {what}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        run_dir = getattr(e, "run_dir", None)
        hint = f"; continue with: corolla train --resume {run_dir}" if run_dir else ""
        print(f"corolla: interrupted{hint}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
