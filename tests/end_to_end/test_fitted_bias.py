"""Offsets for macro F1 fitted on a run's own held-out predictions, end to end: `corolla
evaluate --fit-bias` then `predict` with the offsets, on the known-answer run and on a k-fold run
(its out-of-fold predictions)."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from corolla.cli import main
from corolla.evaluation import bias
from corolla.runs import paths
from helpers.known_answer import (  # noqa: F401 (data, run: the fixtures)
    TEST_LABELS, data_fixture, run_fixture)


def test_evaluate_fit_bias_then_predict_with_the_offsets(data, run, tmp_path, capsys):
    _, truth = data
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    assert main(["predict", str(copy), "--bias", "fitted"]) == 2
    assert "--fit-bias" in capsys.readouterr().err
    assert main(["evaluate", str(copy), "--fit-bias"]) == 0
    out = capsys.readouterr().out
    assert "95% CI" in out and "held-out macro F1" in out
    m = json.loads((copy / paths.METRICS).read_text())
    low, high = m["f1_macro_ci95"]
    assert low <= m["f1_macro"] <= high
    saved = json.loads((copy / paths.BIAS).read_text())
    assert set(saved["offsets"]) == {"band zero", "band one", "band two", "hippeastrum "}
    assert saved["fitted_on"] == "val" and saved["images"] == 12
    assert main(["predict", str(copy), "--bias", "fitted"]) == 0
    with (copy / paths.SUBMISSION).open() as f:
        rows = {r["id"]: int(r["label"]) for r in csv.DictReader(f)}
    assert rows == truth["test"]  # classes 0-2, which the rule gets right, stay right
    assert len(rows) == len(TEST_LABELS)
    assert "95% bootstrap interval" in (copy / paths.REPORT).read_text()


@pytest.mark.slow
def test_a_kfold_run_fits_on_its_out_of_fold_predictions(tiny_kfold, tmp_path, capsys):
    copy = tmp_path / "k2"
    shutil.copytree(tiny_kfold, copy)
    assert main(["evaluate", str(copy), "--fit-bias"]) == 0
    saved = json.loads((copy / paths.BIAS).read_text())
    oof = np.load(paths.predictions_file(copy, "oof"))
    assert saved["fitted_on"] == "oof" and saved["images"] == len(oof["ids"])
    out = tmp_path / "sub.csv"
    assert main(["predict", str(copy), "--bias", "fitted", "--out", str(out)]) == 0
    test = np.load(paths.predictions_file(copy, "test"))
    offsets = np.array([saved["offsets"][n] for n in test["class_names"]])
    with out.open() as f:
        rows = {r["id"]: int(r["label"]) for r in csv.DictReader(f)}
    assert rows == dict(zip(test["ids"], bias.decide(test["probabilities"], offsets).tolist()))
