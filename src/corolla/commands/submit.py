"""`corolla submit`: a run's checked submission.csv sent to a Kaggle competition."""

from __future__ import annotations

from corolla.flows.submit import submit_run


HELP = ("send a run's submission.csv to a Kaggle competition (checked first; needs the kaggle "
        "package and credentials)")


def add_arguments(p) -> None:
    p.add_argument("run", help="a run or ensemble folder holding submission.csv (after "
                   "`corolla predict`), or a submission CSV file beside predictions/test.npz")
    p.add_argument("--competition", required=True, metavar="SLUG",
                   help="the competition's name in its URL, e.g. tpu-getting-started")
    p.add_argument("-m", "--message", required=True, help="the submission's description")


def main(args) -> int:
    submit_run(args.run, args.competition, args.message)
    return 0
