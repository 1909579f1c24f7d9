"""`corolla demo`: synthetic petals -> train -> evaluate -> predict, offline (`flows.demo`)."""

from __future__ import annotations

from pathlib import Path

from corolla.commands import arguments
from corolla.flows.demo import run


HELP = "offline: synthetic petals -> train -> evaluate -> submit"


def add_arguments(p) -> None:
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "corolla"),
                   help="where the synthetic data set is generated (default ~/.cache/corolla)")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--name", default="")
    p.add_argument("--epochs", type=int)
    p.add_argument("--tiny", action="store_true", help="a few dozen images, one epoch (tests)")
    arguments.runtime(p)
    arguments.batch(p)


def main(args) -> int:
    flags = dict(arguments.settings(args).values)
    if args.epochs is not None:
        flags["train.epochs"] = args.epochs
    run_dir, metrics = run(args.cache_dir, args.runs_dir, tiny=args.tiny, name=args.name,
                           overrides=flags)
    if run_dir is not None:
        from corolla.scoring.metrics import f1_text

        print(f"demo finished: val {f1_text(metrics)}; everything is in {run_dir}")
    return 0
