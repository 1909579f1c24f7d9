"""Know the data before training (`corolla check-data`): one streaming pass over any data
Corolla reads (the competition layout, an image folder, a CSV) that finds

- exact and near-duplicate images within each split and across train/val/test
  (`corolla.data.audit.duplicates`: the fingerprints, the threshold and why);
- each split's class counts and imbalance ratio, image sizes and aspect ratios;
- the files (or records) whose image does not decode.

Images are decoded once, by Pillow (as `corolla convert` decodes them: EXIF rotation, CMYK,
palettes and alpha become RGB), on a thread per core (Pillow and hashlib release the GIL).
A competition layout is read at its smallest tfrecords-jpeg-SxS. An image folder or CSV
without its own val split is split as `corolla train --data` splits it (the conversion's
default `Settings`, copies kept in one split), so that what is reported is what training
reads.

A survey is cached under the data's key (`cached`): the key of a conversion for an image
folder or CSV (its files' paths, sizes, times and labels), the files' paths, sizes and times
for TFRecords; `corolla train` checks each data set once.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from corolla.data.audit import duplicates
from corolla.data.audit.duplicates import Fingerprint, Group
from corolla.data.prepare import image_files, sources
from corolla.data.prepare.sharding import Progress
from corolla.data.prepare.settings import MAX_MEGAPIXELS, Settings
from corolla.data.prepare.splits import Copies, assign_splits, needs_split
from corolla.errors import UserError
from corolla.files import check_folder, write_text_atomic

VERSION = 1  # of the cached surveys: bump when what a survey finds changes
_BATCH = 256  # images decoded per step of the pass
UNSPLIT = "all"  # the split of an image folder's files before any split


@dataclass
class Entry:
    """One image of the data as the pass saw it."""
    id: str
    split: str
    label: int | None
    path: str  # the file, or "FILE.tfrec[k]" for the k-th record of a TFRecord file
    width: int = 0
    height: int = 0
    fingerprint: Fingerprint | None = None
    error: str = ""  # why the image does not decode ("" when it does)


def _measure(entry: Entry, open_image) -> Entry:
    try:
        image = open_image()
        entry.width, entry.height = image.size
        entry.fingerprint = duplicates.fingerprint(image)
    except Exception as e:  # noqa: BLE001 - any failure means the image cannot be used
        entry.error = " ".join(str(e).split()) or type(e).__name__
    return entry


def _rgb(data: bytes):
    with image_files.opened(io.BytesIO(data)) as image:
        return image.convert("RGB")


def _measure_record(job) -> Entry:
    entry, data = job
    return _measure(entry, lambda: _rgb(data))


def _read_items(items, progress, max_megapixels: float) -> list[Entry]:
    """Image files (a folder's or a CSV's), decoded as `corolla convert` decodes them (one
    over `max_megapixels` is unreadable, found on its header)."""
    entries = [Entry(i.id, i.split or UNSPLIT, i.label, i.path) for i in items]
    whole = 1 << 30  # no draft scaling: exact copies are the same full-size pixels

    def read(entry):
        return _measure(entry, lambda: image_files.open_rgb(entry.path, whole, max_megapixels))
    return _in_threads(entries, read, progress)


def _in_threads(entries, read, progress) -> list[Entry]:
    out = []
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for start in range(0, len(entries), _BATCH):
            for entry in pool.map(read, entries[start:start + _BATCH]):
                out.append(entry)
                progress.step(entry.split)
    return out


def _read_layout(layout, progress) -> list[Entry]:
    """Every record of every split of a competition layout (at the layout's size)."""
    import tensorflow as tf

    from corolla.data import check, records

    out = []
    for name in ("train", "val", "test"):
        if not layout.has_split(name):
            continue
        split = layout.split(name)

        def parse(record, labelled=split.labelled):
            return records.parse_features(record, labelled, layout.features)

        for file in split.files:
            index = 0  # of the record in its file
            # A damaged tail ends the file's reading: what it took is said below.
            records_read = tf.data.TFRecordDataset(file.path).ignore_errors()
            try:
                for batch in records_read.batch(_BATCH).map(parse):
                    ids = batch["id"].numpy()
                    labels = batch["class"].numpy() if split.labelled else [None] * len(ids)
                    entries = [Entry(i.decode(errors="replace"), name,
                                     None if y is None else int(y), f"{file.path}[{index + k}]")
                               for k, (i, y) in enumerate(zip(ids, labels))]
                    index += len(entries)
                    jobs = list(zip(entries, batch["image"].numpy()))
                    out += _in_threads(jobs, _measure_record, progress)
                if index < file.count:
                    out.append(Entry(f"{file.path.rsplit('/', 1)[-1]}[{index}:]", name, None,
                                     file.path, error=f"{file.count - index} record(s) lost "
                                     f"to a damaged tail (the name counts {file.count})"))
            except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
                # As training says it: a damaged file, or records whose features have other
                # names (read through [data] image_feature = ... in a config)
                raise Unreadable(check.damaged_error(file.path, split.labelled, e,
                                                     layout.features)) from None
    return out


class Unreadable(UserError):
    """A file the check cannot read to its end (a damaged one): training reads the same file
    and says the same of it, or skips its damaged records (--skip-bad-records)."""


@dataclass
class Survey:
    data: str  # the path given
    kind: str  # "layout", "folder" or "csv"
    read: str  # what was read: the layout's size folder, or the source
    class_names: tuple[str, ...]
    entries: list[Entry]
    seconds: float
    note: str = ""  # how the splits were made, when the pass made them
    groups: list[Group] = field(default_factory=list)

    def __post_init__(self):
        if not self.groups:
            self.groups = duplicates.groups([e.fingerprint for e in self.entries])

    @property
    def splits(self) -> list[str]:
        order = ("train", "val", "test", UNSPLIT)
        return sorted({e.split for e in self.entries}, key=order.index)

    def across(self) -> list[Group]:
        """The groups with members in more than one split: leaks."""
        return [g for g in self.groups if len({self.entries[i].split for i in g.members}) > 1]

    def leaked(self) -> dict[str, int]:
        """Images of each split (but train) that have a copy in another split."""
        out: dict[str, int] = {}
        for group in self.across():
            for i in group.members:
                split = self.entries[i].split
                if split != "train":
                    out[split] = out.get(split, 0) + 1
        return {split: out[split] for split in self.splits if split in out}

    def summary(self) -> dict:
        """Everything found, as the JSON of `corolla check-data --out` holds it."""
        names = self.class_names
        # The classes with an image somewhere: a competition layout without classes.txt names
        # 104, of which a small data set may use a few.
        used = sorted({e.label for e in self.entries if e.label is not None and not e.error})
        per_split = {}
        for split in self.splits:
            entries = [e for e in self.entries if e.split == split]
            ok = [e for e in entries if not e.error]
            counts = {}
            for e in ok:
                if e.label is not None:
                    counts[e.label] = counts.get(e.label, 0) + 1
            facts = {"images": len(entries), "unreadable": len(entries) - len(ok)}
            if counts:
                present = list(counts.values())
                facts["classes"] = {_name(names, k): counts.get(k, 0) for k in used}
                facts["classes_missing"] = [_name(names, k) for k in used if k not in counts]
                facts["imbalance"] = round(max(present) / min(present), 3)
            if ok:
                facts["width"] = _spread([e.width for e in ok])
                facts["height"] = _spread([e.height for e in ok])
                facts["aspect"] = _spread([round(e.width / e.height, 3) for e in ok])
            per_split[split] = facts
        within = {s: sum(1 for g in self.groups if {self.entries[i].split for i in g.members}
                         == {s}) for s in self.splits}
        across = self.across()
        return {
            "data": self.data, "kind": self.kind, "read": self.read, "note": self.note,
            "images": len(self.entries), "seconds": round(self.seconds, 3),
            "classes": len(names), "classes_without_images": len(names) - len(used),
            "images_per_second": round(len(self.entries) / max(self.seconds, 1e-9), 1),
            "hash": f"near: pHash (imagehash) within {duplicates.THRESHOLD} of 64 bits and "
                    f"{duplicates.FINE_THRESHOLD} of 256; exact: the same decoded pixels",
            "splits": per_split,
            "unreadable": [{"id": e.id, "split": e.split, "path": e.path, "reason": e.error}
                           for e in self.entries if e.error],
            "duplicates": {
                "groups": len(self.groups), "exact_groups": sum(g.exact for g in self.groups),
                "images": sum(len(g.members) for g in self.groups),
                "within": within, "across_groups": len(across), "across_images": self.leaked(),
                "labels_differ": sum(self.labels_differ(g) for g in self.groups)},
            "groups": [{"exact": g.exact, "labels_differ": self.labels_differ(g),
                        "splits": sorted({self.entries[i].split for i in g.members}),
                        "members": [self._member(i) for i in g.members]}
                       # Conflicting labels first (one of them is wrong), then leaks.
                       for g in sorted(self.groups, key=lambda g: (
                           not self.labels_differ(g), g not in across, g.members))],
        }

    def labels_differ(self, group: Group) -> bool:
        labels = {self.entries[i].label for i in group.members} - {None}
        return len(labels) > 1

    def _member(self, i: int) -> dict:
        e = self.entries[i]
        return {"id": e.id, "split": e.split, "class": None if e.label is None
                else _name(self.class_names, e.label), "path": e.path}


def _name(names, label: int) -> str:
    return names[label].strip() if 0 <= label < len(names) else str(label)


def _spread(values) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _progress(total: int):
    return Progress(total)


def survey(path: str, features=None, log=print,
           max_megapixels: float = MAX_MEGAPIXELS) -> Survey:
    """Reads every image of the data at `path` once (see the module); image files over
    `max_megapixels` are not decoded (unreadable)."""
    from corolla.data import layout as layout_lib

    kind = sources.kind_of(path)
    start = time.monotonic()
    if kind == "layout":
        smallest = min(layout_lib.available_sizes(path))
        layout = layout_lib.open_layout(path, smallest)
        if features is not None:
            layout = layout_lib.with_features(layout, features)
        total = sum(layout.split(s).count for s in ("train", "val", "test")
                    if layout.has_split(s))
        log(f"checking {total} images of {layout.size_dir}")
        entries = _read_layout(layout, _progress(total))
        return Survey(path, kind, layout.size_dir, tuple(layout.class_names), entries,
                      time.monotonic() - start)
    source = sources.scan(path, log)
    log(f"checking {len(source.items)} images of {source.path}")
    entries = _read_items(source.items, _progress(len(source.items)), max_megapixels)
    result = Survey(path, kind, source.path, source.class_names, entries,
                    time.monotonic() - start)
    _split_as_training_does(result, source)
    return result


def _split_as_training_does(result: Survey, source) -> None:
    """Images without a split get the one `corolla train --data` gives them (copies together)."""
    if not needs_split(source):
        return
    try:
        splits = assign_splits(source, Settings(), copies_in(result))
    except UserError as e:
        result.note = f"not split: {e}"
        return
    where = {item.id: name for name, items in splits.items() for item in items}
    for entry in result.entries:
        entry.split = where.get(entry.id, entry.split)
    d = Settings()
    result.note = (f"split as `corolla train --data` splits it (val {d.val_fraction:g}, seed "
                   f"{d.seed}; copies kept in one split)")


def copies_in(result: Survey) -> Copies:
    """The copies a survey found, as a conversion keeps them together (and `dedupe` drops)."""
    groups = {}
    for group in result.groups:
        first = result.entries[group.members[0]].id
        for i in group.members:
            groups[result.entries[i].id] = first
    by_digest: dict[str, list[str]] = {}
    for e in result.entries:
        if e.fingerprint is not None:
            by_digest.setdefault(e.fingerprint.exact, []).append(e.id)
    return Copies(groups, tuple(tuple(ids) for ids in by_digest.values() if len(ids) > 1),
                  near_bits=(duplicates.THRESHOLD, duplicates.FINE_THRESHOLD))


def copies(path: str, root: str | Path, log=print,
           max_megapixels: float = MAX_MEGAPIXELS) -> Copies:
    """The copies among the images of an image folder or CSV (surveyed once, `cached`)."""
    return copies_in(cached(path, root, log=log, max_megapixels=max_megapixels)[0])


# ---- the cache ----

def key(path: str, features=None, max_megapixels: float = MAX_MEGAPIXELS) -> str:
    """The data's key: changes when a file is added, removed, relabelled or touched (or the
    largest image read, which decides what is unreadable)."""
    from corolla.data import layout as layout_lib

    digest = hashlib.sha256(f"{VERSION}\n{duplicates.THRESHOLD}\n{duplicates.FINE_THRESHOLD}\n"
                            f"{max_megapixels:g}\n".encode())
    if sources.kind_of(path) == "layout":
        import tensorflow as tf

        layout = layout_lib.open_layout(path, min(layout_lib.available_sizes(path)))
        from corolla.data.records import COMPETITION

        digest.update(f"{layout.size_dir}\n{features or COMPETITION}\n".encode())
        for name in ("train", "val", "test"):
            if layout.has_split(name):
                for file in layout.split(name).files:
                    stat = tf.io.gfile.stat(file.path)
                    digest.update(f"{file.path}\t{stat.length}\t{stat.mtime_nsec}\n".encode())
    else:
        digest.update(sources.scan(path, log=lambda *a: None).fingerprint().encode())
    return digest.hexdigest()[:16]


def _hex(value: int | None, digits: int) -> str:
    return "" if value is None else f"{value:0{digits}x}"


def _int(text: str) -> int | None:
    return int(text, 16) if text else None


def _to_cache(result: Survey) -> dict:
    return {"version": VERSION, "data": result.data, "kind": result.kind, "read": result.read,
            "class_names": list(result.class_names), "seconds": result.seconds,
            "note": result.note,
            "entries": [[e.id, e.split, e.label, e.path, e.width, e.height,
                         e.fingerprint.exact if e.fingerprint else "",
                         _hex(e.fingerprint.phash, 16) if e.fingerprint else "",
                         _hex(e.fingerprint.fine, 64) if e.fingerprint else "", e.error]
                        for e in result.entries]}


def _from_cache(saved: dict) -> Survey:
    entries = [Entry(i, s, y, p, w, h, Fingerprint(x, _int(ph), _int(f)) if x else None, err)
               for i, s, y, p, w, h, x, ph, f, err in saved["entries"]]
    return Survey(saved["data"], saved["kind"], saved["read"], tuple(saved["class_names"]),
                  entries, saved["seconds"], saved["note"])


def cached(path: str, root: str | Path, features=None, log=print,
           max_megapixels: float = MAX_MEGAPIXELS) -> tuple[Survey, bool]:
    """(the survey of `path`, whether it came from the cache `root/<key>.json`)."""
    file = Path(root) / f"{key(path, features, max_megapixels)}.json"
    if file.is_file():
        try:
            return _from_cache(json.loads(file.read_text())), True
        except (ValueError, KeyError, TypeError):  # a damaged cache file: checked again
            pass
    # A cache that cannot be written is said before the work, not found after it: the check
    # still stands, only it is not kept.
    unkept = _unkept(Path(root))
    if unkept:
        log(f"data check: not cached ({unkept}); it reads the data again next time")
    result = survey(path, features, log, max_megapixels)
    if not unkept:
        try:
            write_text_atomic(file, json.dumps(_to_cache(result)))
        except UserError as e:  # the disk refused it meanwhile (filled up)
            log(f"data check: not cached ({e})")
    return result, False


def _unkept(root: Path) -> str | None:
    """Why the cache folder `root` (made if missing) cannot keep a check; None where it can."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        check_folder(root)
    except OSError as e:
        return f"cannot make {root}: {e.strerror or e}"
    except UserError as e:
        return str(e)
    return None
