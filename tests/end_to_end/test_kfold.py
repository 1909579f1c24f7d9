"""`corolla train --folds 2` end to end on tiny_petals (the shared `tiny_kfold` run): fold runs,
pooled out-of-fold predictions, the averaged and checked submission, and a run interrupted after
fold 1 that completes only fold 2 when its command is run again (the folds themselves:
data/test_folds.py)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from corolla.cli import main
from corolla.data import folds, layout, pipeline
from corolla.evaluation import predictions
from corolla.report import submission
from corolla.runs import paths
from helpers.images import copies_folder


def test_folds_flag_out_of_range_is_one_line(tiny_petals, tmp_path, capsys):
    assert main(["train", "--data", str(tiny_petals), "--folds", "1",
                 "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--folds must be 0 (no k-fold) or a number of folds from 2 to 100, got 1" in err
    assert list(tmp_path.iterdir()) == []


def _truth(root):
    data = layout.open_layout(str(root))
    meta = pipeline.metadata(folds.pooled(data))
    return dict(zip(meta["ids"], meta["labels"])), pipeline.metadata(data.split("test"))["ids"]


@pytest.mark.slow
def test_train_folds_writes_fold_runs_oof_predictions_and_a_checked_submission(tiny_kfold,
                                                                               tiny_petals):
    parent, (truth, test_ids) = tiny_kfold, _truth(tiny_petals)
    assignment = folds.Assignment.read(parent / paths.FOLDS)
    assert sorted(assignment.ids) == sorted(truth) and set(assignment.folds) == {1, 2}
    for k in (1, 2):
        fold = parent / f"fold-{k}"
        assert all((fold / name).is_file() for name in
                   (paths.FINISHED, paths.MODEL, paths.HISTORY, paths.METRICS, paths.SUBMISSION))
        val = predictions.load(paths.predictions_file(fold, "val"))  # its out-of-fold part
        assert sorted(val.ids) == sorted(i for i, f in zip(assignment.ids, assignment.folds)
                                         if f == k)
    oof = predictions.load(paths.predictions_file(parent, "oof"))
    assert list(oof.ids) == list(assignment.ids) and len(set(oof.ids)) == len(truth)
    assert dict(zip(oof.ids, oof.labels.tolist())) == truth
    from corolla.scoring import metrics

    scores = json.loads((parent / paths.METRICS).read_text())
    again = metrics.classification_metrics(oof.labels, oof.predicted, oof.class_names)
    assert scores["split"] == "oof" and scores["folds"] == 2
    assert scores["f1_macro"] == again["f1_macro"] and scores["accuracy"] == again["accuracy"]
    assert [f["num_examples"] for f in scores["per_fold"]] == [48, 48]

    tests = [predictions.load(paths.predictions_file(parent / f"fold-{k}", "test")) for k in (1, 2)]
    mean = predictions.load(paths.predictions_file(parent, "test"))
    np.testing.assert_allclose(mean.probabilities,
                               (tests[0].probabilities + tests[1].probabilities) / 2, rtol=1e-6)
    assert submission.check(parent / paths.SUBMISSION, test_ids, 4) == []
    assert list(submission.read(parent / paths.SUBMISSION).values()) == \
        mean.predicted.tolist()
    assert (parent / paths.FINISHED).is_file() and (parent / paths.CONFUSION).is_file()
    # The same writer as a run's: the parent's report shows its out-of-fold scores.
    report = (parent / paths.REPORT).read_text()
    assert f"{scores['f1_macro']:.4f}" in report and "<th>split</th><td>oof</td>" in report


@pytest.mark.slow
def test_a_kfold_run_has_no_model_to_evaluate_one_line(tiny_kfold, capsys):
    assert main(["predict", str(tiny_kfold)]) == 2
    err = capsys.readouterr().err
    assert "is a k-fold run: it has no model of its own" in err and err.count("\n") == 1


@pytest.mark.slow
def test_an_interrupted_kfold_run_completes_only_the_unfinished_fold(tiny_kfold, tiny_petals,
                                                                     tmp_path, capsys,
                                                                     train_tiny):
    """Killed after fold 1 (simulated: fold 2 and the parent's outputs removed): the same
    command keeps fold 1 as it was and trains fold 2 alone."""
    runs = tmp_path / "runs"
    parent = shutil.copytree(tiny_kfold, runs / "k2")
    shutil.rmtree(parent / "fold-2")
    shutil.rmtree(parent / paths.PREDICTIONS)
    for name in (paths.FINISHED, paths.METRICS, paths.SUBMISSION, paths.CONFUSION):
        (parent / name).unlink()
    model = (parent / "fold-1" / paths.MODEL).read_bytes()
    capsys.readouterr()

    train_tiny(runs, "--folds", "2", name="k2")  # tiny_kfold's own command
    out = capsys.readouterr().out
    assert "fold 1 of 2 finished before: kept" in out and "fold 2 of 2: training" in out
    assert "fold 1 of 2: training" not in out and out.count("training small_cnn") == 1
    assert (parent / "fold-1" / paths.MODEL).read_bytes() == model
    assert (parent / "fold-2" / paths.FINISHED).is_file() and (parent / paths.FINISHED).is_file()
    oof = predictions.load(paths.predictions_file(parent, "oof"))
    assert sorted(oof.ids) == sorted(_truth(tiny_petals)[0])
    # Once finished, the same command does not train it again.
    train_tiny(runs, "--folds", "2", name="k2", code=2)
    assert "already exists" in capsys.readouterr().err


@pytest.mark.slow
def test_a_kfold_run_keeps_each_group_of_copies_in_one_fold_and_records_it(tmp_path, cache,
                                                                           capsys, train_tiny):
    planted = copies_folder(tmp_path / "photos")
    parent = train_tiny(tmp_path / "runs", "--folds", "2", "--steps-per-epoch", "1",
                        "--batch-size", "4", "--input-size", "16", data=tmp_path / "photos",
                        name="kf")
    assert "copies kept in their originals' folds" in capsys.readouterr().out
    assignment = folds.Assignment.read(parent / paths.FOLDS)
    by_group: dict = {}
    for group, fold in zip(assignment.groups, assignment.folds):
        by_group.setdefault(group, set()).add(fold)
    kept = [g for g, f in by_group.items() if len(f) == 1]
    assert len(by_group) == len(kept)
    # The copies that ended in train+val share their group (one or two of each three).
    assert sum(assignment.groups.count(g) > 1 for g in by_group) >= planted // 2


def test_a_kfold_parents_refusal_names_only_files_it_has(tmp_path):
    """Export and explain of a k-fold parent point to its averaged test predictions only where
    the data had a test split to average."""
    from corolla import config as config_lib
    from corolla.errors import UserError
    from corolla.runs.kfold import refuse_parent

    parent = config_lib.with_settings(config_lib.RunConfig(), {"train.folds": 2})
    with pytest.raises(UserError, match=r"metrics.json \(the data has no test split: no "
                                        r"averaged test predictions\)$"):
        refuse_parent(tmp_path, parent)
    (tmp_path / paths.SUBMISSION).write_text("id,label\n")
    with pytest.raises(UserError, match=rf"averaged test predictions in "
                                        rf"{tmp_path / paths.SUBMISSION}$"):
        refuse_parent(tmp_path, parent)
