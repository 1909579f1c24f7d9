"""The example notebooks (examples/*.ipynb) run top to bottom in their tiny mode (no Kaggle
data, no photos folder: synthetic data, offline, on a CPU), executed by a real Jupyter kernel in
an empty working folder, and say what a user reads: the macro F1, the run folder, the
submission or the exported model. Stored without outputs, so a diff shows only code."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from corolla.runs import paths

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))


def _execute(name: str, cwd: Path, monkeypatch) -> str:
    """Runs examples/NAME in a fresh kernel with `cwd` as its working folder; returns every
    output's text, stream and plain-text results alike."""
    import nbclient  # the test extra's: CI must run the notebooks, not skip them
    import nbformat

    from corolla.data import datasets

    # The kernel inherits the environment: its own cache, and the `corolla` of this
    # interpreter for the notebook's `!corolla` cells.
    monkeypatch.setenv(datasets.CACHE_ENV, str(cwd / "cache"))
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent),
                                                os.environ.get("PATH", "")]))
    notebook = nbformat.read(EXAMPLES / name, as_version=4)
    nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}}).execute()
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "\n".join(texts)


def test_the_notebooks_are_stored_without_outputs():
    assert {p.name for p in NOTEBOOKS} == {"petals_to_the_metal.ipynb", "your_photos.ipynb"}
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, path.name


# 33 s: CI's large step. The README's suite runs the photos notebook (22 s), and the petals
# notebook's calls in tests/end_to_end/test_notebook_and_report.py.
@pytest.mark.large
def test_petals_notebook_trains_evaluates_and_writes_the_submission(tmp_path, monkeypatch):
    text = _execute("petals_to_the_metal.ipynb", tmp_path, monkeypatch)
    assert "tiny mode (synthetic data)" in text
    assert re.search(r"^backend +\w+", text, re.M), text  # !corolla info
    assert re.search(r"val macro F1 \d\.\d{4}, accuracy \d\.\d{4} on 32 images", text), text
    assert (tmp_path / "runs" / "petals" / paths.MODEL).is_file()
    lines = (tmp_path / "submission.csv").read_text().splitlines()
    assert lines[0] == "id,label" and len(lines) == 1 + 20  # the tiny test split
    assert "20 rows in submission.csv" in text


@pytest.mark.slow
def test_photos_notebook_fine_tunes_evaluates_and_exports(tmp_path, monkeypatch):
    text = _execute("your_photos.ipynb", tmp_path, monkeypatch)
    assert "tiny mode (drawn photos, offline)" in text
    assert re.search(r"val macro F1 \d\.\d{4}, accuracy \d\.\d{4} on \d+ photos", text), text
    run = tmp_path / "runs" / "my-photos"
    assert (run / paths.MODEL).is_file()
    assert re.search(r"tiny_photos/aster/00\.jpg +(aster|bluebell|crocus) \d\.\d{3}", text), text
    exported = run / "export-tflite"
    assert (exported / "model.tflite").is_file() and (exported / "classes.txt").is_file()
    assert "Run('runs/my-photos'" in text
    assert "INFO:tensorflow" not in text and "absl::InitializeLog" not in text  # quiet
