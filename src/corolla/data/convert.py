"""`corolla convert SRC OUT`: an image folder or a CSV -> sharded TFRecords in exactly the
competition layout, `OUT/tfrecords-jpeg-SxS/{train,val,test}/NN-SxS-COUNT.tfrec`, with
`OUT/classes.txt` and `OUT/convert.json` (settings, source, counts, skipped files).

- Each image is decoded once by Pillow (greyscale, CMYK, palette, alpha, PNG, EXIF rotation all
  become plain RGB; alpha over white), fitted to each size (`crop`: short side to S then the
  centre; `pad`: long side to S, centred on black) and JPEG-encoded, on all cores.
- Splits: the source's own (`train/ val/ test/` folders, a CSV `split` column), else a split
  stratified by class (scikit-learn) from `seed`, `val_fraction` and `test_fraction`, that
  keeps exact and near-duplicate images (`Copies`, found by `corolla.data.survey`) in one
  split: a photo saved twice never lands in train and in val. `dedupe` keeps one image of each
  group of exact copies. convert.json says what was done (`duplicates`).
- Ids are the files' paths relative to the source; within a split the order is a permutation
  of the sorted ids drawn from `seed`, cut into contiguous shards (so every shard mixes the
  classes, as the competition's do, and a conversion is reproducible).
- A file that does not decode is skipped and listed at the end (`strict`: the first one is an
  error). Everything is written under a temporary name beside OUT and renamed at the end: a
  folder named OUT is always complete. SRC is only read.

Pillow rather than tf.image: TensorFlow cannot apply EXIF rotation or read CMYK JPEGs.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import math
import multiprocessing
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from corolla.data import duplicates
from corolla.data.classes import CLASSES_FILE, format_classes_file
from corolla.data.sources import SPLIT_FOLDERS, ImageSource, Item
from corolla.errors import UserError, check_stop
from corolla.files import UNMAKEABLE, UNWRITABLE, hold_lock, lock_is_free

# Bump when the output of a conversion changes, so caches are not reused (2: copies are kept
# in one split).
VERSION = 2
MANIFEST = "convert.json"  # written last, inside the temporary folder: marks a complete OUT
FITS = ("crop", "pad")
MB = 1 << 20
TPU_CORES = 8  # a TPU v3-8: enough files for every core to read its own
MIN_FILE_MB = 2  # ... unless that makes files smaller than this


# The largest image decoded, in megapixels, wherever a file from elsewhere is read (convert,
# the data check, train on a folder, predict and explain): any camera's photo (150 MP medium
# format, a 200 MP phone mode), not a file whose pixels take a machine's memory (a 0.9 MB PNG
# can declare 31000 x 31000, 961 MP, 2.9 GB decoded). Checked on the header, before decoding.
MAX_MEGAPIXELS = 200.0


@contextlib.contextmanager
def opened(file, max_megapixels: float = MAX_MEGAPIXELS):
    """The Pillow image of `file` (a path or a binary file), only its header read: one over
    `max_megapixels` raises ValueError before any pixel is decoded."""
    Image.MAX_IMAGE_PIXELS = None  # Pillow's own guard off: the limit is the caller's, here
    with Image.open(file) as image:
        width, height = image.size
        if width * height > max_megapixels * 1e6:
            raise ValueError(f"{width}x{height} is {width * height / 1e6:.0f} megapixels, over "
                             f"the limit of {max_megapixels:g} (--max-megapixels)")
        yield image


@dataclass(frozen=True)
class Settings:
    image_sizes: tuple[int, ...] = (224,)
    fit: str = "crop"  # "crop": short side to S, centre crop; "pad": long side to S, padded
    quality: int = 95  # JPEG quality of the written images
    seed: int = 42  # the split and the order
    val_fraction: float = 0.2  # of the labelled images, when the source has no val split
    test_fraction: float = 0.0  # of the labelled images, when the source has no test split
    shard_mb: float = 150.0  # target file size: cloud storage reads 100-200 MB files best
    strict: bool = False  # the first unreadable image is an error (default: skip and list)
    workers: int = 0  # encoding processes; 0 = every core
    # The largest image read (`MAX_MEGAPIXELS`); --max-megapixels raises it for larger scans.
    max_megapixels: float = MAX_MEGAPIXELS
    dedupe: bool = False  # keep one image of each group of exact copies (see `Copies`)

    def check(self) -> Settings:
        if not self.image_sizes or any(s < 8 or s > 4096 for s in self.image_sizes):
            raise UserError(f"--image-size must be between 8 and 4096, got "
                            f"{', '.join(map(str, self.image_sizes)) or 'none'}")
        if self.fit not in FITS:
            raise UserError(f"--fit must be crop or pad, got {self.fit!r}")
        if not 1 <= self.quality <= 100:
            raise UserError(f"--quality must be between 1 and 100, got {self.quality}")
        if not (0 <= self.val_fraction < 1 and 0 <= self.test_fraction < 1
                and self.val_fraction + self.test_fraction < 1):
            raise UserError(f"--val-fraction ({self.val_fraction}) and --test-fraction "
                            f"({self.test_fraction}) must be in [0, 1) and leave some for train")
        if not self.shard_mb > 0:
            raise UserError(f"--shard-mb must be positive, got {self.shard_mb}")
        if not 0 <= self.seed < 2**32:  # what scikit-learn's and NumPy's generators take
            raise UserError(f"--seed must be an integer from 0 to {2**32 - 1}, got {self.seed}")
        if not self.max_megapixels > 0:
            raise UserError(f"--max-megapixels must be positive, got {self.max_megapixels}")
        if self.workers < 0:
            raise UserError(f"--workers must be 0 (every core) or a number of processes, got "
                            f"{self.workers}")
        return replace(self, image_sizes=tuple(sorted(set(self.image_sizes))))

    def key(self) -> dict:
        """What decides the output (not `strict` nor `workers`; nor `max_megapixels`, which
        only says which giant files are skipped, so that caches made before it stay valid)."""
        return {k: v for k, v in asdict(self).items()
                if k not in ("strict", "workers", "max_megapixels")}


# ---- one image: what the conversion writes, and what "reading the source directly" sees ----

def open_rgb(path: str, largest: int, max_megapixels: float = Settings.max_megapixels):
    """The file as an upright RGB Pillow image, decoded at the smallest JPEG scale (1/2 .. 1/8)
    that still covers `largest` on both sides (libjpeg's DCT scaling: several times faster).
    An image over `max_megapixels` is refused before it is decoded."""
    with opened(path, max_megapixels) as image:
        image.draft(None, (largest, largest))
        image.load()  # a truncated or corrupt file fails here
        with contextlib.suppress(Exception):  # a broken EXIF block: keep the pixels as stored
            image = ImageOps.exif_transpose(image)
        if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
            image = image.convert("RGBA")
            canvas = Image.new("RGB", image.size, (255, 255, 255))
            canvas.paste(image, mask=image.getchannel("A"))
            return canvas
        if image.mode.startswith("I;16") or image.mode == "I":  # 16-bit PNG: keep the top 8 bits
            image = Image.fromarray((np.asarray(image, np.uint32) >> 8).astype(np.uint8))
        return image.convert("RGB")


def _fit(image, size: int, fit: str):
    w, h = image.size
    scale = size / (min(w, h) if fit == "crop" else max(w, h))
    new = (max(size if fit == "crop" else 1, round(w * scale)),
           max(size if fit == "crop" else 1, round(h * scale)))
    if fit == "pad":
        new = (min(size, new[0]), min(size, new[1]))
    resized = image.resize(new, Image.BICUBIC, reducing_gap=3.0) if new != image.size else image
    if fit == "crop":
        left, top = (new[0] - size) // 2, (new[1] - size) // 2
        return resized.crop((left, top, left + size, top + size))
    canvas = Image.new("RGB", (size, size))
    canvas.paste(resized, ((size - new[0]) // 2, (size - new[1]) // 2))
    return canvas


def load_image(path: str, size: int, fit: str = "crop",
               max_megapixels: float = MAX_MEGAPIXELS) -> np.ndarray:
    """The pixels a conversion at `size` writes for `path` (before JPEG): uint8 [S, S, 3]."""
    return np.asarray(_fit(open_rgb(path, size, max_megapixels), size, fit))


def _encode(task) -> tuple[int, list[bytes] | None, str]:
    """(position, JPEG bytes per size, "") or (position, None, why it failed): runs in the
    worker processes, so it returns errors instead of raising them."""
    position, path, sizes, fit, quality, max_megapixels = task
    try:
        image = open_rgb(path, max(sizes), max_megapixels)
        out = []
        for size in sizes:
            buffer = io.BytesIO()
            _fit(image, size, fit).save(buffer, format="JPEG", quality=quality)
            out.append(buffer.getvalue())
        return position, out, ""
    except Exception as e:  # noqa: BLE001 - any failure means this file cannot be used
        reason = " ".join(str(e).split()) or type(e).__name__
        return position, None, reason


# ---- splits, order, shards ----

@dataclass(frozen=True)
class Copies:
    """The copies among a source's images (`corolla.data.survey.copies`)."""
    groups: dict = field(default_factory=dict)  # id -> its group's first id (exact or near)
    exact: tuple = ()  # tuples of the ids of images with the same pixels


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


def shard_count(count: int, total_bytes: float, shard_mb: float) -> int:
    """Files for a split: about `shard_mb` each; at least as many as a TPU v3-8 has cores when
    the split is large enough to make files of `MIN_FILE_MB`; at least one; never empty."""
    by_size = math.ceil(total_bytes / (shard_mb * MB))
    by_cores = min(TPU_CORES, int(total_bytes // (MIN_FILE_MB * MB)))
    return max(1, min(count, max(by_size, by_cores)))


class _Progress:
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


@dataclass
class Summary:
    source: str
    out: str
    counts: dict = field(default_factory=dict)  # split -> {class index: images}
    files: dict = field(default_factory=dict)  # split -> files per size
    skipped: list = field(default_factory=list)  # [(id, reason)]
    seconds: float = 0.0
    duplicates: dict = field(default_factory=dict)  # what was done about copies (convert.json)

    @property
    def images(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())


def _write_split(name: str, items: list[Item], out: Path, settings: Settings, pool,
                 progress: _Progress, summary: Summary, log=print) -> None:
    import tensorflow as tf

    from corolla.data import records

    sizes = settings.image_sizes
    tasks = [(k, item.path, sizes, settings.fit, settings.quality, settings.max_megapixels)
             for k, item in enumerate(items)]
    results = pool.imap(_encode, tasks, chunksize=8) if pool else map(_encode, tasks)
    labelled = name != "test"
    folders = [out / f"tfrecords-jpeg-{s}x{s}" / name for s in sizes]
    for folder in folders:
        folder.mkdir(parents=True)
    bounds: list[list[int]] | None = None
    writers: list = [None] * len(sizes)
    shard = [-1] * len(sizes)
    written: list[list[tuple[Path, int]]] = [[] for _ in sizes]
    pending: list = []
    counts: Counter = Counter()

    def plan_shards():
        ok = [r for r in pending if r[1] is not None] or [(0, [b"x" * 50_000] * len(sizes))]
        mean = [np.mean([len(r[1][k]) for r in ok]) for k in range(len(sizes))]
        out_bounds = []
        for k in range(len(sizes)):
            n = shard_count(len(items), mean[k] * len(items), settings.shard_mb)
            out_bounds.append([len(items) * j // n for j in range(n + 1)])
        return out_bounds

    def put(position, jpegs, reason):
        check_stop()
        item = items[position]
        progress.step(name)
        if jpegs is None:
            if settings.strict:
                raise UserError(f"{item.path} is not a readable image ({reason}); remove or "
                                f"replace it, or convert without --strict to skip it")
            summary.skipped.append((item.id, reason))
            return
        label = item.label if labelled else None
        for k, jpeg in enumerate(jpegs):
            while position >= bounds[k][shard[k] + 1]:  # the next shard begins
                if writers[k] is not None:
                    writers[k].close()
                shard[k] += 1
                path = folders[k] / f".part-{shard[k]:05d}"
                writers[k] = tf.io.TFRecordWriter(str(path))
                written[k].append((path, 0))
            writers[k].write(records.serialize(jpeg, item.id, label))
            path, n = written[k][-1]
            written[k][-1] = (path, n + 1)
        if labelled:
            counts[item.label] += 1
        else:
            counts[-1 if item.label is None else item.label] += 1

    for result in results:
        if bounds is None:
            pending.append(result)
            if len(pending) < min(len(items), 64):
                continue
            bounds = plan_shards()
            for r in sorted(pending):
                put(*r)
            continue
        put(*result)
    if bounds is None and pending:
        bounds = plan_shards()
        for r in sorted(pending):
            put(*r)
    for writer in writers:
        if writer is not None:
            writer.close()
    for k, size in enumerate(sizes):
        kept = [(p, n) for p, n in written[k] if n]
        for index, (path, n) in enumerate(kept):
            path.rename(path.parent / records.shard_name(index, size, n))
        for path, n in written[k]:
            if not n:
                path.unlink()
        if not kept:
            failed = sorted((i, r) for i, r in summary.skipped
                            if i in {item.id for item in items})
            for line in _skipped_lines(failed):  # the whole list, which the error points at
                log(line)
            first = "; ".join(f"{i}: {r}" for i, r in failed[:3])
            raise UserError(f"no image of the {name} split of {summary.source} could be read "
                            f"({len(items)} skipped, e.g. {first}); all of them are listed "
                            f"above")
    summary.counts[name] = dict(sorted(counts.items()))
    summary.files[name] = [len([1 for _, n in w if n]) for w in written]


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


def convert(source: ImageSource, out: str | Path, settings: Settings = Settings(),
            log=print, copies: Copies | None = None) -> Summary:
    """Writes `source` into `out` (which must not exist) in the competition layout; the
    split it makes keeps `copies` (found by `corolla.data.survey.copies`) together."""
    settings = settings.check()
    out = Path(out).absolute()
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
    summary = Summary(source=source.path, out=str(out), duplicates=_copies_record(
        source, settings, copies, removed))
    total = sum(len(v) for v in splits.values())
    workers = settings.workers or os.cpu_count() or 1
    # Few images: the process start-up would cost more than it saves.
    workers = 1 if total < 64 else workers
    unguarded = _unguarded_main() if workers > 1 else None
    if unguarded is not None:
        workers = 1
        log(f"converting in this process: {unguarded} runs without an `if __name__ == "
            f"\"__main__\":` guard, and each worker process would run it again; add the guard "
            f"to convert on every core")
    start = time.monotonic()
    progress = _Progress(total)
    log(f"converting {total} images of {source.path} into {out} "
        f"({', '.join(f'{s}x{s}' for s in settings.image_sizes)}, fit {settings.fit}, "
        f"quality {settings.quality}, {workers} worker(s))")
    try:
        # "spawn": the workers import only Pillow and NumPy, never this process's TensorFlow.
        pool = multiprocessing.get_context("spawn").Pool(workers) if workers > 1 else None
        try:
            for name in SPLIT_FOLDERS:
                if splits[name]:
                    _write_split(name, splits[name], tmp, settings, pool, progress, summary,
                                 log)
        finally:
            if pool is not None:
                pool.terminate()
        summary.seconds = time.monotonic() - start
        (tmp / CLASSES_FILE).write_text(format_classes_file(source.class_names))
        (tmp / MANIFEST).write_text(json.dumps(_manifest(source, settings, summary,
                                                         fingerprint), indent=1) + "\n")
        (tmp / WRITER).unlink()
        try:
            tmp.rename(out)
        except OSError:  # another conversion into `out` finished first
            if not out.exists():
                raise
            raise UserError(f"{out} already exists (another process wrote it meanwhile); "
                            f"conversion never overwrites: remove it or choose another "
                            f"OUT") from None
    except Exception as e:
        _refuse_unwritable(e, out)
        raise
    finally:
        os.close(writer)
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    for line in describe(summary, source.class_names, settings):
        log(line)
    return summary


PARTIAL = ".partial-"  # .OUT.partial-XXXXXXXX: a conversion under way (or killed)
WRITER = ".writer"  # inside it, locked (flock) by the process writing it


def remove_stale_partials(folder: Path, log=print) -> list[Path]:
    """Removes the temporary folders of killed conversions in `folder` (each as large as a
    whole conversion): those whose writer's lock is free. A live conversion's stays."""
    removed = []
    for tmp in sorted(Path(folder).glob(f".*{PARTIAL}*")):
        lock = tmp / WRITER
        # No lock file: not made by this code, or just being made. A held one: still running.
        if not lock.is_file() or not lock_is_free(lock):
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp)
        log(f"removed {tmp}, left by a conversion that was stopped")
    return removed


def _refuse_unwritable(error: BaseException, out: Path) -> None:
    """A full or read-only disk (an OSError, or TensorFlow's ResourceExhaustedError from the
    record writer) as one line; anything else is left to the caller."""
    if isinstance(error, OSError) and error.errno in UNWRITABLE:
        what = error.strerror
    elif type(error).__name__ == "ResourceExhaustedError":  # tf.errors, without importing TF
        what = "the disk is full"
    else:
        return
    raise UserError(f"cannot write the conversion into {out.parent} ({what}); free space or "
                    f"choose an OUT on a writable disk, then run the command again") from None


def _manifest(source: ImageSource, settings: Settings, summary: Summary,
              fingerprint: str) -> dict:
    return {"version": VERSION, "source": source.path, "kind": source.kind,
            "fingerprint": fingerprint, "settings": settings.key(),
            "images": {name: sum(c.values()) for name, c in summary.counts.items()},
            "per_class": {name: {str(k): v for k, v in c.items()}
                          for name, c in summary.counts.items()},
            "files": summary.files, "seconds": round(summary.seconds, 3),
            "duplicates": summary.duplicates,
            "skipped": [{"id": i, "reason": r} for i, r in summary.skipped]}


def _copies_record(source: ImageSource, settings: Settings, copies: Copies | None,
                   removed: list) -> dict:
    """convert.json's `duplicates`: whether copies were looked for, kept together, removed."""
    if copies is None:
        return {"searched": False}
    grouped = set(copies.groups)
    return {"searched": True, "near_bits": [duplicates.THRESHOLD, duplicates.FINE_THRESHOLD],
            "groups": len(set(copies.groups.values())), "images_in_groups": len(grouped),
            "split": ("made by the conversion: copies kept in one split"
                      if needs_split(source) else "the source's own (copies across it stay)"),
            "dedupe": settings.dedupe,
            "removed": [{"id": gone, "copy_of": kept} for gone, kept in removed]}


def describe(summary: Summary, class_names, settings: Settings) -> list[str]:
    """The summary: images per split and per class, the skipped files (one line each)."""
    rate = summary.images / max(summary.seconds, 1e-9)
    lines = [f"converted {summary.images} images in {summary.seconds:.1f} s ({rate:.0f} "
             f"images/s) into {summary.out}"]
    for name, counts in summary.counts.items():
        files = "/".join(map(str, summary.files[name]))
        lines.append(f"  {name:5s} {sum(counts.values()):7d} images in {files} file(s)")
    names = [n for n in summary.counts if n != "test" or -1 not in summary.counts[n]]
    if names:
        width = max(len(n) for n in class_names) if class_names else 5
        lines.append(f"  {'class':{width}s}  " + "  ".join(f"{n:>6s}" for n in names))
        for index, cls in enumerate(class_names):
            lines.append(f"  {cls:{width}s}  " + "  ".join(
                f"{summary.counts[n].get(index, 0):6d}" for n in names))
    copies = summary.duplicates
    if copies.get("searched"):
        lines.append(f"  copies: {copies['groups']} group(s) of exact or near duplicates "
                     f"({copies['images_in_groups']} images); split: {copies['split']}")
        if copies["removed"]:
            lines.append(f"  dedupe: left out {len(copies['removed'])} exact copies (listed "
                         f"in {MANIFEST})")
    lines += _skipped_lines(summary.skipped)
    return lines


def _skipped_lines(skipped: list) -> list[str]:
    if not skipped:
        return []
    return [f"skipped {len(skipped)} file(s) that are not readable images:",
            *(f"  warning: {i}: {r}" for i, r in skipped)]


# Cache folders this process has said it reads: one command opens its data in several steps
# (train, evaluate, predict), and says so once.
_ANNOUNCED: set[Path] = set()


def cache_folder(source: ImageSource, settings: Settings, root: Path) -> Path:
    """Where `cached` keeps `source` converted with `settings`: a folder named by a key of the
    source's files (paths, sizes, modification times, labels) and the settings, so that the
    same files give the same folder, and the same split."""
    key = hashlib.sha256(json.dumps({"version": VERSION, "source": source.fingerprint(),
                                     "settings": settings.check().key()},
                                    sort_keys=True).encode())
    return Path(root) / key.hexdigest()[:16]


def announce_reuse(source_path: str, out: Path, log=print) -> None:
    """Says once per process that a conversion is read again (and what it left out)."""
    if out in _ANNOUNCED:
        return
    manifest = json.loads((out / MANIFEST).read_text())
    skipped = len(manifest.get("skipped", ()))
    note = f"; {skipped} unreadable file(s) left out (see {out / MANIFEST})" if skipped else ""
    log(f"data: {source_path} unchanged since its conversion: reading {out}{note}")
    _ANNOUNCED.add(out)


def cached(source: ImageSource, settings: Settings, root: Path, log=print,
           copies=None) -> Path:
    """`source` converted with `settings` under `root/<key>` (`cache_folder`): reused while
    neither the source's files nor the settings change. `copies`: a function that finds the
    source's copies (`Copies`), called only when it is converted."""
    settings = settings.check()
    out = cache_folder(source, settings, root)
    if (out / MANIFEST).is_file():
        announce_reuse(source.path, out, log)
        return out
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno not in UNMAKEABLE:
            raise
        raise UserError(f"cannot make the conversion cache {root} ({e.strerror}); set "
                        f"COROLLA_CACHE_DIR to a writable folder") from None
    log(f"data: converting {source.path} into the cache {out} (reused while the files and "
        f"settings are unchanged)")
    try:
        convert(source, out, settings, log=log, copies=copies() if copies else None)
    except UserError:
        if (out / MANIFEST).is_file():  # another process converted it first
            return out
        raise
    return out
