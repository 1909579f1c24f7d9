"""Class names: the competition's 104 flowers, or a data set's own `classes.txt`."""

from __future__ import annotations

import collections
import unicodedata
from pathlib import Path

from corolla.errors import UserError
from corolla.files import MAX_TEXT, read_bounded

# The Kaggle "Petals to the Metal" classes, index = label. Two names end with a space in the
# competition's own list ('cyclamen ', 'hippeastrum '); they are kept exactly.
COMPETITION_CLASSES = (
    'pink primrose', 'hard-leaved pocket orchid', 'canterbury bells', 'sweet pea',
    'wild geranium', 'tiger lily', 'moon orchid', 'bird of paradise', 'monkshood',
    'globe thistle', 'snapdragon', "colt's foot", 'king protea', 'spear thistle', 'yellow iris',
    'globe-flower', 'purple coneflower', 'peruvian lily', 'balloon flower',
    'giant white arum lily', 'fire lily', 'pincushion flower', 'fritillary', 'red ginger',
    'grape hyacinth', 'corn poppy', 'prince of wales feathers', 'stemless gentian', 'artichoke',
    'sweet william', 'carnation', 'garden phlox', 'love in the mist', 'cosmos',
    'alpine sea holly', 'ruby-lipped cattleya', 'cape flower', 'great masterwort', 'siam tulip',
    'lenten rose', 'barberton daisy', 'daffodil', 'sword lily', 'poinsettia', 'bolero deep blue',
    'wallflower', 'marigold', 'buttercup', 'daisy', 'common dandelion', 'petunia', 'wild pansy',
    'primula', 'sunflower', 'lilac hibiscus', 'bishop of llandaff', 'gaura', 'geranium',
    'orange dahlia', 'pink-yellow dahlia', 'cautleya spicata', 'japanese anemone',
    'black-eyed susan', 'silverbush', 'californian poppy', 'osteospermum', 'spring crocus',
    'iris', 'windflower', 'tree poppy', 'gazania', 'azalea', 'water lily', 'rose',
    'thorn apple', 'morning glory', 'passion flower', 'lotus', 'toad lily', 'anthurium',
    'frangipani', 'clematis', 'hibiscus', 'columbine', 'desert-rose', 'tree mallow', 'magnolia',
    'cyclamen ', 'watercress', 'canna lily', 'hippeastrum ', 'bee balm', 'pink quill',
    'foxglove', 'bougainvillea', 'camellia', 'mallow', 'mexican petunia', 'bromelia',
    'blanket flower', 'trumpet creeper', 'blackberry lily', 'common tulip', 'wild rose',
)

CLASSES_FILE = "classes.txt"  # optional, beside the tfrecords-jpeg-SxS folders: one name a line


def parse_classes_file(text: str) -> tuple[str, ...]:
    # Only the line break is stripped: trailing spaces are part of a name, as in the competition.
    # A byte-order mark (Windows editors write one) is not part of the first name.
    text = text.removeprefix("\ufeff")
    return tuple(line.rstrip("\r") for line in text.split("\n") if line.strip())


def read_classes_file(path: str | Path, data: bytes | None = None) -> tuple[str, ...]:
    """The names of the classes.txt at `path`: a local one read here, a regular file of at
    most MAX_TEXT (`files.read_bounded`); a remote one's `data`, as its caller read it."""
    if data is None:
        data = read_bounded(path, MAX_TEXT, "classes file")
    if len(data) > MAX_TEXT:
        raise UserError(f"classes file {str(path)!r} is more than {MAX_TEXT // 2**20} MB; pass "
                        f"one class name a line")
    try:
        return parse_classes_file(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UserError(f"classes file {str(path)!r} is not UTF-8 text ({e.reason} at byte "
                        f"{e.start}); save it as UTF-8") from None


def check_names(names, where: str) -> tuple[str, ...]:
    """The names, if each survives `classes.txt` (one a line) as it is, for every reader: a line
    break would split a name in two and shift every later label (and readers differ on what
    breaks a line: Python's splitlines also breaks at U+2028, \\x0b, \\x1c...), a name of only
    spaces would vanish, and two names that look the same (`café` composed and decomposed,
    `rose` and `rose` with a zero-width space) would read as one class. `where` says where they
    come from (a folder, a CSV), for the one-line refusal."""
    names = tuple(str(name) for name in names)
    for name in names:
        odd = next((c for c in name if unicodedata.category(c) in _UNWRITABLE), None)
        if odd is not None or not _seen_as(name):
            what = ("holds a line break" if odd in "\n\r" else
                    f"holds {unicodedata.name(odd, 'a control character')} "
                    f"(U+{ord(odd):04X})") if odd is not None else "is empty or only spaces"
            raise UserError(f"class name {name!r} in {where} {what}, which classes.txt (one "
                            f"name a line) cannot hold; rename it")
    repeated = sorted(n for n, count in collections.Counter(names).items() if count > 1)
    if repeated:
        raise UserError(f"class name {repeated[0]!r} occurs twice in {where}; class names must "
                        f"be unique")
    # `rose` and `rose ` (or `Rose`) are two classes that every table, report and prediction
    # would show as one name twice.
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(_seen_as(name), name)
        if other != name:
            if unicodedata.normalize("NFKC", repr(other)) == \
                    unicodedata.normalize("NFKC", repr(name)):  # (printed alike: their codes)
                other, name = ascii(other), ascii(name)
            else:
                other, name = repr(other), repr(name)
            raise UserError(f"class names {other} and {name} in {where} differ only by "
                            f"spaces around them, by case, by invisible characters or by how "
                            f"their letters are encoded, and would read as one class; rename "
                            f"one, or merge their images")
    return names


# Unicode categories no class name may hold: control characters (line breaks among them) and
# the line and paragraph separators, which some readers of classes.txt take for line breaks.
_UNWRITABLE = ("Cc", "Zl", "Zp")


def _seen_as(name: str) -> str:
    """The name as a reader sees it: letters composed alike (NFKC), without invisible format
    characters (zero-width spaces, joiners, marks of direction), spaces around it and case."""
    shown = unicodedata.normalize("NFKC", name)
    return "".join(c for c in shown if unicodedata.category(c) != "Cf").strip().casefold()


def format_classes_file(names, where: str = "the class names") -> str:
    """classes.txt's text, checked to read back as the same names (`check_names`)."""
    text = "".join(f"{name}\n" for name in check_names(names, where))
    assert parse_classes_file(text) == tuple(names), names  # what check_names guarantees
    return text
