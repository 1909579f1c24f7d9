"""A fast pass over a split before any work is spent on it: every file's record count against
the count its name states, every label against the class range, and every image's first bytes
(an image format, not garbage). No image is decoded.

With `skip_bad_records` damaged records are skipped instead of refused, and the pass also
decodes every image once: a record whose image fails to decode inside tf.data cannot be dropped
and counted there without slowing every good record down, and evaluation must know beforehand
which ids it will have predictions for. What each file lost is remembered (`damage_of`), for
the pipeline to leave out and for the summary at the end of the command (`skipped_summary`).

A record can still fail in the stream (a JPEG corrupt beyond its first bytes, when not
skipping; a file damaged after the check), and TensorFlow's error names no file: `explain`
reads again the files this process read, and names the record.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from corolla.data import records
from corolla.data.layout import FILE_NAME, RecordFile, Split
from corolla.errors import UserError

_BATCH = 4096  # records per step of a pass (a competition file holds under 1000)


@dataclass
class _Scan:
    """One file's records, read without decoding. `tail`: TensorFlow's message about a damaged
    tail that ended the reading ("" when the file reads to its end)."""
    count: int = 0
    low: int = 2**62
    high: int = -2**62
    ids: list[str] = field(default_factory=list)
    not_images: list[tuple[int, int]] = field(default_factory=list)  # (index, bytes)
    tail: str = ""


def _reason(error: tf.errors.OpError) -> str:
    """TensorFlow's message without the op and function names around it."""
    text = re.sub(r"\{\{[^}]*\}\}", "", error.message.splitlines()[0])
    text = re.sub(r"\[Op:[^\]]*\].*$", "", text)
    return " ".join(text.replace("'", "").split())


def _meta(serialized: tf.Tensor, labelled: bool,
          features: records.Features = records.COMPETITION) -> dict[str, tf.Tensor]:
    example = records.parse_features(serialized, labelled, features)
    out = {"id": example["id"], "is_image": records.is_image(example["image"]),
           "bytes": tf.strings.length(example["image"])}
    if labelled:
        out["label"] = example["class"]
    return out


def _read(path: str, labelled: bool, tolerate_tail: bool,
          features: records.Features = records.COMPETITION) -> _Scan:
    ds = tf.data.TFRecordDataset(path)
    if tolerate_tail:
        ds = ds.ignore_errors()
    ds = ds.map(lambda r: _meta(r, labelled, features), num_parallel_calls=tf.data.AUTOTUNE)
    scan = _Scan()
    for batch in ds.batch(_BATCH):
        ids = batch["id"].numpy()
        if labelled and len(ids):
            labels = batch["label"].numpy()
            scan.low, scan.high = min(scan.low, labels.min()), max(scan.high, labels.max())
        sizes = batch["bytes"].numpy()
        for i in np.flatnonzero(~batch["is_image"].numpy()):
            scan.not_images.append((scan.count + int(i), int(sizes[i])))
        scan.ids.extend(x.decode(errors="replace") for x in ids)
        scan.count += len(ids)
    return scan


# Each file's scan, once per process: a command checks a split in several steps (before
# training, for validation, before evaluating); keyed on the file's size and time like _FOUND.
_SCANNED: dict[tuple, _Scan] = {}


def _scan(path: str, labelled: bool, tolerate_tail: bool,
          features: records.Features = records.COMPETITION) -> _Scan:
    """Raises TensorFlow's DataLossError at a damaged tail unless `tolerate_tail`, and its
    InvalidArgumentError for a record that is not an Example of the competition's format."""
    key = (_key(path), labelled, tolerate_tail, features)
    if key not in _SCANNED:
        try:
            _SCANNED[key] = _read(path, labelled, tolerate_tail=False, features=features)
        except tf.errors.DataLossError as e:
            if not tolerate_tail:
                raise
            scan = _read(path, labelled, tolerate_tail=True, features=features)
            scan.tail = _reason(e)
            _SCANNED[key] = scan
    return _SCANNED[key]


def _decoding(path: str, features: records.Features = records.COMPETITION) -> set[int]:
    """Indices of the records whose image decodes: the others are dropped by `ignore_errors`
    (the one way to survive a failing record inside tf.data), so they are what is missing."""
    def decodes(index, serialized):
        image = tf.io.parse_single_example(serialized, {features.image: records.LABELLED["image"]})
        # The decoded height is returned too: a decoding nothing depends on would be pruned.
        return index, tf.shape(tf.io.decode_jpeg(image[features.image], channels=3))[0]

    ds = (tf.data.TFRecordDataset(path).ignore_errors().enumerate()
          .map(decodes, num_parallel_calls=tf.data.AUTOTUNE).ignore_errors())
    return {int(i) for batch, _ in ds.batch(_BATCH) for i in batch.numpy()}


@dataclass(frozen=True)
class Damage:
    """What cannot be used in one file."""
    path: str
    labelled: bool
    named: int  # records the file should hold (its name's count)
    readable: int  # records before the file's end or its damaged tail
    tail: str = ""  # TensorFlow's message about a damaged tail; "" when there is none
    undecodable: tuple[tuple[int, str], ...] = ()  # (index in the file, id): images that fail

    @property
    def lost(self) -> int:
        """Records the damaged tail took (those the name counts beyond the readable ones)."""
        return max(0, self.named - self.readable) if self.tail else 0

    @property
    def usable(self) -> int:
        """Records the pipeline yields. An undecodable test image keeps its place (it is
        predicted from a blank image, so that its id is in submission.csv)."""
        return self.readable - (len(self.undecodable) if self.labelled else 0)

    @property
    def skipped(self) -> int:
        return len(self.undecodable) + self.lost

    def summary(self) -> str:
        """One line for the end of the command; "" when nothing in the file was damaged."""
        n = len(self.undecodable)
        ids = f"id{'s' if n > 1 else ''} {_some(i for _, i in self.undecodable)}"
        if not self.labelled:
            if not n:
                return ""
            return (f"predicted {n} test image{'s' if n > 1 else ''} of {self.path} from a "
                    f"blank image, as {'they do' if n > 1 else 'it does'} not decode ({ids}): "
                    f"{'their rows' if n > 1 else 'its row'} in submission.csv "
                    f"{'are guesses' if n > 1 else 'is a guess'}")
        parts = []
        if n:
            parts.append(f"{n} whose image does not decode ({ids})")
        if self.tail:
            where = f"after record {self.readable - 1}" if self.readable else "at its start"
            parts.append(f"{self.lost} lost to its damaged tail, {where} ({self.tail})")
        if not parts:
            return ""
        return f"skipped {self.skipped} of {self.named} records of {self.path}: " + \
            "; ".join(parts)


def _some(ids, shown: int = 5) -> str:
    ids = list(ids)
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


# Each file's damage, found once per process (the deep pass decodes every image), keyed on the
# file's size and time so that a file replaced meanwhile is looked at again.
_FOUND: dict[tuple, Damage] = {}


def _key(path: str) -> tuple:
    stat = tf.io.gfile.stat(path)
    return path, stat.length, stat.mtime_nsec


def _damage(file: RecordFile, labelled: bool, scan: _Scan | None = None,
            features: records.Features = records.COMPETITION) -> Damage:
    key = _key(file.path)
    if key not in _FOUND:
        scan = scan or _scan(file.path, labelled, tolerate_tail=True, features=features)
        decoding = _decoding(file.path, features)
        _FOUND[key] = Damage(file.path, labelled, named=file.count, readable=scan.count,
                             tail=scan.tail,
                             undecodable=tuple((i, scan.ids[i]) for i in range(scan.count)
                                               if i not in decoding))
    return _FOUND[key]


def damage_of(split: Split) -> list[Damage]:
    """Every file's damage (decoding the split once per process, unless `check_split` with
    `skip_bad_records` has done it)."""
    return [_damage(file, split.labelled, features=split.features) for file in split.files]


def usable_count(split: Split) -> int:
    """Examples the pipelines yield when skipping damaged records."""
    return sum(d.usable for d in damage_of(split))


def skipped_summary(splits) -> list[str]:
    """One line per file of `splits` that had damaged records (none when nothing was skipped,
    or when nothing was looked for: without skipping, damage is an error)."""
    found = (_FOUND.get(_key(file.path)) for split in splits for file in split.files
             if tf.io.gfile.exists(file.path))
    return [damage.summary() for damage in found if damage is not None and damage.summary()]


def one_global_batch(split_name: str, count: int, global_batch: int) -> None:
    """Refuses a split that cannot fill one global batch: it would train no step."""
    if count < global_batch:
        raise UserError(f"the {split_name} split has {count} examples, fewer than one "
                        f"global batch ({global_batch}); use a smaller --batch-size")


def check_split(split: Split, num_classes: int, skip_bad_records: bool = False) -> Split:
    """Raises a UserError naming the first file whose name miscounts its records, that holds a
    label outside [0, num_classes), or that is damaged (a damaged tail, bytes that are no image).

    With `skip_bad_records`, damaged records are not errors (except a test file's damaged tail:
    the ids in it are unknown, and a submission without them is refused on Kaggle) and every
    image is decoded once to find them all. Returns the split as the pipelines yield it: each
    file's count is then its usable records (`Damage.usable`), which is what callers must pair
    predictions with."""
    files = []
    seen: dict[str, list[str]] = {}  # id -> the files holding it
    for file in split.files:
        try:
            scan = _scan(file.path, split.labelled, tolerate_tail=skip_bad_records,
                         features=split.features)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            raise UserError(damaged_error(file.path, split.labelled, e, split.features)) from None
        if split.name != "train":
            for i in scan.ids:
                seen.setdefault(i, []).append(file.path)
        named = FILE_NAME.match(file.path.rsplit("/", 1)[-1])
        short_tail = scan.tail and scan.count < file.count
        if named and scan.count != file.count and not short_tail:
            raise UserError(f"{file.path} holds {scan.count} records but its name says "
                            f"{file.count}; rename it to end in -{scan.count}.tfrec")
        if split.labelled and scan.count and not (0 <= scan.low and scan.high < num_classes):
            bad = scan.high if scan.high >= num_classes else scan.low
            raise UserError(f"{file.path} has a record with label {bad}, outside the "
                            f"{num_classes} classes [0, {num_classes - 1}]; fix the labels or "
                            f"the data set's classes.txt")
        if not skip_bad_records:
            if scan.not_images:
                index, size = scan.not_images[0]
                more = len(scan.not_images) - 1
                raise UserError(f"record {index} (id {scan.ids[index]}) of {file.path} holds no "
                                f"image: its {size} bytes do not start like a JPEG (nor like "
                                f"another format TensorFlow decodes)"
                                f"{f'; so do {more} more in the file' if more else ''}; "
                                f"{records.SKIP_HINT}")
            files.append(file)
            continue
        damage = _damage(file, split.labelled, scan, split.features)
        if damage.tail and not split.labelled:
            raise UserError(f"{file.path} is damaged after record {damage.readable - 1} "
                            f"({damage.tail}); {_TEST_TAIL}")
        files.append(RecordFile(file.path, damage.usable))
    _unique_ids(split.name, seen)
    # replace, not a new Split: a split of some of its files' records (a k-fold run's folds,
    # data.folds) stays one.
    return dataclasses.replace(split, files=tuple(files))


def _unique_ids(name: str, seen: dict[str, list[str]]) -> None:
    """Refuses a split whose records repeat an id: every split but train is predicted, and
    each id names one photo in its predictions (and in submission.csv)."""
    repeated = [(i, where) for i, where in seen.items() if len(where) > 1]
    if not repeated:
        return
    i, where = repeated[0]
    more = f"; and {len(repeated) - 1} more ids" if len(repeated) > 1 else ""
    raise UserError(f"the {name} split holds id {i} {len(where)} times (in "
                    f"{', '.join(dict.fromkeys(where))}){more}; its predictions name each photo "
                    f"by its id: give each record its own id (or remove the copies), then run "
                    f"the command again")


_TEST_TAIL = ("replace the file: the ids in a test file's damaged tail are unknown, so "
              "submission.csv would lack them (Kaggle refuses it), and --skip-bad-records "
              "cannot skip them")


def _other_features(path: str, labelled: bool, features: records.Features) -> str | None:
    """The message for records whose features have other names than `features` (TFRecords
    written by another tool), or None when the first record names them all (or none parses)."""
    try:
        first = next(iter(tf.data.TFRecordDataset(path).take(1)))
        found = set(tf.train.Example.FromString(first.numpy()).features.feature)
    except Exception:  # noqa: BLE001  (not an Example at all: damaged, said by the caller)
        return None
    wanted = {"image_feature": features.image, "id_feature": features.id}
    if labelled:
        wanted["label_feature"] = features.label
    missing = {key: name for key, name in wanted.items() if name not in found}
    if not found or not missing:
        return None
    return (f"{path} holds records with the features {', '.join(sorted(found))}, not "
            f"{', '.join(repr(n) for n in missing.values())}; records written by another tool "
            f"are read by naming theirs in a config file's [data] section "
            f"({', '.join(f'{key} = ...' for key in missing)}), passed with --config")


def damaged_error(path: str, labelled: bool, error: tf.errors.OpError,
                  features: records.Features = records.COMPETITION) -> str:
    """The message for a file that cannot be read to its end (DataLossError) or holds a record
    that is not an Example of the competition's format (InvalidArgumentError): records whose
    features have other names are said so."""
    if not isinstance(error, tf.errors.DataLossError):
        other = _other_features(path, labelled, features)
        if other:
            return other
        hint = "replace the file, or remove it from the split"
    else:
        hint = records.SKIP_HINT if labelled else _TEST_TAIL
    return f"{path} is damaged ({_reason(error)}); {hint}"


# The files this process has built pipelines over, most recent last: where `explain` looks.
_READ: dict[str, tuple[RecordFile, bool, records.Features]] = {}


def note_read(split: Split) -> None:
    for file in split.files:
        _READ.pop(file.path, None)
        _READ[file.path] = (file, split.labelled, split.features)


def _is_decode_error(error: tf.errors.OpError) -> bool:
    message = error.message
    return "DecodeJpeg" in message or "JPEG" in message or "image file format" in message


def _fault(file: RecordFile, labelled: bool, decode: bool,
           features: records.Features = records.COMPETITION) -> str | None:
    """What is wrong with a file, found by reading it again (decoding every image if `decode`)."""
    try:
        scan = _scan(file.path, labelled, tolerate_tail=False, features=features)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        return damaged_error(file.path, labelled, e, features)
    if scan.not_images:
        index, size = scan.not_images[0]
        return (f"record {index} (id {scan.ids[index]}) of {file.path} holds no image: its "
                f"{size} bytes do not start like a JPEG; {records.SKIP_HINT}")
    damage = _damage(file, labelled, scan, features) if decode else None
    if damage is None or not damage.undecodable:
        return None
    index, example_id = damage.undecodable[0]
    more = len(damage.undecodable) - 1
    return (f"the image of record {index} (id {example_id}) of {file.path} does not decode "
            f"(corrupt JPEG data){f'; neither do {more} more in the file' if more else ''}; "
            f"{records.SKIP_HINT}")


def explain(error: BaseException, note=lambda message: None) -> str | None:
    """The one-line message for a TensorFlow error that a damaged file raised inside tf.data, or
    None when no file this process read is at fault (a bug keeps its traceback).

    The files are read again, the most recently read first, until one is found damaged: without
    decoding (a damaged tail, a record that does not parse, bytes that are no image) and, for an
    error from the image decoder, decoding every image (`note` says so first: on a big data set
    that takes a while). With several damaged files, the one named may not be the one met."""
    if not (isinstance(error, (tf.errors.DataLossError, tf.errors.InvalidArgumentError))
            and "Iterator" in error.message):  # raised while a tf.data iterator ran
        return None
    decode = isinstance(error, tf.errors.InvalidArgumentError) and _is_decode_error(error)
    files = [(f, labelled, features) for f, labelled, features in reversed(_READ.values())
             if tf.io.gfile.exists(f.path)]
    if decode and files:
        note(f"an image failed to decode; looking for it in the {len(files)} file(s) this "
             f"process read (decoding them again)")
    for file, labelled, features in files:
        fault = _fault(file, labelled, decode, features)
        if fault is not None:
            return fault
    return None
