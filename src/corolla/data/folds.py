"""K-fold splits: a run's train and val drawn from train+val pooled, by a fold per id.

`assign` draws the folds (stratified); a k-fold parent run (`corolla.flows.kfold`) writes
the assignment once, as data, to its `folds.csv` (`id,label,fold`, folds 1..K, in the order the
pooled split is read); each fold's run names that file and its fold in its config
(`data.folds_file`, `data.fold`). `restrict` turns the data's layout into the fold's: its "val"
split is the records of fold k, its "train" split those of the other folds, its "test" split
the data's own. (`with_val_in_train` pools them the other way, for a refit: its "train" is
both.) The records are streamed from the data's own files and kept by id (a
`tf.lookup.StaticHashTable` id -> fold in a `Dataset.filter`, see `FoldSplit.keeper`): nothing
is copied or held in memory but the ids.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold
import tensorflow as tf

from corolla.data import records
from corolla.data.layout import Layout, Split
from corolla.errors import UserError
from corolla.files import check_regular, write_text_atomic

HEADER = ["id", "label", "fold"]
GROUP = "group"  # a fourth column where copies were kept together: each id's group of copies


def assign(labels, k: int, seed: int, class_names=None, groups=None) -> np.ndarray:
    """Fold 1..k of each example: stratified (every fold holds each class in the proportion
    of the whole, within one example), disjoint, covering, and the same for the same seed.
    `groups` (one key per example): copies of one image (`check-data`'s groups of exact and
    near duplicates) share a key and are kept in one fold, so that a photo and its resized
    copy are never scored one by a model trained on the other (scikit-learn's
    StratifiedGroupKFold; stratified within a group's size). Without copies the folds are
    exactly the plain stratified ones. A class with fewer than k examples (groups) could not
    be in every fold: a UserError."""
    labels = np.asarray(labels)
    grouped = groups is not None and len(set(groups)) < len(labels)
    units = zip(labels.tolist(), groups if grouped else range(len(labels)))
    counts = Counter(label for label, _ in set(units))  # a group counts once
    label, fewest = min(counts.items(), key=lambda item: (item[1], item[0]))
    if fewest < k:
        name = repr(class_names[label]) if class_names is not None else str(label)
        fix = f"use --folds {fewest} or fewer" if fewest >= 2 else "k-fold needs 2 or more"
        what = "groups of copies" if grouped else f"example{'s' * (fewest != 1)}"
        raise UserError(f"class {name} has {fewest} {what} in train+val, fewer than the {k} "
                        f"folds (each fold must hold every class); {fix}")
    found = np.zeros(len(labels), np.int64)
    if grouped:
        splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
        parts = splitter.split(np.zeros(len(labels)), labels, list(groups))
    else:
        splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        parts = splitter.split(np.zeros(len(labels)), labels)
    for fold, (_, held_out) in enumerate(parts, 1):
        found[held_out] = fold
    return found


@dataclass(frozen=True)
class Assignment:
    """Every example of train+val (in the pooled split's read order) and its fold, 1..K."""
    ids: tuple[str, ...]
    labels: tuple[int, ...]
    folds: tuple[int, ...]
    groups: tuple[str, ...] = ()  # each id's group of copies (its first id); () if none

    @property
    def k(self) -> int:
        return max(self.folds)

    def write(self, path: str | Path) -> Path:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(HEADER + [GROUP] * bool(self.groups))
        writer.writerows(zip(self.ids, self.labels, self.folds, *[self.groups] * bool(
            self.groups)))
        write_text_atomic(path, out.getvalue())
        return Path(path)

    @staticmethod
    def read(path: str | Path) -> Assignment:
        path = Path(path)
        again = "run the k-fold command again with a new --name, or restore the file"
        try:
            check_regular(path, "fold assignment")  # a FIFO would block its reading
            with path.open(newline="") as f:
                rows = list(csv.reader(f))
            width = len(rows[0]) if rows else 0
            if not rows or rows[0] not in (HEADER, HEADER + [GROUP]) or any(
                    len(row) != width for row in rows[1:]):
                raise ValueError(f"expected the header {','.join(HEADER)}[,{GROUP}] and as "
                                 f"many columns in every row")
            ids, labels, folds, *groups = zip(*rows[1:]) if len(rows) > 1 else ((),) * width
            assignment = Assignment(tuple(ids), tuple(map(int, labels)), tuple(map(int, folds)),
                                    tuple(groups[0]) if groups else ())
        except FileNotFoundError:
            raise UserError(f"the fold assignment {path} is missing; {again}") from None
        except (OSError, ValueError) as e:
            raise UserError(f"{path} is not a fold assignment ({e}); {again}") from None
        if not ids or min(assignment.folds) < 1 or len(set(ids)) != len(ids):
            raise UserError(f"{path} is not a fold assignment (no rows, a fold below 1 or a "
                            f"repeated id); {again}")
        return assignment


@dataclass(frozen=True, eq=False)
class FoldSplit(Split):
    """Some of the records of `files`: those whose id's fold is in `keep`."""
    assignment: Assignment | None = None
    keep: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        return sum(fold in self.keep for fold in self.assignment.folds)

    def keeper(self):
        """(serialized record) -> whether to keep it, for `Dataset.filter`. Build it outside
        tf.data's traced functions (the table is a resource they capture)."""
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(self.assignment.ids),
                                                tf.constant(self.assignment.folds, tf.int64)),
            default_value=-1)  # an id the assignment does not know is in no fold
        keep = tf.constant(self.keep, tf.int64)

        def kept(record):
            fold = table.lookup(records.parse_features(record, True, self.features,
                                                       image=False)["id"])
            return tf.reduce_any(tf.equal(fold, keep))

        return kept


def pooled(layout: Layout) -> Split:
    """Train and val as one split (train's files, then val's), as k-fold reads them."""
    train, val = Layout.split(layout, "train"), Layout.split(layout, "val")
    return Split("train+val", train.files + val.files, labelled=True, features=layout.features,
                 stored_size=layout.image_size)


@dataclass(frozen=True)
class FoldLayout(Layout):
    """The data's layout as fold `fold` of `assignment` sees it (see the module)."""
    assignment: Assignment | None = None
    fold: int = 0

    def split(self, name: str) -> Split:
        if name not in ("train", "val"):
            return super().split(name)
        others = tuple(k for k in range(1, self.assignment.k + 1) if k != self.fold)
        return FoldSplit(name, pooled(self).files, True, self.features, self.image_size,
                         assignment=self.assignment,
                         keep=(self.fold,) if name == "val" else others)


@dataclass(frozen=True)
class WholeLayout(Layout):
    """Other data scored whole: its "val" is every labelled image (train's files, then
    val's). Labelled photos a run never saw hold nothing back to keep apart, and scoring only
    the val part that a conversion split off them scored a fifth of them."""

    def split(self, name: str) -> Split:
        if name != "val":
            return super().split(name)
        return dataclasses.replace(pooled(self), name="val")


def whole(layout: Layout) -> Layout:
    fields = {f.name: getattr(layout, f.name) for f in dataclasses.fields(Layout)}
    return WholeLayout(**fields)


@dataclass(frozen=True)
class RefitLayout(Layout):
    """A refit's data (`training.refit`): its "train" is every labelled image (train's files,
    then val's); val and test are the data's own."""

    def split(self, name: str) -> Split:
        if name != "train":
            return super().split(name)
        return dataclasses.replace(pooled(self), name="train")


def with_val_in_train(layout: Layout) -> Layout:
    fields = {f.name: getattr(layout, f.name) for f in dataclasses.fields(Layout)}
    return RefitLayout(**fields)


def restrict(layout: Layout, data_config) -> Layout:
    """The layout a run's config (`data.fold`, `data.folds_file`) reads: the data's own, or a
    fold's of train+val."""
    if not data_config.fold:
        return layout
    if data_config.skip_bad_records:
        raise UserError("k-fold runs cannot skip damaged records yet (folds are counted by id); "
                        "drop --skip-bad-records or repair the data")
    assignment = Assignment.read(data_config.folds_file)
    fields = {f.name: getattr(layout, f.name) for f in dataclasses.fields(Layout)}
    return FoldLayout(**fields, assignment=assignment, fold=data_config.fold)
