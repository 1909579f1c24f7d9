"""The splits a conversion makes: a source's own (`train/ val/ test/` folders, a CSV `split`
column), else a split stratified by class (scikit-learn) from the settings' seed and fractions
that keeps each group of exact or near-duplicate images (`Copies`) in one split; `dedupe` keeps
one image of each group of exact copies. Within a split the order is a permutation of the
sorted ids drawn from the seed, so a conversion is reproducible."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from corolla.data.prepare.settings import Settings
from corolla.data.prepare.sources import SPLIT_FOLDERS, ImageSource, Item
from corolla.errors import UserError


@dataclass(frozen=True)
class Copies:
    """The copies among a source's images (`corolla.data.audit.survey.copies`)."""
    groups: dict = field(default_factory=dict)  # id -> its group's first id (exact or near)
    exact: tuple = ()  # tuples of the ids of images with the same pixels
    # The near-duplicate thresholds they were found with (bits of the 64- and 256-bit hashes),
    # for convert.json.
    near_bits: tuple = ()


def _stratified(items: list[Item], fraction: float, seed: int, what: str, source: str,
                groups: dict | None = None):
    """(rest, taken): `fraction` of `items` taken, stratified by label, each group of copies
    (`groups`: id -> group) whole on one side. Each group is split as one item labelled as its
    first: without copies, the split is exactly the plain stratified one."""
    if fraction <= 0 or not items:
        return items, []
    from sklearn.model_selection import train_test_split

    units: dict[str, list[Item]] = {}
    for item in items:
        units.setdefault((groups or {}).get(item.id, item.id), []).append(item)
    firsts = [members[0] for members in units.values()]
    try:
        rest, taken = train_test_split(firsts, test_size=fraction, random_state=seed,
                                       stratify=[i.label for i in firsts])
    except ValueError as e:
        raise UserError(f"cannot split {what} off {source} stratified by class ({e}); add "
                        f"images to the small classes, or give the split yourself (train/ "
                        f"and val/ folders, or a CSV split column; `corolla convert` also "
                        f"takes --val-fraction / --test-fraction)") from None
    group_of = {members[0].id: key for key, members in units.items()}
    return ([i for first in rest for i in units[group_of[first.id]]],
            [i for first in taken for i in units[group_of[first.id]]])


def needs_split(source: ImageSource) -> bool:
    """Whether the conversion splits (some of) the source itself (see `assign_splits`)."""
    return any(i.split is None for i in source.items) or \
        not any(i.split == "val" for i in source.items)


def dedupe(source: ImageSource, copies: Copies) -> tuple[ImageSource, list[tuple[str, str]]]:
    """(the source with one image of each group of exact copies, [(removed id, kept id)]).
    The one kept is the test split's copy when there is one (a submission needs every test
    id; a training copy of a test image is a leak), else the first id."""
    split = {i.id: i.split for i in source.items}
    removed = []
    for ids in copies.exact:
        ids = sorted(i for i in ids if i in split)
        tests = [i for i in ids if split[i] == "test"]
        keep = tests or ids[:1]
        removed += [(i, keep[0]) for i in ids if i not in keep]
    gone = {i for i, _ in removed}
    return replace(source, items=tuple(i for i in source.items if i.id not in gone)), removed


def assign_splits(source: ImageSource, settings: Settings,
                  copies: Copies | None = None) -> dict[str, list[Item]]:
    """Every item's split, each split in its deterministic order (see the module); the
    images the split makes keep their `copies` together."""
    groups = copies.groups if copies is not None else None
    splits = {name: [i for i in source.items if i.split == name] for name in SPLIT_FOLDERS}
    free = sorted((i for i in source.items if i.split is None), key=lambda i: i.id)
    if free or not splits["val"]:
        # The unassigned images, else train (to split a val off it).
        pool = free or sorted(splits.pop("train"), key=lambda i: i.id)
        test_f = settings.test_fraction if free and not splits["test"] else 0.0
        val_f = settings.val_fraction if not splits["val"] else 0.0
        rest, test = _stratified(pool, test_f, settings.seed, "a test split", source.path,
                                 groups)
        rest, val = _stratified(rest, val_f / (1 - test_f), settings.seed, "a val split",
                                source.path, groups)
        splits["train"] = splits.get("train", []) + rest
        splits["val"] += val
        splits["test"] += test
    rng = np.random.default_rng(settings.seed)
    ordered = {}
    for name in SPLIT_FOLDERS:
        items = sorted(splits[name], key=lambda i: i.id)
        ordered[name] = [items[k] for k in rng.permutation(len(items))]
    for name in ("train", "val"):
        if not ordered[name]:
            raise UserError(f"the {name} split of {source.path} is empty; "
                            + ("add images to it" if name == "train" else
                               "add a val/ folder or a positive --val-fraction"))
    return ordered

