"""`corolla report`: FOLDER/report.html from what a scored folder holds."""

from __future__ import annotations

from pathlib import Path


def report(folder) -> Path:
    """Writes FOLDER/report.html (a run, an eval-* folder, an ensemble, a k-fold parent)."""
    from corolla.report import html as html_report

    return html_report.write(folder)
