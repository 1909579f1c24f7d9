"""A survey's findings as the terminal shows them: the table of `corolla check-data`
(`check_table`) and the line `corolla train` says about the data (`one_line`)."""

from __future__ import annotations

from corolla.data.audit.survey import Survey


def check_table(result: Survey, limit: int = 10) -> list[str]:
    """The table of `corolla check-data`: splits, classes, sizes, duplicates, unreadable files."""
    s = result.summary()
    lines = [f"checked {s['images']} images of {result.read} in {s['seconds']:.1f} s "
             f"({s['images_per_second']:.0f} images/s)"]
    if result.note:
        lines.append(f"  {result.note}")
    lines.append(f"  {'split':5s}  {'images':>7s}  {'unread':>6s}  {'classes':>7s}  "
                 f"{'imbalance':>9s}  {'width':>11s}  {'height':>11s}  {'aspect':>11s}")
    for split, f in s["splits"].items():
        classes = f"{len(f['classes']) - len(f['classes_missing'])}" if "classes" in f else "-"
        imbalance = f"{f['imbalance']:.1f}x" if "imbalance" in f else "-"
        sizes = [f"{f[k]['min']:g}-{f[k]['max']:g}" if k in f else "-"
                 for k in ("width", "height", "aspect")]
        lines.append(f"  {split:5s}  {f['images']:7d}  {f['unreadable']:6d}  {classes:>7s}  "
                     f"{imbalance:>9s}  {sizes[0]:>11s}  {sizes[1]:>11s}  {sizes[2]:>11s}")
    labelled = [n for n, f in s["splits"].items() if "classes" in f]
    used = list(s["splits"][labelled[0]]["classes"]) if labelled else []
    if used and len(used) <= 40:
        width = max(len("class"), *(len(name) for name in used))
        lines.append(f"  {'class':{width}s}  " + "  ".join(f"{n:>6s}" for n in labelled))
        for name in used:
            lines.append(f"  {name:{width}s}  " + "  ".join(
                f"{s['splits'][n]['classes'][name]:6d}" for n in labelled))
    if s["classes_without_images"]:
        lines.append(f"  {s['classes_without_images']} of the {s['classes']} classes have no "
                     f"image in any split")
    for split, f in s["splits"].items():
        if f.get("classes_missing"):
            lines.append(f"  warning: the {split} split has no image of "
                         f"{_some(f['classes_missing'])}")
    d = s["duplicates"]
    lines.append(f"duplicates ({s['hash']}):")
    for split, count in d["within"].items():
        lines.append(f"  within {split}: {count} group(s)")
    leaked = ", ".join(f"{n} of {split}" for split, n in d["across_images"].items())
    lines.append(f"  across splits: {d['across_groups']} group(s)"
                 + (f"; images with a copy in another split: {leaked}" if leaked else ""))
    if d["labels_differ"]:
        lines.append(f"  {d['labels_differ']} group(s) hold copies with different labels "
                     f"(listed first: one label of each is wrong)")
    for group in s["groups"][:limit]:
        members = " = ".join(where(m) for m in group["members"])
        kind = "exact" if group["exact"] else "near"
        lines.append(f"  [{kind}{', labels differ' if group['labels_differ'] else ''}] "
                     f"{_cut(members)}")
    if len(s["groups"]) > limit:
        lines.append(f"  ... and {len(s['groups']) - limit} more group(s) (all in --out FILE.json)")
    if s["unreadable"]:
        lines.append(f"{len(s['unreadable'])} image(s) do not decode:")
        lines += [f"  {u['path']}: {u['reason']}" for u in s["unreadable"][:limit]]
        if len(s["unreadable"]) > limit:
            lines.append(f"  ... and {len(s['unreadable']) - limit} more (all in --out FILE.json)")
    return lines


def where(member: dict) -> str:
    """A group member as the tables show it: split/id (class)."""
    split, example_id = member["split"], member["id"]
    shown = example_id if example_id.startswith(f"{split}/") else f"{split}/{example_id}"
    return shown + (f" ({member['class']})" if member.get("class") else "")


def _some(names, shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _cut(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def one_line(result: Survey, command: str) -> str:
    """What `corolla train` says about the data: the copies across splits, and how to list
    them."""
    leaked = result.leaked()
    differ = sum(result.labels_differ(g) for g in result.groups)
    conflicts = (f"{differ} group(s) of copies with different labels (one label of each is "
                 f"wrong); ") if differ else ""
    if not leaked:
        within = len(result.groups)
        return (f"data check: {conflicts}no duplicates across splits ({within} group(s) "
                f"within splits; {command})")
    images = ", ".join(f"{n} {split}" for split, n in leaked.items())
    return (f"data check: {conflicts}{len(result.across())} group(s) of duplicates across "
            f"splits ({images} image(s) with a copy in another split: scores on them are too "
            f"good); list them: {command}")
