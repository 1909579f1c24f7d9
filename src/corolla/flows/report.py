"""`corolla report`: FOLDER/report.html from what a scored folder holds (a run, an eval-*
folder, an ensemble, a k-fold parent)."""

from __future__ import annotations

from pathlib import Path

from corolla.report import html


def report(folder) -> Path:
    """Writes FOLDER/report.html and returns its path."""
    return html.write(folder)
