"""`corolla evaluate RUN`: the run scored on val, or on other data (`flows.evaluate`)."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.flows.evaluate import evaluate


HELP = "score a run on val: metrics.json and plots"


def add_arguments(p) -> None:
    arguments.scored_run(p)
    p.add_argument("--out", help="folder for metrics.json and the plots (default: the run "
                   "folder; RUN/eval-<data folder>/ for --data elsewhere)")
    p.add_argument("--fit-bias", action="store_true", help="then fit one offset per class to "
                   "the log-probabilities that maximises macro F1 on val (a k-fold run: on its "
                   "out-of-fold predictions) into RUN/bias.json, and report the held-out gain")
    arguments.tta(p)
    arguments.runtime(p)
    arguments.batch(p, " for inference")


def main(args) -> int:
    evaluate(args.run, arguments.settings(args), data=args.data, out=args.out, tta=args.tta,
             fit_bias=args.fit_bias)
    return 0
