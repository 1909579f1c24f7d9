"""Where images come from: image folders and CSVs listed as labelled items (`scan`).

A data path is one of (`corolla.data.datasets.open_data` turns any of them into a Layout):

- the competition layout, `PATH/tfrecords-jpeg-SxS/{train,val,test}/*.tfrec` (local or gs://),
  read as it is; with `features` (config `[data.features]`), records whose features have other
  names are read by the same parser, without a copy;
- an image folder, one subfolder per class (as `keras.utils.image_dataset_from_directory`),
  optionally under `train/ val/ test/` top folders (`test/` may hold unlabelled files);
- a CSV file with the columns `path,label` (and optionally `split`): paths relative to the
  CSV's folder or absolute, labels as class names or integers.

Image folders and CSVs are converted once into the competition layout (`convert`), into a
cache folder keyed by the source's content and the conversion settings, so that training,
evaluation and prediction all read TFRecords through one pipeline.

Class names: a `classes.txt` beside the data (one name a line) wins; otherwise the sorted class
folder names, or the CSV's label names (sorted); integer labels without a classes.txt are named
"0", "1", ...; a competition layout without classes.txt has the competition's 104 classes.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from corolla.data.classes import CLASSES_FILE, check_names, read_classes_file
from corolla.data.folders import size_folders
from corolla.errors import UserError
from corolla.files import IMAGE_SUFFIXES, file_kind, is_image_file, is_remote

SPLIT_FOLDERS = ("train", "val", "test")


@dataclass(frozen=True)
class Item:
    """One image of a source."""
    path: str  # absolute path of the file
    id: str  # the record id: the file's path relative to the source (POSIX), unique and stable
    label: int | None  # None: unlabelled (a test file)
    split: str | None  # "train", "val", "test", or None: assigned by the conversion's split


@dataclass(frozen=True)
class ImageSource:
    """An image folder or a CSV, listed: nothing is decoded yet."""
    path: str  # the folder or the CSV file, absolute
    kind: str  # "folder" or "csv"
    items: tuple[Item, ...]
    class_names: tuple[str, ...]

    def fingerprint(self) -> str:
        """Changes whenever a listed file is added, removed, relabelled, resized or touched."""
        digest = hashlib.sha256(f"{self.kind}\n{self.path}\n".encode())
        digest.update("\n".join(self.class_names).encode())
        for item in self.items:
            stat = os.stat(item.path)
            digest.update(f"\n{item.id}\t{item.label}\t{item.split}\t{stat.st_size}\t"
                          f"{stat.st_mtime_ns}".encode())
        return digest.hexdigest()


def kind_of(path: str) -> str:
    """"layout", "folder" or "csv"; a local path that is no data (missing, a file but not a
    CSV, .tfrec files outside the layout) is a one-line UserError. Decided without TensorFlow,
    so that `corolla train` can say so before importing it. A remote path is taken as a layout
    (only TFRecords are read from a bucket) and not looked at here."""
    path = path.rstrip("/") or path
    if is_remote(path):
        return "layout"
    local = Path(path)
    if local.is_file():
        if local.suffix.lower() == ".csv":
            return "csv"
        raise UserError(f"data path {path!r} is a file but not a .csv; pass a CSV with the "
                        f"columns path,label, an image folder or a TFRecord layout")
    if not local.is_dir():
        what = f"is {file_kind(local)}" if local.exists() else "does not exist"
        raise UserError(f"data path {path!r} {what}; pass --data with a folder "
                        f"(TFRecord layout, or images in one subfolder per class) or a CSV "
                        f"of path,label")
    if size_folders(path, os.listdir):
        return "layout"
    if next(local.glob("*/*.tfrec"), None) is not None:
        raise UserError(f"{path!r} holds .tfrec files but not in the layout "
                        f"tfrecords-jpeg-SxS/{{train,val,test}}/NN-SxS-COUNT.tfrec; move them "
                        f"into that layout (the size folder names the image size)")
    return "folder"


def check_source(path: str) -> None:
    """A data path that cannot be data, as one line, found without work (no image read, no
    TensorFlow: `corolla train` checks it first thing): what `kind_of` refuses, a CSV whose
    header lacks path or label or that has no rows, a folder without a single image, data of one
    class (a classifier needs two). The rest (each row's file, each image) is listed when the
    source is converted (`scan`)."""
    kind = kind_of(path)
    if kind == "csv":
        csv_path = Path(path).resolve()
        rows = _read_csv(csv_path)[1]
        if any(row["label"] for row, _ in rows):
            _check_classes(_csv_class_names(rows, csv_path), csv_path, "labels of")
    elif kind == "folder":
        root = Path(path).resolve()
        if not any(is_image_file(p) for p in _where_images_may_be(root)):
            raise UserError(_no_images(root))
        _check_classes(_folder_class_names(root), root, "class folders of")


def _check_classes(names, where: Path, what: str) -> None:
    """One class is no classifier's data (the model would be refused after the conversion)."""
    if names is not None and len(names) == 1:
        raise UserError(f"the {what} {where} name one class ({names[0]!r}); a classifier needs "
                        f"at least 2 classes: add images of the others")


def _folder_class_names(root: Path) -> tuple[str, ...] | None:
    """The classes an image folder names (its classes.txt, or its class folders that hold an
    image), listed without reading every file; None where its layout is for `scan_folder` to
    refuse (split folders beside class folders)."""
    names = _read_classes(root)
    if names is not None:
        return names
    tops = _class_folders(root, root, log=lambda *args: None)
    named = {p.name for p in tops} & set(SPLIT_FOLDERS)
    if named and named != {p.name for p in tops}:
        return None
    parents = tops if named else [root]
    return tuple(sorted({c.name for parent in parents
                         for c in _class_folders(parent, root, log=lambda *args: None)
                         if any(is_image_file(p) for p in _files(c))}))


def _where_images_may_be(root: Path):
    """Every file `scan_folder` could list as an image, and more, lazily (the check stops at the
    first image): `root`'s own files, the trees of its folders, and the class folders of split
    folders, which may be links (a tree walk does not follow them)."""
    yield from (p for p in root.iterdir() if p.is_file())
    for top in _class_folders(root, root, log=lambda *args: None):  # the scan says what it skips
        yield from _files(top)
        for linked in _class_folders(top, root, log=lambda *args: None):
            if linked.is_symlink():
                yield from _files(linked)


def _no_images(root: Path) -> str:
    return (f"no images in {root} (looked for {', '.join(IMAGE_SUFFIXES)} files in class "
            f"folders: {root}/CLASS/*.jpg or {root}/train/CLASS/*.jpg)")


def _read_classes(folder: Path) -> tuple[str, ...] | None:
    path = folder / CLASSES_FILE
    if not path.exists():
        return None
    names = read_classes_file(path)  # refused unless a regular file
    if not names:
        raise UserError(f"{path} names no classes; write one class name a line, or remove it")
    if len(set(names)) != len(names):
        raise UserError(f"{path} names a class twice; each line must be a different class")
    return names


def _images_under(folder: Path) -> list[Path]:
    return sorted(p for p in _files(folder) if is_image_file(p))


def _class_folders(folder: Path, root: Path, log=print) -> list[Path]:
    """The folders in `folder`, but hidden ones and links back into the source (`loop -> .`
    would make a class holding a copy of every image) or to a folder holding it (`up -> ..`
    likewise; `disk -> /` would walk the whole disk), which are said and skipped."""
    found = []
    for p in sorted(folder.iterdir()):
        if not p.is_dir() or p.name.startswith("."):
            continue
        if p.is_symlink():
            target = p.resolve()
            if target == root or root in target.parents:
                log(f"skipped {p}: a link to {target}, inside the source")
                continue
            if target in root.parents:
                log(f"skipped {p}: a link to {target}, which holds the source")
                continue
        found.append(p)
    return found


def _files(folder: Path):
    """The files under `folder` (links to files too), depth first, without following links to
    folders (as a tree walk): iteratively, so that folders nested thousands deep are no
    RecursionError. A path too long for the system to open (PATH_MAX) is one line; an
    unreadable folder is passed over, as `Path.rglob` passes over it."""
    stack = [folder]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name, reverse=True)
            kinds = [(here / e.name, e.is_file(), e.is_dir(follow_symlinks=False))
                     for e in entries]
        except OSError as e:
            if e.errno != errno.ENAMETOOLONG:
                continue
            raise UserError(_too_deep(here, folder)) from None
        for path, is_file, is_dir in kinds:
            if len(os.fsencode(path)) >= _PATH_MAX:  # listed, but no file call would open it
                raise UserError(_too_deep(path, folder))
            if is_file:
                yield path
            elif is_dir:
                stack.append(path)


# The longest path the system opens (PATH_MAX, counting its final NUL).
try:
    _PATH_MAX = os.pathconf("/", "PC_PATH_MAX")
except (AttributeError, OSError, ValueError):  # not POSIX
    _PATH_MAX = 4096


def _too_deep(path: Path, folder: Path) -> str:
    return (f"cannot list {str(path)[:80]}... ({len(path.parts) - len(folder.parts)} folders "
            f"deep in {folder}): its path is {len(os.fsencode(path))} bytes long, more than "
            f"the system opens ({_PATH_MAX}); move the images to a shallower folder")


def scan_folder(path: str | Path, log=print) -> ImageSource:
    """Lists an image folder: `CLASS/*.jpg`, or `{train,val,test}/CLASS/*.jpg` (where `test/`
    may hold the files themselves, unlabelled)."""
    root = Path(path).resolve()
    tops = {p.name for p in _class_folders(root, root, log=lambda *args: None)}
    named = tops & set(SPLIT_FOLDERS)
    split_mode = bool(named) and tops <= set(SPLIT_FOLDERS)
    if named and not split_mode:
        raise UserError(f"{root} mixes split folders ({', '.join(sorted(named))}) with other "
                        f"folders ({', '.join(sorted(tops - named))}); put every class folder "
                        f"under train/ (and val/, test/), or none")
    if split_mode and "train" not in tops:
        raise UserError(f"{root} has {' and '.join(sorted(tops))}/ but no train/ folder; "
                        f"add train/CLASS/ folders (val/ is optional: it is split off train/)")
    # (split, folder holding class folders)
    parts = [(name, root / name) for name in SPLIT_FOLDERS if name in tops] if split_mode \
        else [(None, root)]
    listed: dict[str | None, dict[str, list[Path]]] = {}
    unlabelled: list[Path] = []
    for split, folder in parts:
        classes = {c.name: _images_under(c) for c in _class_folders(folder, root, log)}
        loose = sorted(p for p in folder.iterdir() if p.is_file() and is_image_file(p))
        if split == "test" and loose and not classes:
            unlabelled = loose
        elif loose:
            raise UserError(f"{loose[0]} is an image outside any class folder; put each image "
                            f"in a folder named after its class ({folder}/CLASS/)")
        if split and not loose and not any(classes.values()):
            raise UserError(f"the {split} split folder {folder} holds no images; add "
                            f"{folder}/CLASS/*.jpg or remove the folder")
        listed[split] = classes
    names = _read_classes(root)
    found = sorted({c for classes in listed.values() for c in classes})
    if names is None:
        names = tuple(found)
    else:
        unknown = [c for c in found if c not in names]
        if unknown:
            raise UserError(f"class folder {unknown[0]!r} of {root} is not named in "
                            f"{root / CLASSES_FILE}; add it there or rename the folder")
    index = {name: i for i, name in enumerate(names)}
    items = []
    for split, classes in listed.items():
        for name, files in classes.items():
            items += [Item(str(p), p.relative_to(root).as_posix(), index[name], split)
                      for p in files]
    items += [Item(str(p), p.relative_to(root).as_posix(), None, "test") for p in unlabelled]
    if not items:
        raise UserError(_no_images(root))
    if not any(i.label is not None for i in items):
        raise UserError(f"no labelled images in {root}: put training images in class folders")
    return ImageSource(str(root), "folder", tuple(items),
                       check_names(names, f"the class folders of {root}"))


def scan_csv(path: str | Path) -> ImageSource:
    """Lists a CSV of `path,label[,split]` rows (header required)."""
    csv_path = Path(path).resolve()
    base = csv_path.parent
    columns, rows = _read_csv(csv_path)
    has_split = "split" in columns
    for row, line in rows:
        if not row["path"]:
            raise UserError(f"{csv_path} line {line}: the path is empty")
        if has_split and row["split"] not in ("", *SPLIT_FOLDERS):
            raise UserError(f"{csv_path} line {line}: split {row['split']!r} is not one of "
                            f"train, val, test (or empty)")
        if not row["label"] and not (has_split and row["split"] == "test"):
            raise UserError(f"{csv_path} line {line}: no label; only rows of the test split "
                            f"(split = test) may leave it empty")
    names = _csv_class_names(rows, csv_path)
    integers = all(_is_int(row["label"]) for row, _ in rows if row["label"])
    index = {name: i for i, name in enumerate(names)}
    items, seen = [], {}
    for row, line in rows:
        file = Path(row["path"]) if os.path.isabs(row["path"]) else base / row["path"]
        if not file.is_file():
            what = "is a folder, not an image file" if file.is_dir() else "does not exist"
            raise UserError(f"{csv_path} line {line}: {str(file)!r} {what}")
        label = None
        if row["label"]:
            label = _label(row["label"], index, integers, csv_path, line)
        example_id = Path(os.path.normpath(row["path"])).as_posix()  # as the CSV names it
        if example_id in seen:
            raise UserError(f"{csv_path} line {line}: {row['path']!r} is listed twice (first on "
                            f"line {seen[example_id]}); each image once")
        seen[example_id] = line
        items.append(Item(str(file.resolve()), example_id, label,
                          (row["split"] or None) if has_split else None))
    return ImageSource(str(csv_path), "csv", tuple(items),
                       check_names(names, f"the labels of {csv_path}"))


def _csv_class_names(rows: list, csv_path: Path) -> tuple[str, ...]:
    """The classes a CSV's rows make: its classes.txt's, 0..the largest of integer labels, or
    the label names, sorted."""
    names = _read_classes(csv_path.parent)
    if names is not None:
        return names
    given = [row["label"] for row, _ in rows if row["label"]]
    if all(_is_int(x) for x in given):
        return tuple(str(i) for i in range(_integer_classes(given, csv_path)))
    return tuple(sorted(set(given)))


def _read_csv(csv_path: Path) -> tuple[list[str], list]:
    """(columns, [(row, line number), ...]) of a CSV whose header names path and label and
    which has rows."""
    try:
        with csv_path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns = [c.strip() for c in reader.fieldnames or []]
            read = [({k.strip(): (v or "").strip() for k, v in row.items() if k is not None},
                     reader.line_num) for row in reader]
    except UnicodeDecodeError:
        raise UserError(f"{csv_path} is not a UTF-8 text CSV") from None
    missing = [c for c in ("path", "label") if c not in columns]
    if missing:
        raise UserError(f"{csv_path} has no {' and no '.join(repr(c) for c in missing)} column "
                        f"(its header is {','.join(columns) or 'empty'}); the first line must "
                        f"name the columns path,label (and optionally split)")
    if not read:
        raise UserError(f"{csv_path} has a header but no rows")
    return columns, read


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


# Integer labels without class names make classes 0..max: the largest label sizes the class
# list and the model's head. Gaps are allowed (a data set of a few of the competition's 104
# classes keeps their labels), but a list mostly of classes no row has is a typo or an id
# column, not a class count.
DENSE_UP_TO = 1024  # any largest label below this is taken as it is (the competition's 103)
MAX_CLASSES = 100_000  # ImageNet-21k has 21,841


def _integer_classes(given: list[str], csv_path: Path) -> int:
    """How many classes integer labels make (the largest + 1), or a one-line UserError when
    that many would be mostly empty."""
    distinct = set(given)
    # A label of more digits than MAX_CLASSES has is refused before int() reads it whole.
    top = max((int(x) if len(x.lstrip("-")) <= 6 else MAX_CLASSES for x in distinct),
              default=0) + 1
    if top > MAX_CLASSES or (top > DENSE_UP_TO and top > 4 * len(distinct)):
        largest = max(distinct, key=lambda x: (len(x.lstrip("-")), x))
        raise UserError(f"label {largest[:20]} in {csv_path.name}, but only {len(distinct)} "
                        f"distinct labels: integer labels number the classes from 0, so give "
                        f"class names as labels or list the classes in "
                        f"{csv_path.parent / CLASSES_FILE}")
    return top


def _label(text: str, index: dict[str, int], integers: bool, csv_path: Path, line: int) -> int:
    if integers:
        label = int(text)
        if not 0 <= label < len(index):
            raise UserError(f"{csv_path} line {line}: label {label} is outside the class range "
                            f"[0, {len(index)}) of {csv_path.parent / CLASSES_FILE}")
        return label
    if text not in index:
        raise UserError(f"{csv_path} line {line}: label {text!r} is not a class of "
                        f"{csv_path.parent / CLASSES_FILE}; add it there or fix the row")
    return index[text]


def scan(path: str | Path, log=print) -> ImageSource:
    """An image folder or a CSV, listed (`log` hears what is skipped)."""
    kind = kind_of(str(path))
    if kind == "layout":
        raise UserError(f"{path} is already in the TFRecord layout; nothing to convert")
    return scan_csv(path) if kind == "csv" else scan_folder(path, log)


def check_classes(source: ImageSource) -> None:
    """A listed source of one class is refused before its conversion (`check_source` says so
    first for training; a data check surveys such a folder all the same)."""
    _check_classes(source.class_names, Path(source.path),
                   "labels of" if source.kind == "csv" else "class folders of")
