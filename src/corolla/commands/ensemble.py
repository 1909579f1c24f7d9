"""`corolla ensemble RUN...`: several runs' saved probabilities blended (`flows.ensemble`)."""

from __future__ import annotations

from corolla.flows.ensemble import ensemble_run


HELP = ("blend several runs' saved probabilities, weights chosen on val: a new folder with "
        "metrics, predictions and submission.csv")


def add_arguments(p) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (or other folders "
                   "holding predictions/val.npz) after `corolla evaluate` and `corolla predict`")
    p.add_argument("--weights", default="auto", help="auto (best val macro F1) or one number "
                   "per run, e.g. 0.6,0.4 (normalised to sum to 1); default auto")
    p.add_argument("--out", help="the new folder to write (default: runs/ensemble-<timestamp>); "
                   "never an existing one")


def main(args) -> int:
    ensemble_run(args.runs, weights=args.weights, out=args.out)
    return 0
