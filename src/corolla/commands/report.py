"""`corolla report`: FOLDER/report.html from what a scored folder holds."""

from __future__ import annotations

from corolla.flows.report import report


HELP = ("write RUN/report.html: metrics, per-class table, every picture, config, plan and "
        "timings in one file that opens offline")


def add_arguments(p) -> None:
    p.add_argument("run", help="a run folder after `corolla evaluate`, an eval-* folder or an "
                   "ensemble folder")


def main(args) -> int:
    print(f"wrote {report(args.run)}")
    return 0
