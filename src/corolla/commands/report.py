"""`corolla report`: FOLDER/report.html from what a scored folder holds."""

from __future__ import annotations

from pathlib import Path

from corolla.report import html as html_report


def report(folder) -> Path:
    """Writes FOLDER/report.html (a run, an eval-* folder, an ensemble, a k-fold parent)."""
    return html_report.write(folder)


HELP = ("write RUN/report.html: metrics, per-class table, every picture, config, plan and "
        "timings in one file that opens offline")


def add_arguments(p) -> None:
    p.add_argument("run", help="a run folder after `corolla evaluate`, an eval-* folder or an "
                   "ensemble folder")


def main(args) -> int:
    print(f"wrote {report(args.run)}")
    return 0
