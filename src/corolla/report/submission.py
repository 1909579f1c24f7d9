"""The competition's submission file: `id,label`, one row per test id.

`check` says everything that would make Kaggle refuse a file or score it wrong, as plain data;
every submission Corolla writes passes it before it replaces the previous one, and
`corolla check-submission` runs it on any file."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from corolla.errors import UserError
from corolla.files import atomic_path

HEADER = ["id", "label"]
EXAMPLES = 5  # examples kept per kind of problem
_INTEGER = re.compile(r"-?[0-9]+")
_WHOLE_FILE = ("unreadable", "header")  # faults of the file, not of rows: said without a count


@dataclass(frozen=True)
class Problem:
    """One kind of fault in a submission file: how many times it occurs and a few examples."""

    kind: str  # "unreadable", "header", "malformed", "duplicate", "unknown", "missing",
    #            "not_integer", "out_of_range"
    count: int
    what: str  # what is wrong, for people: "test ids with no row"
    examples: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.count == 1 and self.kind in _WHOLE_FILE:  # "the header is not ...: ..."
            return f"{self.what}: {self.examples[0]}" if self.examples else self.what
        shown = f": {', '.join(self.examples)}" if self.examples else ""
        more = f" (and {self.count - len(self.examples)} more)" \
            if self.examples and self.count > len(self.examples) else ""
        return f"{self.count} {self.what}{shown}{more}"


def write(ids, labels, path: str | Path, num_classes: int | None = None) -> Path:
    """Writes the rows in the order given. Duplicate or missing ids would be scored wrong on
    Kaggle, so they are refused here rather than written. Written atomically: an upload taken
    while predict runs again gets the old file or the new one, never a truncated one. The file
    written is checked (`check`, against `ids` and, if given, `num_classes`) before it replaces
    the old one: a file Corolla hands over has passed the same check a user can run."""
    ids, labels = list(ids), [int(x) for x in labels]
    if len(ids) != len(labels):
        raise ValueError(f"{len(ids)} ids but {len(labels)} labels")
    if len(set(ids)) != len(ids):
        raise ValueError(f"the test split has {len(ids) - len(set(ids))} duplicate ids")
    path = Path(path)
    with atomic_path(path) as tmp:
        with tmp.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(HEADER)
            writer.writerows(zip(ids, labels))
        classes = num_classes if num_classes is not None else max(labels, default=-1) + 1
        problems = check(tmp, ids, classes)
        if problems:  # a bug: the old file is kept
            raise ValueError(f"the submission written for {path} fails its check: "
                             + "; ".join(map(str, problems)))
    return path


def read(path: str | Path) -> dict[str, int]:
    with Path(path).open(encoding="utf-8-sig", newline="") as f:
        return {row["id"]: int(row["label"]) for row in csv.DictReader(f)}


def check(path: str | Path, test_ids, num_classes: int) -> list[Problem]:
    """Every fault of the file at `path` as a submission for a test split with `test_ids` and
    `num_classes` classes: the header is exactly `id,label`; each row has two fields; each test
    id has exactly one row and no other id has any; each label is an integer in [0,
    num_classes). An empty list means the file is right. A file that cannot be read at all is
    a user error (one line), not a list."""
    path = Path(path)
    if path.is_dir() or not path.exists():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise UserError(f"submission file {path} {what}; pass the CSV file to check")
    if not path.is_file():  # a device (/dev/urandom), FIFO or socket: it could be endless
        raise UserError(f"submission file {path} is not a regular file (a device, pipe or "
                        f"socket); pass the CSV file to check")
    limit = size_limit(test_ids, num_classes)
    try:
        text = _text(path, limit)
    except UnicodeDecodeError as e:
        return [Problem("unreadable", 1, f"the file is not UTF-8 text ({e.reason} at byte "
                                         f"{e.start})")]
    try:
        rows = _rows(text)
    except csv.Error as e:
        return [Problem("unreadable", 1, f"the file is not CSV ({e})")]
    found = _faults(rows, test_ids, num_classes)
    what = {
        "header": "the header is not exactly 'id,label'",
        "malformed": "rows without exactly 2 fields (id,label)",
        "duplicate": "ids with more than one row",
        "unknown": "ids that are not test ids",
        "missing": "test ids with no row",
        "not_integer": "labels that are not integers",
        "out_of_range": f"labels outside the {num_classes} classes [0, {num_classes - 1}]",
    }
    return [Problem(kind, len(found[kind]), what[kind], tuple(found[kind][:EXAMPLES]))
            for kind in what if kind in found]


def _faults(rows: list[tuple[int, list[str]]], test_ids,
            num_classes: int) -> dict[str, list[str]]:
    """Fault kind -> its examples (all of them; cut when reported) in a submission's rows."""
    found: dict[str, list[str]] = {}

    def add(kind: str, example: str) -> None:
        found.setdefault(kind, []).append(example)

    if not rows:
        add("header", "the file is empty")
    elif rows[0][1] != HEADER:
        add("header", f"the first line is {','.join(rows[0][1])!r}")
    lines: dict[str, list[int]] = {}  # id -> the lines holding it
    for number, row in rows[1:]:
        if len(row) != 2:
            add("malformed", f"line {number}: {','.join(row)!r}")
            continue
        example_id, label = row[0], row[1].strip()  # " 0": Kaggle's reader takes it
        lines.setdefault(example_id, []).append(number)
        if not _INTEGER.fullmatch(label):
            add("not_integer", f"line {number}: {label!r}")
        elif not 0 <= int(label) < num_classes:
            add("out_of_range", f"line {number}: {label}")
    expected = set(test_ids)
    for example_id, where in lines.items():
        if len(where) > 1:
            add("duplicate", f"{example_id!r} (lines {', '.join(map(str, where[:EXAMPLES]))})")
        if example_id not in expected:
            add("unknown", f"{example_id!r} (line {where[0]})")
    for example_id in test_ids:
        if example_id not in lines:
            add("missing", repr(example_id))
    return found


def _rows(text: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each CSV row."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = [(reader.line_num, row) for row in reader]
    while rows and not rows[-1][1]:  # empty lines at the end: Kaggle accepts them, so do we
        rows.pop()
    return rows


def row_count(path: str | Path) -> int:
    """The number of data rows (rows after the header) of a submission file."""
    return max(len(_rows(_text(path))) - 1, 0)


def size_limit(test_ids, num_classes: int) -> int:
    """The most bytes a submission for `test_ids` can hold: each row its id, a label and a line
    end, with room for quotes and spaces. A larger file is not a submission, and reading only
    this much keeps a wrong file (a log, an image, a growing file) from filling the memory."""
    label = len(str(max(num_classes - 1, 0))) + 1  # a minus sign at most
    return 64 + sum(2 * len(str(i).encode()) + label + 16 for i in test_ids)


def _text(path: str | Path, limit: int | None = None) -> str:
    # utf-8-sig: the byte-order mark Excel's "CSV UTF-8" writes first, which Kaggle accepts.
    with Path(path).open(encoding="utf-8-sig", newline="") as f:  # csv reads the line ends
        # Characters, not bytes: a UTF-8 character is at least one byte, so a file within the
        # limit is read whole.
        text = f.read(-1 if limit is None else limit + 1)
    if limit is not None and len(text) > limit:
        raise UserError(f"submission file {path} holds over {limit:,} bytes, more than a "
                        f"submission for this test split can; pass the submission CSV")
    return text


def problems_text(path: str | Path, problems: list[Problem]) -> str:
    """The report of a failed check: one line saying so, then one line per kind of problem."""
    kinds = len(problems)
    return "\n".join([f"{path} is not a valid submission ({kinds} kind"
                      f"{'s' if kinds > 1 else ''} of problem); fix these and check it again:"]
                     + [f"  {problem}" for problem in problems])
