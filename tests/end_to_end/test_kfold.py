"""K-fold training: the stratified fold assignment, fold splits streamed by id (exact worker
shards), and `corolla train --folds 2` end to end on tiny_petals (the shared `tiny_kfold`
run): fold runs, pooled out-of-fold predictions, the averaged and checked submission, and a
run interrupted after fold 1 that completes only fold 2 when its command is run again."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import numpy as np
import pytest

from corolla.cli import main
from corolla.data import folds, layout, pipeline
from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.report import submission


def test_folds_are_stratified_disjoint_covering_and_seeded():
    labels = np.repeat([0, 1, 2, 3], [10, 7, 23, 5])
    found = folds.assign(labels, 5, seed=3)
    assert sorted(set(found.tolist())) == [1, 2, 3, 4, 5]  # one fold per example, all used
    for fold in range(1, 6):
        held = Counter(labels[found == fold].tolist())
        for label, total in Counter(labels.tolist()).items():
            assert abs(held[label] - total / 5) < 1, (fold, label)  # each class spread evenly
    np.testing.assert_array_equal(found, folds.assign(labels, 5, seed=3))
    assert not np.array_equal(found, folds.assign(labels, 5, seed=4))


def test_a_class_with_fewer_examples_than_folds_is_one_line():
    with pytest.raises(UserError) as refused:
        folds.assign([0] * 9 + [1] * 2, 3, seed=0, class_names=("rose", "iris "))
    message = str(refused.value)
    assert "class 'iris ' has 2 examples in train+val, fewer than the 3 folds" in message
    assert "--folds 2 or fewer" in message and "\n" not in message


def test_folds_flag_out_of_range_is_one_line(tiny_petals, tmp_path, capsys):
    assert main(["train", "--data", str(tiny_petals), "--folds", "1",
                 "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--folds must be 0 (no k-fold) or a number of folds from 2 to 100, got 1" in err
    assert list(tmp_path.iterdir()) == []


def _fold_layout(root, folds_file, fold):
    from corolla.config import DataConfig

    data = layout.open_layout(str(root))
    return folds.restrict(data, DataConfig(fold=fold, folds_file=str(folds_file)))


def _ids(ds):
    return [e["id"].numpy().decode() for e in ds]


@pytest.mark.parametrize("workers", [2, 5])
def test_a_folds_splits_stream_exactly_its_ids_and_shard_exactly(tiny_petals, tmp_path,
                                                                 workers):
    """Train and val of fold 1 read from the pooled train+val files (4), filtered by id; the
    workers' parts (2 workers: by file; 5: by record) are disjoint and cover the fold."""
    data = layout.open_layout(str(tiny_petals))
    meta = pipeline.metadata(folds.pooled(data))
    found = folds.assign(meta["labels"], 3, seed=1)
    folds.Assignment(tuple(meta["ids"]), tuple(meta["labels"]),
                     tuple(found.tolist())).write(tmp_path / "folds.csv")
    fold = _fold_layout(tiny_petals, tmp_path / "folds.csv", 1)
    val, train = fold.split("val"), fold.split("train")
    held = [i for i, f in zip(meta["ids"], found) if f == 1]
    assert pipeline.metadata(val)["ids"] == held  # in the pooled read order
    assert val.count == len(held) and train.count == len(meta["ids"]) - len(held)
    parts = [_ids(pipeline.read(train, 32, ordered=False, shard=(workers, i)))
             for i in range(workers)]
    seen = [i for part in parts for i in part]
    assert len(seen) == len(set(seen)) == train.count and not set(seen) & set(held)
    # One training epoch of exactly the fold's size: every training image once.
    ds = pipeline.train_dataset(train, 32, 1, epoch_examples=train.count, seed=5,
                                augment=False)
    labels = sorted(int(y) for _, ys in ds.take(train.count) for y in ys.numpy())
    assert labels == sorted(y for y, f in zip(meta["labels"], found) if f != 1)


# End to end: the shared tiny_kfold run (corolla train --folds 2, 1 epoch of 2 steps a fold).

def _truth(root):
    data = layout.open_layout(str(root))
    meta = pipeline.metadata(folds.pooled(data))
    return dict(zip(meta["ids"], meta["labels"])), pipeline.metadata(data.split("test"))["ids"]


@pytest.mark.slow
def test_train_folds_writes_fold_runs_oof_predictions_and_a_checked_submission(tiny_kfold,
                                                                               tiny_petals):
    parent, (truth, test_ids) = tiny_kfold, _truth(tiny_petals)
    assignment = folds.Assignment.read(parent / "folds.csv")
    assert sorted(assignment.ids) == sorted(truth) and set(assignment.folds) == {1, 2}
    for k in (1, 2):
        fold = parent / f"fold-{k}"
        assert all((fold / name).is_file() for name in
                   ("FINISHED", "model.keras", "history.csv", "metrics.json", "submission.csv"))
        val = predictions.load(fold / "predictions" / "val.npz")  # its out-of-fold part
        assert sorted(val.ids) == sorted(i for i, f in zip(assignment.ids, assignment.folds)
                                         if f == k)
    oof = predictions.load(parent / "predictions" / "oof.npz")
    assert list(oof.ids) == list(assignment.ids) and len(set(oof.ids)) == len(truth)
    assert dict(zip(oof.ids, oof.labels.tolist())) == truth
    from corolla.evaluation import metrics

    scores = json.loads((parent / "metrics.json").read_text())
    again = metrics.classification_metrics(oof.labels, oof.predicted, oof.class_names)
    assert scores["split"] == "oof" and scores["folds"] == 2
    assert scores["f1_macro"] == again["f1_macro"] and scores["accuracy"] == again["accuracy"]
    assert [f["num_examples"] for f in scores["per_fold"]] == [48, 48]

    tests = [predictions.load(parent / f"fold-{k}" / "predictions" / "test.npz") for k in (1, 2)]
    mean = predictions.load(parent / "predictions" / "test.npz")
    np.testing.assert_allclose(mean.probabilities,
                               (tests[0].probabilities + tests[1].probabilities) / 2, rtol=1e-6)
    assert submission.check(parent / "submission.csv", test_ids, 4) == []
    assert list(submission.read(parent / "submission.csv").values()) == \
        mean.predicted.tolist()
    assert (parent / "FINISHED").is_file() and (parent / "confusion_matrix.png").is_file()
    # The same writer as a run's: the parent's report shows its out-of-fold scores.
    report = (parent / "report.html").read_text()
    assert f"{scores['f1_macro']:.4f}" in report and "<th>split</th><td>oof</td>" in report


@pytest.mark.slow
def test_a_kfold_run_has_no_model_to_evaluate_one_line(tiny_kfold, capsys):
    assert main(["predict", str(tiny_kfold)]) == 2
    err = capsys.readouterr().err
    assert "is a k-fold run: it has no model of its own" in err and err.count("\n") == 1


@pytest.mark.slow
def test_an_interrupted_kfold_run_completes_only_the_unfinished_fold(tiny_kfold, tiny_petals,
                                                                     tmp_path, capsys):
    """Killed after fold 1 (simulated: fold 2 and the parent's outputs removed): the same
    command keeps fold 1 as it was and trains fold 2 alone."""
    runs = tmp_path / "runs"
    parent = shutil.copytree(tiny_kfold, runs / "k2")
    shutil.rmtree(parent / "fold-2")
    shutil.rmtree(parent / "predictions")
    for name in ("FINISHED", "metrics.json", "submission.csv", "confusion_matrix.png"):
        (parent / name).unlink()
    model = (parent / "fold-1" / "model.keras").read_bytes()
    capsys.readouterr()

    assert main(["train", "--data", str(tiny_petals), "--folds", "2", "--epochs", "1",
                 "--steps-per-epoch", "2", "--batch-size", "8", "--runs-dir", str(runs),
                 "--name", "k2"]) == 0
    out = capsys.readouterr().out
    assert "fold 1 of 2 finished before: kept" in out and "fold 2 of 2: training" in out
    assert "fold 1 of 2: training" not in out and out.count("training small_cnn") == 1
    assert (parent / "fold-1" / "model.keras").read_bytes() == model
    assert (parent / "fold-2" / "FINISHED").is_file() and (parent / "FINISHED").is_file()
    oof = predictions.load(parent / "predictions" / "oof.npz")
    assert sorted(oof.ids) == sorted(_truth(tiny_petals)[0])
    # Once finished, the same command does not train it again.
    assert main(["train", "--data", str(tiny_petals), "--folds", "2", "--epochs", "1",
                 "--steps-per-epoch", "2", "--batch-size", "8", "--runs-dir", str(runs),
                 "--name", "k2"]) == 2
    assert "already exists" in capsys.readouterr().err


def test_copies_of_an_image_share_a_fold_and_without_copies_the_folds_are_the_plain_ones():
    """A photo and its resized copy in different folds inflate every out-of-fold score: each
    group of copies is kept in one fold (StratifiedGroupKFold). The plain stratified folds
    split a group for this seed; the grouped ones never do."""
    labels = np.repeat([0, 1], 20)
    groups = [f"g{k // 3}" if k < 12 or 20 <= k < 32 else f"u{k}" for k in range(40)]
    plain = folds.assign(labels, 4, seed=0)
    assert any(len(set(plain[[g == name for g in groups]].tolist())) > 1
               for name in set(groups))
    grouped = folds.assign(labels, 4, seed=0, groups=groups)
    for name in set(groups):
        assert len(set(grouped[[g == name for g in groups]].tolist())) == 1, name
    for fold in range(1, 5):  # still stratified: every fold holds both classes
        assert set(labels[grouped == fold].tolist()) == {0, 1}
    # Every example a group of its own: exactly the plain folds.
    np.testing.assert_array_equal(folds.assign(labels, 4, seed=0, groups=list(range(40))),
                                  plain)


@pytest.mark.slow
def test_a_kfold_run_keeps_each_group_of_copies_in_one_fold_and_records_it(tmp_path,
                                                                          monkeypatch, capsys):
    from helpers.images import copies_folder

    monkeypatch.setenv("COROLLA_CACHE_DIR", str(tmp_path / "cache"))
    planted = copies_folder(tmp_path / "photos")
    assert main(["train", "--data", str(tmp_path / "photos"), "--folds", "2", "--epochs", "1",
                 "--steps-per-epoch", "1", "--batch-size", "4", "--input-size", "16",
                 "--runs-dir", str(tmp_path / "runs"), "--name", "kf"]) == 0
    assert "copies kept in their originals' folds" in capsys.readouterr().out
    assignment = folds.Assignment.read(tmp_path / "runs" / "kf" / "folds.csv")
    by_group: dict = {}
    for group, fold in zip(assignment.groups, assignment.folds):
        by_group.setdefault(group, set()).add(fold)
    kept = [g for g, f in by_group.items() if len(f) == 1]
    assert len(by_group) == len(kept)
    # The copies that ended in train+val share their group (one or two of each three).
    assert sum(assignment.groups.count(g) > 1 for g in by_group) >= planted // 2
