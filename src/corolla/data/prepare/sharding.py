"""`corolla convert SRC OUT`: an image folder or a CSV -> sharded TFRecords in exactly the
competition layout, `OUT/tfrecords-jpeg-SxS/{train,val,test}/NN-SxS-COUNT.tfrec`, with
`OUT/classes.txt` and `OUT/convert.json` (settings, source, counts, skipped files).

- Each image is decoded once by Pillow (greyscale, CMYK, palette, alpha, PNG, EXIF rotation all
  become plain RGB; alpha over white), fitted to each size (`crop`: short side to S then the
  centre; `pad`: long side to S, centred on black) and JPEG-encoded, on all cores
  (`photos.encode`).
- Splits: the source's own, else a stratified split that keeps exact and near-duplicate
  images (`Copies`, found by `corolla.data.audit.survey`) in one split (`splits`).
  convert.json says what was done (`summary.manifest`).
- Within a split the images' order (`splits.assign_splits`) is cut into contiguous shards, so
  every shard mixes the classes, as the competition's do.
- A file that does not decode is skipped and listed at the end (`strict`: the first one is an
  error). Everything is written under a temporary name beside OUT and renamed at the end: a
  folder named OUT is always complete. SRC is only read.
"""

from __future__ import annotations

import ast
import json
import math
import multiprocessing
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import numpy as np

from corolla.data.classes import CLASSES_FILE, format_classes_file
from corolla.data.prepare.image_files import encode
from corolla.data.prepare.settings import MANIFEST, Settings
from corolla.data.prepare.sources import SPLIT_FOLDERS, ImageSource, Item
from corolla.data.prepare.splits import Copies, assign_splits, dedupe
from corolla.data.prepare.summary import (Summary, copies_record, manifest, skipped_lines,
                                          summary_lines)
from corolla.errors import UserError
from corolla.stopping import check_stop
from corolla.files import (PARTIAL_FOLDER, WRITER, hold_lock, remove_stale_folders,
                           unwritable)

MB = 1 << 20
TPU_CORES = 8  # a TPU v3-8: enough files for every core to read its own
MIN_FILE_MB = 2  # ... unless that makes files smaller than this


def shard_count(count: int, total_bytes: float, shard_mb: float) -> int:
    """Files for a split: about `shard_mb` each; at least as many as a TPU v3-8 has cores when
    the split is large enough to make files of `MIN_FILE_MB`; at least one; never empty."""
    by_size = math.ceil(total_bytes / (shard_mb * MB))
    by_cores = min(TPU_CORES, int(total_bytes // (MIN_FILE_MB * MB)))
    return max(1, min(count, max(by_size, by_cores)))


class Progress:
    """One line on a terminal, redrawn at most 10 times a second; nothing otherwise."""

    def __init__(self, total: int, enabled: bool | None = None):
        self.total, self.done, self.start, self.shown = total, 0, time.monotonic(), 0.0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def step(self, label: str) -> None:
        self.done += 1
        now = time.monotonic()
        if not self.enabled or (now - self.shown < 0.1 and self.done < self.total):
            return
        self.shown = now
        width = 30
        filled = width * self.done // max(1, self.total)
        rate = self.done / max(1e-9, now - self.start)
        sys.stderr.write(f"\r{label:5s} [{'#' * filled}{'.' * (width - filled)}] "
                         f"{self.done}/{self.total} {rate:.0f} img/s")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()



class _SplitWriter:
    """One split's images, put in order of position into shards of about `shard_mb` per size.
    The shards are planned from the first images' encoded sizes (`take` holds up to 64)."""

    def __init__(self, name: str, items: list[Item], out: Path, settings: Settings,
                 progress: Progress, summary: Summary):
        self.name, self.items, self.settings = name, items, settings
        self.progress, self.summary = progress, summary
        self.sizes = settings.image_sizes
        self.labelled = name != "test"
        self.folders = [out / f"tfrecords-jpeg-{s}x{s}" / name for s in self.sizes]
        for folder in self.folders:
            folder.mkdir(parents=True)
        self.bounds: list[list[int]] | None = None
        self.writers: list = [None] * len(self.sizes)
        self.shard = [-1] * len(self.sizes)
        self.written: list[list[tuple[Path, int]]] = [[] for _ in self.sizes]
        self.pending: list = []
        self.counts: Counter = Counter()

    def take(self, result) -> None:
        """One worker's result: held until the shards are planned, then put."""
        if self.bounds is not None:
            self.put(*result)
            return
        self.pending.append(result)
        if len(self.pending) >= min(len(self.items), 64):
            self.flush()

    def flush(self) -> None:
        """Plans the shards from the results held, and puts those."""
        if self.bounds is None and self.pending:
            self.bounds = self._plan()
            for r in sorted(self.pending):
                self.put(*r)

    def _plan(self) -> list[list[int]]:
        sizes, n_items = self.sizes, len(self.items)
        ok = [r for r in self.pending if r[1] is not None] or [(0, [b"x" * 50_000] * len(sizes))]
        mean = [np.mean([len(r[1][k]) for r in ok]) for k in range(len(sizes))]
        out_bounds = []
        for k in range(len(sizes)):
            n = shard_count(n_items, mean[k] * n_items, self.settings.shard_mb)
            out_bounds.append([n_items * j // n for j in range(n + 1)])
        return out_bounds

    def put(self, position: int, jpegs, reason: str) -> None:
        from corolla.data import records

        check_stop()
        item = self.items[position]
        self.progress.step(self.name)
        if jpegs is None:
            if self.settings.strict:
                raise UserError(f"{item.path} is not a readable image ({reason}); remove or "
                                f"replace it, or convert without --strict to skip it")
            self.summary.skipped.append((item.id, reason))
            return
        label = item.label if self.labelled else None
        for k, jpeg in enumerate(jpegs):
            while position >= self.bounds[k][self.shard[k] + 1]:  # the next shard begins
                self._next_shard(k)
            self.writers[k].write(records.serialize(jpeg, item.id, label))
            path, n = self.written[k][-1]
            self.written[k][-1] = (path, n + 1)
        if self.labelled:
            self.counts[item.label] += 1
        else:
            self.counts[-1 if item.label is None else item.label] += 1

    def _next_shard(self, k: int) -> None:
        import tensorflow as tf

        if self.writers[k] is not None:
            self.writers[k].close()
        self.shard[k] += 1
        path = self.folders[k] / f".part-{self.shard[k]:05d}"
        self.writers[k] = tf.io.TFRecordWriter(str(path))
        self.written[k].append((path, 0))

    def close(self, log=print) -> None:
        """Names each size's shards by their counts (empty ones removed) and records the split
        in the summary; a split of which no image could be read is an error."""
        from corolla.data import records

        for writer in self.writers:
            if writer is not None:
                writer.close()
        for k, size in enumerate(self.sizes):
            kept = [(p, n) for p, n in self.written[k] if n]
            for index, (path, n) in enumerate(kept):
                path.rename(path.parent / records.shard_name(index, size, n))
            for path, n in self.written[k]:
                if not n:
                    path.unlink()
            if not kept:
                self._refuse_unread(log)
        self.summary.counts[self.name] = dict(sorted(self.counts.items()))
        self.summary.files[self.name] = [len([1 for _, n in w if n]) for w in self.written]

    def _refuse_unread(self, log) -> None:
        ids = {item.id for item in self.items}
        failed = sorted((i, r) for i, r in self.summary.skipped if i in ids)
        for line in skipped_lines(failed):  # the whole list, which the error points at
            log(line)
        first = "; ".join(f"{i}: {r}" for i, r in failed[:3])
        raise UserError(f"no image of the {self.name} split of {self.summary.source} could be "
                        f"read ({len(self.items)} skipped, e.g. {first}); all of them are "
                        f"listed above")


def _write_split(name: str, items: list[Item], out: Path, settings: Settings, pool,
                 progress: Progress, summary: Summary, log=print) -> None:
    sizes = settings.image_sizes
    tasks = [(k, item.path, sizes, settings.fit, settings.quality, settings.max_megapixels)
             for k, item in enumerate(items)]
    results = pool.imap(encode, tasks, chunksize=8) if pool else map(encode, tasks)
    writer = _SplitWriter(name, items, out, settings, progress, summary)
    for result in results:
        writer.take(result)
    writer.flush()
    writer.close(log)


def _unguarded_main() -> str | None:
    """The main script, when worker processes cannot safely start from it; else None.
    A "spawn" worker runs the main script again as `__mp_main__` (multiprocessing's rule, for
    scripts and `python -m module` alike, not for a package's __main__ or an interactive
    session). A script that calls Corolla at its top level without the `__main__` guard would
    start the conversion again in every worker, which Python refuses ("... before the current
    process has finished its bootstrapping phase"), and the pool starts new workers forever.
    A script that cannot be read is taken as unguarded."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        if spec.name == "__main__" or spec.name.endswith(".__main__"):
            return None
        path = spec.origin
    else:
        path = getattr(main, "__file__", None)
    if not path or Path(path).stem == "ipython":
        return None
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return path
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            sides = [node.test.left, *node.test.comparators]
            if {"__name__", "__main__"} <= {getattr(n, "id", getattr(n, "value", None))
                                            for n in sides}:
                return None
    return path


def _check_out(source: ImageSource, out: Path) -> None:
    """Refuses an OUT that exists, that lies inside the source folder, or whose folder is not
    there."""
    if out.exists():
        raise UserError(f"{out} already exists; conversion never overwrites: remove it or "
                        f"choose another OUT")
    src = Path(source.path)
    src_dir = src if src.is_dir() else src.parent
    if source.kind == "folder" and (out == src_dir or src_dir in out.parents):
        raise UserError(f"{out} is inside the source folder {src_dir}, which conversion never "
                        f"modifies; choose an OUT outside it")
    if not out.parent.is_dir():
        what = "is a file, not a folder" if out.parent.exists() else "does not exist"
        raise UserError(f"{out.parent} (where {out.name} would go) {what}; choose an OUT in an "
                        f"existing folder")


def _workers(settings: Settings, total: int, log=print) -> int:
    """The encoding processes for `total` images (1: this process)."""
    workers = settings.workers or os.cpu_count() or 1
    # Few images: the process start-up would cost more than it saves.
    workers = 1 if total < 64 else workers
    unguarded = _unguarded_main() if workers > 1 else None
    if unguarded is not None:
        workers = 1
        log(f"converting in this process: {unguarded} runs without an `if __name__ == "
            f"\"__main__\":` guard, and each worker process would run it again; add the guard "
            f"to convert on every core")
    return workers


def _write_splits(splits: dict[str, list[Item]], tmp: Path, settings: Settings, workers: int,
                  progress: Progress, summary: Summary, log=print) -> None:
    # "spawn": the workers import only Pillow and NumPy, never this process's TensorFlow.
    pool = multiprocessing.get_context("spawn").Pool(workers) if workers > 1 else None
    try:
        for name in SPLIT_FOLDERS:
            if splits[name]:
                _write_split(name, splits[name], tmp, settings, pool, progress, summary, log)
    finally:
        if pool is not None:
            pool.terminate()


def _rename(tmp: Path, out: Path) -> None:
    try:
        tmp.rename(out)
    except OSError:  # another conversion into `out` finished first
        if not out.exists():
            raise
        raise UserError(f"{out} already exists (another process wrote it meanwhile); "
                        f"conversion never overwrites: remove it or choose another "
                        f"OUT") from None


def convert(source: ImageSource, out: str | Path, settings: Settings = Settings(),
            log=print, copies: Copies | None = None) -> Summary:
    """Writes `source` into `out` (which must not exist) in the competition layout; the
    split it makes keeps `copies` (found by `corolla.data.audit.survey.copies`) together."""
    settings = settings.check()
    out = Path(out).absolute()
    _check_out(source, out)
    # The source as it was listed: a file deleted while it converts is skipped and listed
    # like any unreadable one, and must not fail the manifest at the end.
    fingerprint = source.fingerprint()
    removed = []
    if settings.dedupe:
        if copies is None:
            raise ValueError("dedupe needs the copies found in the source (survey.copies)")
        source, removed = dedupe(source, copies)
        for gone, kept in removed:
            log(f"dedupe: left out {gone}, the same pixels as {kept}")
    splits = assign_splits(source, settings, copies)
    remove_stale_partials(out.parent, log)
    tmp = out.with_name(f".{out.name}{PARTIAL}{uuid.uuid4().hex[:8]}")
    try:
        tmp.mkdir()
    except OSError as e:
        _refuse_unwritable(e, out)
    writer = hold_lock(tmp / WRITER)  # released when this process ends, however it ends
    summary = Summary(source=source.path, out=str(out), duplicates=copies_record(
        source, settings, copies, removed))
    total = sum(len(v) for v in splits.values())
    workers = _workers(settings, total, log)
    start = time.monotonic()
    progress = Progress(total)
    log(f"converting {total} images of {source.path} into {out} "
        f"({', '.join(f'{s}x{s}' for s in settings.image_sizes)}, fit {settings.fit}, "
        f"quality {settings.quality}, {workers} worker(s))")
    try:
        _write_splits(splits, tmp, settings, workers, progress, summary, log)
        summary.seconds = time.monotonic() - start
        (tmp / CLASSES_FILE).write_text(format_classes_file(source.class_names))
        (tmp / MANIFEST).write_text(json.dumps(manifest(source, settings, summary,
                                                        fingerprint), indent=1) + "\n")
        (tmp / WRITER).unlink()
        _rename(tmp, out)
    except Exception as e:
        _refuse_unwritable(e, out)
        raise
    finally:
        os.close(writer)
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    for line in summary_lines(summary, source.class_names, settings):
        log(line)
    return summary


PARTIAL = PARTIAL_FOLDER  # .OUT.partial-XXXXXXXX: a conversion under way (or killed)


def remove_stale_partials(folder: Path, log=print) -> list[Path]:
    """Removes the temporary folders of killed conversions in `folder` (each as large as a
    whole conversion); a live conversion's stays (`files.remove_stale_folders`)."""
    return remove_stale_folders(folder, "a conversion", log)


def _refuse_unwritable(error: BaseException, out: Path) -> None:
    """A full, limited or read-only disk (an OSError, or TensorFlow's error from the record
    writer) as one line; anything else is left to the caller."""
    what = unwritable(error)
    if what is None:
        return
    raise UserError(f"cannot write the conversion into {out.parent} ({what}); free space or "
                    f"choose an OUT on a writable disk, then run the command again") from None

