"""`corolla train`: one run end to end, or a k-fold run, from the flags of a run's settings
(`arguments.train_settings`); the run's config and its training are `flows.train`'s."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.flows.train import done_line, train

HELP = ("train a classifier on your photos (a folder of one subfolder per class, or a CSV of "
        "path,label) or on TFRecords, then evaluate it on val (and write submission.csv when "
        "the data has a test split)")


def add_arguments(p) -> None:
    arguments.train_settings(p)


def main(args) -> int:
    began = getattr(args, "began", None)  # (set by `cli.main`: when the command started)
    run_dir, _ = train(args.config, arguments.settings(args), resume=args.resume,
                       strict=args.strict, began=began)
    if run_dir is not None:
        print(done_line(run_dir, began, resumed=args.resume is not None))
    return 0
