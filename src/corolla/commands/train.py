"""`corolla train`: one run end to end, or a k-fold run, from the flags of a run's settings
(`arguments.train_settings`); the run's config and its training are `flows.train`'s."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.flows.train import train

HELP = ("train a classifier on your photos (a folder of one subfolder per class, or a CSV of "
        "path,label) or on TFRecords, then evaluate it on val (and write submission.csv when "
        "the data has a test split)")


def add_arguments(p) -> None:
    arguments.train_settings(p)


def main(args) -> int:
    began = getattr(args, "began", None)  # (set by `cli.main`: when the command started)
    train(args.config, arguments.settings(args), resume=args.resume, strict=args.strict,
          began=began)  # (its last line: `flows.train.done_line`)
    return 0
