"""What a conversion did: its `Summary`, the manifest it writes (`manifest`, convert.json) and
the lines it ends with (`summary_lines`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from corolla.data.prepare.settings import MANIFEST, VERSION, Settings
from corolla.data.prepare.sources import ImageSource
from corolla.data.prepare.splits import Copies, needs_split

# Past this many classes the log gives each split's spread of images a class, not a table: a
# conversion's last screen is a summary, and convert.json keeps every class's count.
TABLE_CLASSES = 20
FEWEST = 5  # the classes with fewest images named in that spread
LISTED_SKIPPED = 20  # skipped files listed in the log (convert.json lists them all)


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


def manifest(source: ImageSource, settings: Settings, summary: Summary,
             fingerprint: str) -> dict:
    return {"version": VERSION, "source": source.path, "kind": source.kind,
            "fingerprint": fingerprint, "settings": settings.key(),
            "images": {name: sum(c.values()) for name, c in summary.counts.items()},
            "per_class": {name: {str(k): v for k, v in c.items()}
                          for name, c in summary.counts.items()},
            "files": summary.files, "seconds": round(summary.seconds, 3),
            "duplicates": summary.duplicates,
            "skipped": [{"id": i, "reason": r} for i, r in summary.skipped]}


def copies_record(source: ImageSource, settings: Settings, copies: Copies | None,
                  removed: list) -> dict:
    """convert.json's `duplicates`: whether copies were looked for, kept together, removed."""
    if copies is None:
        return {"searched": False}
    grouped = set(copies.groups)
    return {"searched": True, "near_bits": list(copies.near_bits),
            "groups": len(set(copies.groups.values())), "images_in_groups": len(grouped),
            "split": ("made by the conversion: copies kept in one split"
                      if needs_split(source) else "the source's own (copies across it stay)"),
            "dedupe": settings.dedupe,
            "removed": [{"id": gone, "copy_of": kept} for gone, kept in removed]}


def summary_lines(summary: Summary, class_names, settings: Settings) -> list[str]:
    """The summary: images per split and per class, the skipped files (one line each)."""
    rate = summary.images / max(summary.seconds, 1e-9)
    lines = [f"converted {summary.images} images in {summary.seconds:.1f} s ({rate:.0f} "
             f"images/s) into {summary.out}"]
    for name, counts in summary.counts.items():
        files = "/".join(map(str, summary.files[name]))
        lines.append(f"  {name:5s} {sum(counts.values()):7d} images in {files} file(s)")
    names = [n for n in summary.counts if n != "test" or -1 not in summary.counts[n]]
    if names and len(class_names) > TABLE_CLASSES:
        lines += _class_spread(summary, class_names, names)
    elif names:
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
    lines += skipped_lines(summary.skipped, most=LISTED_SKIPPED)
    return lines


def _class_spread(summary: Summary, class_names, names) -> list[str]:
    """Many classes: per split, the spread of images a class and its fewest, not a line each
    (the whole table is convert.json's `per_class`)."""
    lines = [f"  {len(class_names)} classes (images a class; every class in {MANIFEST}):"]
    for name in names:
        counts = sorted((summary.counts[name].get(i, 0), c) for i, c in enumerate(class_names))
        fewest = ", ".join(f"{c!r} {n}" for n, c in counts[:FEWEST])
        lines.append(f"  {name:5s} fewest {counts[0][0]}, median {counts[len(counts) // 2][0]}, "
                     f"most {counts[-1][0]}; fewest: {fewest}")
    return lines


def skipped_lines(skipped: list, most: int | None = None) -> list[str]:
    """The files a conversion skipped, one line each under a heading (the first `most`, then
    how many more, when `most` is given)."""
    if not skipped:
        return []
    shown = skipped if most is None else skipped[:most]
    more = len(skipped) - len(shown)
    return [f"skipped {len(skipped)} file(s) that are not readable images:",
            *(f"  warning: {i}: {r}" for i, r in shown),
            *([f"  ... and {more} more (all of them in {MANIFEST})"] if more else [])]

