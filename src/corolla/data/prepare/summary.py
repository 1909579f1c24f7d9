"""What a conversion did: its `Summary`, the manifest it writes (`manifest`, convert.json) and
the lines it ends with (`describe`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from corolla.data.prepare.settings import MANIFEST, VERSION, Settings
from corolla.data.prepare.sources import ImageSource
from corolla.data.prepare.splits import Copies, needs_split


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
    lines += skipped_lines(summary.skipped)
    return lines


def skipped_lines(skipped: list) -> list[str]:
    """The files a conversion skipped, one line each under a heading."""
    if not skipped:
        return []
    return [f"skipped {len(skipped)} file(s) that are not readable images:",
            *(f"  warning: {i}: {r}" for i, r in skipped)]

