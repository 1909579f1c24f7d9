"""K-fold splits: the stratified fold assignment (each group of copies kept in one fold), and a
fold's splits streamed by id from the pooled train+val files, exact worker shards included."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from corolla.data import folds, layout, pipeline
from corolla.errors import UserError
from corolla.runs import paths


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
                     tuple(found.tolist())).write(tmp_path / paths.FOLDS)
    fold = _fold_layout(tiny_petals, tmp_path / paths.FOLDS, 1)
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
