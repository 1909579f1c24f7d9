"""benchmarks/weight_average.py runs: it trains, keeps every epoch's backup as the run writes
it, and scores the best epoch, the last, and weight means with BatchNorm as saved and
recomputed, each without and with flip TTA (the figures of the `cpu` recipe's plateau)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from corolla.runs import paths
from helpers.processes import REPO
from helpers.runs import history

SCRIPT = REPO / "benchmarks" / "weight_average.py"
ROW = re.compile(r"^  (.+?) +([01]\.\d{4})  ([01]\.\d{4})$", re.MULTILINE)


@pytest.mark.large  # a benchmark trains in a subprocess; CI runs it in its `large` step
def test_tiny_run_scores_every_variant(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--last", "2,3",
                          "--runs-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # One backup per epoch, copied before the run removed it.
    assert sorted(p.name for p in (tmp_path / "epochs").iterdir()) == \
        [f"epoch-{i:04d}.npz" for i in range(3)]
    rows = [r[0] for r in ROW.findall(out.stdout)]
    assert rows == ["best epoch (model.keras)",
                    *(f"{what}, BatchNorm {bn}"
                      for what in ("last epoch", "mean of the last 2 epochs",
                                   "mean of the last 3 epochs")
                      for bn in ("as saved", "recomputed"))], out.stdout
    # Known answers: the run's own val macro F1 of its best and of its last epoch (history.csv)
    # are what this script measures of model.keras and of the last backup's weights.
    f1 = [float(r["val_f1_macro"]) for r in history(tmp_path / "average")]
    figures = {r[0]: float(r[1]) for r in ROW.findall(out.stdout)}
    assert figures["best epoch (model.keras)"] == pytest.approx(max(f1), abs=1e-4)
    assert figures["last epoch, BatchNorm as saved"] == pytest.approx(f1[-1], abs=1e-4)


FINETUNE = REPO / "benchmarks" / "finetune.py"


@pytest.mark.large  # a benchmark trains in a subprocess; CI runs it in its `large` step
def test_pseudo_labels_join_the_training_split_as_the_teacher_predicted(tmp_path):
    """`finetune.py pseudo`: every test image the teacher run predicts confidently enough (at
    threshold 0, all) joins the training split with the teacher's class, and the recipe trains
    on it with the teacher's steps per epoch."""
    import tensorflow as tf

    from corolla.data import records
    from corolla.evaluation import predictions

    out = subprocess.run([sys.executable, str(FINETUNE), "pseudo", "--tiny", "--threshold", "0",
                          "--runs-dir", str(tmp_path), "--extra",
                          "--start-size 0 --input-size 32"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    teacher = predictions.load(paths.predictions_file(tmp_path / "teacher", "test"))
    expected = dict(zip(teacher.ids, teacher.probabilities.argmax(axis=1).tolist()))
    train = tmp_path / "pseudo-labelled" / "tfrecords-jpeg-32x32" / "train"
    added = [p for p in train.iterdir() if not p.is_symlink()]
    assert len(added) == 1 and added[0].name.endswith(f"-{len(expected)}.tfrec")
    got = {}
    for record in tf.data.TFRecordDataset(str(added[0])):
        example = records.parse_features(record, labelled=True)
        got[example["id"].numpy().decode()] = int(example["class"].numpy())
    assert got == expected
    assert f"{len(expected)} test images pseudo-labelled" in out.stdout
    assert (tmp_path / "pseudo" / paths.MODEL).is_file()
