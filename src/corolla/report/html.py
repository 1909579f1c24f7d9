"""The HTML report of a run: one self-contained `report.html` that opens offline and can be
mailed or archived as it is.

Every picture of the folder is embedded (PNG as a base64 data URI), the CSS is inline, and the
page has no script and no link to anything outside itself. The report is a writer: it reads what
the folder holds (metrics.json, the pictures, config.toml, plan.json, history.csv, FINISHED)
and never runs a model. Three kinds of folder have one:

- a run folder after `corolla evaluate` (or `corolla train`, which evaluates);
- an evaluation folder (RUN/eval-<data>/, or the --out of `corolla evaluate`): its metrics and
  pictures, with the config and plan of the run named in its metrics.json;
- an ensemble folder (`corolla ensemble`): its members and weights instead of config and plan.

Every value read from a file is data, whatever its type (a tampered metrics.json may hold
markup where a number belongs): `_table` escapes each cell itself, so no caller can forget.
Every file is read through `Sources.file`: a link or a special file is not read but named in
the page, since a link in a run folder would put whatever it points to into a page that is
mailed and archived.
"""

from __future__ import annotations

import base64
import csv
import html
import os
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from importlib import metadata
from pathlib import Path

from corolla.config.schema import MAX_EPOCHS
from corolla.data.audit import findings
from corolla.errors import UserError
from corolla.files import (MAX_PICTURE, read_bounded, read_history, read_json,
                           regular_file_inside, write_text_atomic)
from corolla.runs import paths, rundir, time_plan_file


# Known pictures first, in the order people read them; any other PNG of the folder follows.
CAPTIONS = {
    paths.CONFUSION: "Confusion matrix",
    paths.CURVES: "Training curves",
    paths.SAMPLES: "Sample predictions",
    paths.MISTAKES: "Most confident mistakes",
    paths.LABEL_REVIEW_PICTURE: "Labels to review",
    paths.EXPLANATIONS: "Why it decided (Grad-CAM)",
    paths.LR_FIND_PICTURE: "Learning-rate range test (--lr find)",
}

# The headline figures, as metrics.json names them.
SUMMARY = (
    ("accuracy", "Accuracy"),
    ("f1_macro", "Macro F1 (the competition's metric)"),
    ("precision_macro", "Macro precision"),
    ("recall_macro", "Macro recall"),
    ("f1_macro_present", "Macro F1 over the classes present"),
)


@dataclass
class Sources:
    """What a report is made of: the folder, its kind, its metrics and, for runs and their
    evaluations, the run folder holding config.toml, plan.json, data_check.json and
    history.csv. Several sections show each of these files: each is read once, by the first
    section that asks for it (where a damaged one fails), and kept for the others."""

    folder: Path
    kind: str  # "run", "evaluation" or "ensemble"
    metrics: dict
    run_dir: Path | None
    skipped: dict[Path, None] = field(default_factory=dict)  # files not read, in order met

    def file(self, folder: Path | None, name: str) -> Path | None:
        """folder/name where it is a regular file of the folder; None where it is missing, or
        where it is a link or a special file: such a one is not read, and the page names it
        (`_skipped`)."""
        if folder is None:
            return None
        path = regular_file_inside(folder, name)
        if path is None and os.path.lexists(folder / name):
            self.skipped[folder / name] = None
        return path

    @cached_property
    def config_text(self) -> str | None:
        """config.toml as written (the run's); None where it is not read."""
        path = self.file(self.run_dir, paths.CONFIG)
        return None if path is None else path.read_text()

    @cached_property
    def time_plan_text(self) -> str | None:
        """time_plan.json as written (a timed run's plan); None where there is none or it is
        not read."""
        path = self.file(self.run_dir, paths.TIME_PLAN)
        if path is None:
            return None
        try:
            return read_bounded(path, time_plan_file.MAX_BYTES, "time plan").decode(
                "utf-8", errors="replace")
        except (OSError, UserError):
            return None

    @cached_property
    def settings(self) -> dict:
        """The headline settings as config.toml holds them (sizes as numbers); none where
        there is no run or its config.toml is not read or does not parse."""
        if self.run_dir is None:
            return {}
        try:
            return _settings(tomllib.loads(self.config_text or ""))
        # (AttributeError, TypeError: a section that is not a table, `data = 3`; RecursionError:
        # arrays nested thousands deep, which tomllib reads by recursion)
        except (OSError, tomllib.TOMLDecodeError, RecursionError, AttributeError, TypeError):
            return {}

    @cached_property
    def history(self) -> list[dict]:
        """history.csv's rows, one an epoch trained (values as text); none where there is no
        run or no history, or it is not read (`file`)."""
        return _history(self)

    @cached_property
    def kept_head(self) -> float | None:
        """The val macro F1 of the linear head where linear_head.json says the run kept it
        over every trained epoch; None where it did not, there is none, or it is not a record
        Corolla wrote (the page then says nothing of it)."""
        path = self.file(self.run_dir, paths.LINEAR_HEAD)
        if path is None:
            return None
        try:
            record = read_json(path, "train the run again")
        except (OSError, UserError):
            return None
        if not isinstance(record, dict):
            return None
        f1 = record.get("val_f1")
        if record.get("kept") is not True or isinstance(f1, bool) or \
                not isinstance(f1, (int, float)) or not 0 <= f1 <= 1:
            return None
        return float(f1)

    @cached_property
    def data_check(self) -> dict | None:
        """The run's data_check.json; None where there is none."""
        path = self.file(self.run_dir, paths.DATA_CHECK)
        if path is None:
            return None
        return read_json(path, "train the run again to check its data, or remove the file")

    @cached_property
    def sessions(self) -> list[dict]:
        """The training sessions of the run's plan.json; none where it has none."""
        path = self.file(self.run_dir, paths.PLAN)
        if path is None:
            return []
        fix = "move it away to write the report without the sessions"
        sessions = read_json(path, fix).get("sessions", [])
        if not isinstance(sessions, list) or not all(isinstance(s, dict) for s in sessions):
            raise UserError(f"{path} is damaged: its sessions are not a list of sessions; {fix}")
        return sessions


def sources(folder: str | Path) -> Sources:
    """The folder's report sources; a folder without metrics.json is an error saying which
    command writes it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder; pass a run folder, e.g. runs/<run>")
    path = folder / paths.METRICS
    if not path.is_file():
        if (folder / paths.CONFIG).is_file():
            if rundir.status(folder) == rundir.TRAINING:  # nothing to evaluate yet
                raise UserError(rundir.untrained(folder))
            raise UserError(f"run {str(folder)!r} has no evaluation ({path} is missing); run "
                            f"`corolla evaluate {folder}` first")
        raise UserError(f"{folder} holds no {paths.METRICS}; pass a run folder after "
                        f"`corolla evaluate`, an eval-* folder or an ensemble folder")
    if regular_file_inside(folder, paths.METRICS) is None:
        raise UserError(f"{path} is a link or not a regular file; a report reads only a "
                        f"folder's own files: put the file itself there, e.g. with "
                        f"`corolla evaluate`")
    metrics = read_json(path, f"write it again with `corolla evaluate {folder}`")
    if not isinstance(metrics, dict):
        raise UserError(f"{path} is damaged: it holds a JSON {type(metrics).__name__}, not an "
                        f"object of metrics; write it again with `corolla evaluate {folder}`")
    if "members" in metrics:
        return Sources(folder, "ensemble", metrics, None)
    if (folder / paths.CONFIG).is_file():
        return Sources(folder, "run", metrics, folder)
    # An evaluation on other data: its run is the folder above (RUN/eval-<data>/), or the one
    # its metrics.json names (an --out folder elsewhere).
    for candidate in (folder.parent, Path(metrics.get("run", "") or folder)):
        if (candidate / paths.CONFIG).is_file():
            return Sources(folder, "evaluation", metrics, candidate)
    return Sources(folder, "evaluation", metrics, None)


def write(folder: str | Path) -> Path:
    """Writes FOLDER/report.html (atomically) and returns its path."""
    src = sources(folder)
    return write_text_atomic(src.folder / paths.REPORT, document(src))


def document(src: Sources) -> str:
    """The whole page."""
    title = f"Corolla report: {src.folder.resolve().name}"
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n</head>\n<body>\n{fragment(src)}\n</body>\n</html>\n")


def fragment(src: Sources | str | Path) -> str:
    """The report as one <div> with its own scoped style: the page's body, and what Jupyter
    shows inline (`corolla.api`)."""
    if not isinstance(src, Sources):
        src = sources(src)
    parts = [f"<style>{_CSS}</style>",
             f"<h1>Corolla {src.kind} report: {_e(src.folder.resolve().name)}</h1>",
             _part(_header, src, "The header", paths.METRICS),
             _part(lambda s: _metrics(s.metrics), src, "Metrics", paths.METRICS),
             _part(_limits, src, "What limits the score", paths.DATA_CHECK),
             _part(lambda s: _per_class(s.metrics), src, "Per class", paths.METRICS)]
    if src.kind == "ensemble":
        parts.append(_part(lambda s: _members(s.metrics), src, "Members", paths.METRICS))
    parts.append(_pictures(src))
    parts += [_part(_label_review, src, "Labels to review", paths.LABEL_REVIEW),
              _part(_data_check, src, "Data check", paths.DATA_CHECK)]
    if src.run_dir is not None:
        parts += [_part(_timings, src, "Timings", f"{paths.PLAN} or {paths.HISTORY}"),
                  _part(_plan, src, "Hardware plan", paths.PLAN), _config(src)]
    elif src.kind == "evaluation":
        parts.append("<p>The run of this evaluation was not found: no config or plan.</p>")
    parts.insert(3, _skipped(src))  # below the header, once every file has been asked for
    version = metadata.version("corolla")
    parts.append(f'<p class="foot">Written by Corolla {_e(version)} on '
                 f"{_e(time.strftime('%Y-%m-%d %H:%M:%S %z'))} from the files of "
                 f"{_e(src.folder.resolve())}.</p>")
    return '<div class="corolla-report">\n' + "\n".join(p for p in parts if p) + "\n</div>"


# What a section meets in a file whose fields have other types or shapes than Corolla writes
# (edited, or from another tool): the section is left out with a note, not the whole report.
_MALFORMED = (AttributeError, KeyError, IndexError, TypeError, ValueError, csv.Error)


def _part(render, src: Sources, title: str, files: str) -> str:
    """`render(src)`, or a one-line note where the files it shows are malformed."""
    try:
        return render(src)
    except _MALFORMED as e:
        why = _clip(f"{type(e).__name__}: {e}")
        return (f'<p class="note">{_e(title)}: not shown, {_e(files)} is malformed ({_e(why)}); '
                f"write the file again with the command that made it.</p>")


CELL = 200  # characters of a field shown; a longer one is cut


def _clip(value, most: int = CELL) -> str:
    text = str(value)
    return text if len(text) <= most else text[:most] + f"... ({len(text)} characters)"


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _f(value, digits: int = 4) -> str:
    """A score as the terminal prints it (4 decimals); anything else as it is (unescaped: the
    table escapes it)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list], numeric_from: int = 1) -> str:
    """Cells are raw values, escaped here. A header may break after an underscore
    (`steps_per_<wbr>execution`), so a wide table narrows without splitting words."""
    head = "".join(f"<th>{_e(h).replace('_', '_<wbr>')}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="{"num" if i >= numeric_from else "txt"}">{_e(cell)}</td>'
        for i, cell in enumerate(row)) + "</tr>\n" for row in rows)
    return (f'<div class="wide"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}'
            f"</tbody>\n</table></div>")


def _header(src: Sources) -> str:
    m = src.metrics
    facts = [("folder", src.folder.resolve())]
    if src.run_dir is not None and src.run_dir != src.folder:
        facts.append(("run", src.run_dir.resolve()))
    if m.get("data"):
        facts.append(("data", m["data"]))
    facts.append(("split", m.get("split", "val")))
    if src.run_dir is not None:
        cfg = _config_values(src)
        facts += [(k, cfg[k]) for k in ("model", "data image size", "model input size")
                  if k in cfg]
        epochs = _epochs(src.settings.get("epochs"), len(src.history))
        if epochs:
            facts.append(("epochs", epochs))
        if src.kept_head is not None:  # (the curves show the epochs, none of which it is)
            facts.append(("model kept", f"the linear head on the frozen features (val macro "
                                        f"F1 {src.kept_head:.4f}): no trained epoch beat it"))
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    return f'<table class="facts">{rows}</table>'


def _epochs(planned, trained: int) -> str:
    """The epochs trained (history.csv's rows), beside those config.toml planned where fewer
    ran: a time budget or early stopping ended the run sooner, and config.toml keeps the plan
    (as written: a config edited by hand may hold anything)."""
    if not trained:
        return f"{planned} planned" if planned else ""
    fewer = isinstance(planned, int) and not isinstance(planned, bool) and trained < planned
    return f"{trained} of {planned} planned" if fewer else str(trained)


def _interval(m: dict) -> str:
    """The bootstrap interval of a macro F1 (`scoring.metrics.macro_f1_interval`)."""
    interval = m.get("f1_macro_ci95")
    if isinstance(interval, list) and len(interval) == 2:
        return f"{_f(interval[0])} to {_f(interval[1])}"
    return _f(interval) if interval else ""


def _metrics(m: dict) -> str:
    rows = [[label, _f(m[key])] for key, label in SUMMARY if key in m]
    if m.get("f1_macro_ci95"):  # beside the competition's figure: how much it may move
        rows.insert(2, ["Macro F1, 95% bootstrap interval over images", _interval(m)])
    counts = [("num_examples", "Images"), ("num_classes_present", "Classes present"),
              ("num_classes_scored", "Classes scored (true or predicted)")]
    rows += [[label, m[key]] for key, label in counts if key in m]
    note = f'<p class="note">{_e(m["note"])}</p>' if m.get("note") else ""
    return "<h2>Metrics</h2>\n" + _table(["metric", "value"], rows) + note


def _members(m: dict) -> str:
    rows = [[member.get("folder", "?"), _f(member.get("weight", "?"), 3),
             _f(member.get("f1_macro", "?")), _interval(member)] for member in m["members"]]
    return ("<h2>Members and weights</h2>\n" + _table(["member", "weight", "val macro F1",
                                                      "95% interval"], rows)
            + f"<p>Weights: {_e(m.get('weights_search', ''))}</p>")


def _skipped(src: Sources) -> str:
    """The files of the folder that were not read: links and special files."""
    if not src.skipped:
        return ""
    names = ", ".join(str(p) for p in src.skipped)
    return (f'<p class="note">Not read: {_e(names)}: a link or not a regular file. A report '
            f"shows only a folder's own files; put the files themselves there to see them."
            f"</p>")


def _pictures(src: Sources) -> str:
    folder = src.folder
    found = sorted((p for p in folder.glob("*.png") if src.file(folder, p.name)), key=lambda p: (
        list(CAPTIONS).index(p.name) if p.name in CAPTIONS else len(CAPTIONS), p.name))
    if not found:
        return ""
    figures = []
    for path in found:
        try:
            data = base64.b64encode(read_bounded(path, MAX_PICTURE, "picture")).decode("ascii")
        except UserError:  # far larger than any plot: no picture Corolla drew, not shown
            continue
        caption = CAPTIONS.get(path.name, path.stem.replace("_", " "))
        figures.append(f'<figure><img src="data:image/png;base64,{data}" alt="{_e(caption)}">'
                       f"<figcaption>{_e(caption)} ({_e(path.name)})</figcaption></figure>")
    return "<h2>Pictures</h2>\n" + "\n".join(figures)


# Below this many training photos a class, its scores rest on too few examples to learn from.
FEW_PHOTOS = 10


def _limits(src: Sources) -> str:
    """Where the data, not the model, bounds the score, with the measured figures: training
    photos smaller than the model's input (upscaling adds no detail) and classes with few
    training photos. From data_check.json and config.toml; nothing when neither shows."""
    if src.data_check is None:
        return ""
    splits = src.data_check.get("splits", {})
    train = splits.get("train") if isinstance(splits, dict) else None
    if not isinstance(train, dict):
        return ""
    found = []
    input_size = _number_of(src.settings.get("model input size"))
    sides = [_number_of(train.get(k, {}).get("median")) if isinstance(train.get(k), dict)
             else None for k in ("width", "height")]
    if input_size and all(sides) and min(sides) < input_size:
        size = f"{sides[0]:.0f} px" if sides[0] == sides[1] else \
            f"{sides[0]:.0f} x {sides[1]:.0f} px"
        found.append(f"The training photos are {size} (median), smaller than the model's "
                     f"{input_size:g} px input: enlarging them adds no detail.")
    counts = train.get("classes", {})
    if isinstance(counts, dict) and counts:
        few = sorted((n, name) for name, n in counts.items()
                     if isinstance(n, int) and n < FEW_PHOTOS)
        if few:
            fewest = ", ".join(f"{str(name).strip()} ({n})" for n, name in few[:5])
            found.append(f"{len(few)} of {len(counts)} classes have fewer than {FEW_PHOTOS} "
                         f"training photos (fewest: {fewest}): their scores rest on a few "
                         f"examples.")
    if not found:
        return ""
    return ("<h3>What limits the score</h3>\n"
            + "".join(f'<p class="note">{_e(line)}</p>\n' for line in found))


def _number_of(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _per_class(m: dict) -> str:
    rows = [[str(r.get("name", "")).strip(), r.get("label", ""), r.get("support", ""),
             _f(r.get("precision", "")), _f(r.get("recall", "")), _f(r.get("f1", ""))]
            for r in m.get("per_class", [])]
    if not rows:
        return ""
    return ("<h2>Per class</h2>\n"
            + _table(["class", "label", "support", "precision", "recall", "F1"], rows))


# ---- the data check and the labels to review ----

REVIEW_ROWS = 20  # rows of label_review.csv shown; the file has them all


def _label_review(src: Sources) -> str:
    """The first rows of label_review.csv (the picture is among the pictures)."""
    path = src.file(src.folder, paths.LABEL_REVIEW)
    if path is None:
        return ""
    rows, count = [], 0
    with path.open(newline="") as f:
        for row in csv.DictReader(f):  # only the rows shown are kept: the rest are counted
            if count < REVIEW_ROWS:
                rows.append(row)
            count += 1
    intro = (f"<p>{count} image(s) whose given label the model finds unlikely while it is "
             f"confident of another class (confident learning, on predictions for images it "
             f"did not train on; only as good as the model). Look at them: a wrong label "
             f"teaches the model the wrong thing. All of them: {_e(path.name)}.</p>")
    if not rows:
        return "<h2>Labels to review</h2>\n" + intro
    table = _table(["rank", "id", "given", "model", "p(given)", "p(model)"], [
        [_clip(r.get("rank")), _clip(r.get("id")), _clip(r.get("given")),
         _clip(r.get("suggested")), _clip(_number(r.get("p_given"))),
         _clip(_number(r.get("p_suggested")))] for r in rows],
        numeric_from=4)
    return "<h2>Labels to review</h2>\n" + intro + table


def _data_check(src: Sources) -> str:
    """data_check.json of the run: splits, classes, duplicates within and across splits."""
    check = src.data_check
    if check is None:
        return ""
    rows = [[name, s.get("images"), s.get("unreadable"),
             len(s.get("classes", {})) - len(s.get("classes_missing", [])) or "-",
             f"{_f(s['imbalance'], 1)}x" if "imbalance" in s else "-",
             _span(s.get("width")), _span(s.get("height"))]
            for name, s in check.get("splits", {}).items()]
    d = check.get("duplicates", {})
    leaked = ", ".join(f"{n} of {split}" for split, n in d.get("across_images", {}).items())
    text = (f"<h2>Data check</h2>\n<p>{_e(check.get('read', ''))}: {_e(check.get('images'))} "
            f"images ({_e(check.get('hash', ''))}). {_e(check.get('note', ''))}</p>\n"
            + _table(["split", "images", "unreadable", "classes", "imbalance", "width",
                      "height"], rows))
    # Copies with different labels first (one label of each is wrong), then leaks.
    shown = [g for g in check.get("groups", []) if g.get("labels_differ")] + \
        [g for g in check.get("groups", []) if len(g["splits"]) > 1 and not g.get("labels_differ")]
    across = [g for g in check.get("groups", []) if len(g["splits"]) > 1]
    differ = d.get("labels_differ", 0)
    warn = ' class="note"' if shown else ""
    text += (f"<p{warn}>" + (f"Copies with different labels: {_e(differ)} group(s), one label "
                             f"of each is wrong. " if differ else "")
             + f"Duplicates: {_e(d.get('groups', 0))} group(s) "
             f"({_e(d.get('exact_groups', 0))} exact), {_e(len(across))} across splits"
             + (f" (images with a copy in another split: {_e(leaked)}: scores on them are "
                f"too good)" if leaked else "") + ".</p>\n")
    if shown:
        text += _table(["kind", "copies (split/id, class)"], [
            [("exact" if g["exact"] else "near")
             + (", labels differ" if g.get("labels_differ") else ""),
             " = ".join(findings.where(m) for m in g["members"])]
            for g in shown[:REVIEW_ROWS]], numeric_from=99)
    return text


def _span(extent) -> str:
    """A data check's "width" or "height" ({"min": .., "max": ..}) as min-max."""
    return f"{extent.get('min')}-{extent.get('max')}" if isinstance(extent, dict) else "-"


def _when(text: str) -> datetime | None:
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m {seconds % 60:02d}s"


def _timings(src: Sources) -> str:
    """What the run recorded about time: when each session started, when the evaluation was
    written and when the run finished, and the epochs of history.csv."""
    run_dir, rows = src.run_dir, []
    sessions = src.sessions
    for i, session in enumerate(sessions):
        rows.append([f"session {i + 1} started", session.get("started", "?")])
    evaluated = datetime.fromtimestamp((src.folder / paths.METRICS).stat().st_mtime).astimezone()
    rows.append(["evaluation written", evaluated.strftime("%Y-%m-%dT%H:%M:%S%z")])
    finished = src.file(run_dir, paths.FINISHED)
    end = _when(finished.read_text()) if finished is not None else None
    if end is not None:
        rows.append(["run finished", end.strftime("%Y-%m-%dT%H:%M:%S%z")])
    # In the order they happened (an evaluation run again after the finish comes last); a
    # time that does not parse keeps its place after those that do.
    rows.sort(key=_in_time_order)
    start = _when(sessions[0].get("started", "")) if sessions else None
    if start is not None and src.kind == "run":
        stop, what = (end, "finish") if end is not None else (evaluated, "evaluation")
        rows.append([f"wall time, first start to {what}",
                     _duration((stop - start).total_seconds())])
    history = src.history
    text = "<h2>Timings</h2>\n" + _table(["event", "time"], rows)
    if history:
        header = list(history[0])
        text += (f"<h3>Training history ({len(history)} epoch{'s' * (len(history) != 1)}, "
                 f"history.csv)</h3>\n"
                 + _table([HISTORY_LABELS.get(k, k) for k in header],
                          [[_number(r[k]) for k in header] for r in history]))
    return text


# history.csv's columns whose name alone misleads: `seconds` is the training time so far, not
# the epoch's.
HISTORY_LABELS = {"seconds": "seconds (cumulative)"}


def _in_time_order(row: list) -> tuple:
    when = _when(str(row[1]))
    return (0, when.timestamp()) if when is not None else (1, 0.0)


def _history(src: Sources) -> list[dict]:
    path = src.file(src.run_dir, paths.HISTORY)
    if path is None:
        return []
    return [{k: str(v) for k, v in row.items()} for row in read_history(path, MAX_EPOCHS)]


def _number(text: str) -> str:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return str(text)
    return text if value.is_integer() and "." not in text else f"{value:.4g}"


def _plan(src: Sources) -> str:
    sessions = src.sessions
    if not sessions:
        return ""
    keys = ("accelerator", "backend", "strategy", "replicas", "num_processes",
            "batch_per_replica", "global_batch", "precision", "steps_per_execution",
            "jit_compile")
    # A row a setting, a column a session: ten settings side by side would not fit a page.
    header = ["setting", *(f"session {i + 1}, started {s.get('started', '?')}"
                           for i, s in enumerate(sessions))]
    rows = [[k, *(_plan_of(s).get(k, "") for s in sessions)] for k in keys]
    text = "<h2>Hardware plan (plan.json)</h2>\n" + _table(header, rows, numeric_from=99)
    hardware = _plan_of(sessions[-1]).get("hardware", {})
    if hardware:
        text += "<h3>Hardware found</h3>\n" + _table(
            ["device", "found"], [[k, v] for k, v in hardware.items()
                                  if v not in (None, "", 0, [])],  # not "tpu None"
            numeric_from=99)
    versions = sessions[-1].get("versions", {})
    if versions:
        text += "<h3>Versions</h3>\n" + _table(
            ["package", "version"], [[k, v] for k, v in versions.items()],
            numeric_from=99)
    return text


def _plan_of(session: dict) -> dict:
    plan = session.get("plan", {})
    return plan if isinstance(plan, dict) else {}


def _config_values(src: Sources) -> dict:
    """A few headline settings of the run (the whole config.toml is shown further down)."""
    found = dict(src.settings)  # a copy: the sizes are given units here only
    for key in ("data image size", "model input size"):
        if key in found:
            found[key] = f"{found[key]} px"
    return found


def _settings(cfg: dict) -> dict:
    """The headline settings of a parsed config.toml (sizes as numbers)."""
    data_size = cfg.get("data", {}).get("image_size")
    # The size the model takes: the data's unless scaled down (model.input_size; 0 in a run
    # made before it was resolved means the data's).
    input_size = cfg.get("model", {}).get("input_size") or data_size
    found = {"model": cfg.get("model", {}).get("name"),
             "data image size": data_size or None, "model input size": input_size or None,
             "epochs": cfg.get("train", {}).get("epochs")}
    return {k: v for k, v in found.items() if v is not None}


def _config(src: Sources) -> str:
    """The run's config.toml, and a timed run's time_plan.json (what its plan decided)."""
    plan = "" if src.time_plan_text is None else \
        f"\n<h2>Time plan (time_plan.json)</h2>\n<pre>{_e(src.time_plan_text)}</pre>"
    if src.config_text is None:
        return "<h2>Config (config.toml)</h2>\n<p>Not read (see above).</p>" + plan
    return f"<h2>Config (config.toml)</h2>\n<pre>{_e(src.config_text)}</pre>" + plan


_CSS = """
.corolla-report { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #1d2430; max-width: 1150px; margin: 0 auto; padding: 0 16px 32px; line-height: 1.4; }
.corolla-report h1 { font-size: 1.6em; border-bottom: 2px solid #2f6db5; padding-bottom: 6px; }
.corolla-report h2 { font-size: 1.25em; margin-top: 1.6em; color: #2f6db5; }
.corolla-report h3 { font-size: 1.05em; margin-top: 1.2em; }
.corolla-report .wide { max-width: 100%; }
.corolla-report table { border-collapse: collapse; margin: 8px 0; font-size: 0.92em;
  max-width: 100%; table-layout: auto; }
.corolla-report th, .corolla-report td { border: 1px solid #d5dbe3; padding: 3px 9px; }
.corolla-report th, .corolla-report td { overflow-wrap: anywhere; }
.corolla-report thead th { background: #eef3f9; text-align: left; }
.corolla-report table.facts th { text-align: left; background: #f6f8fb; font-weight: 600; }
.corolla-report td.num { text-align: right; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
.corolla-report figure { display: inline-block; margin: 8px 12px 8px 0; vertical-align: top; }
.corolla-report img { max-width: 100%; height: auto; border: 1px solid #d5dbe3; }
.corolla-report figcaption { font-size: 0.85em; color: #555; }
.corolla-report pre { background: #f6f8fb; border: 1px solid #d5dbe3; padding: 8px;
  white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.88em; }
.corolla-report .note { color: #8a5a00; }
.corolla-report .foot { margin-top: 2em; font-size: 0.8em; color: #777; }
"""
