"""`corolla check-submission`: a submission CSV against a data set's test split
(`flows.check_submission`)."""

from __future__ import annotations

from corolla.flows.check_submission import check_submission


HELP = ("check a submission.csv against a data set's test split: header, every test id once, "
        "labels in the class range")


def add_arguments(p) -> None:
    p.add_argument("file", help="the CSV file to check")
    p.add_argument("--data", required=True, help="the data folder (tfrecords-jpeg-SxS/ with a "
                   "test split, and its classes.txt if any)")


def main(args) -> int:
    check_submission(args.file, args.data)
    return 0
