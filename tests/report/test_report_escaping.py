"""report.html from files someone else wrote: a run folder whose every file holds markup in every
field the report shows renders with none of it live, and values of the wrong type (a string
where a number belongs) are shown as text rather than crashing the report."""

from __future__ import annotations

import csv
import json
from html.parser import HTMLParser

import pytest

from corolla.errors import UserError
from corolla.report import html
from corolla.runs import paths

ATTACK = '<script>alert(1)</script><img src=x onerror="alert(2)">'

# Every element the report writes itself; anything else came from a file.
OWN_TAGS = {"div", "style", "h1", "h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td",
            "pre", "figure", "img", "figcaption", "html", "head", "body", "meta", "title",
            "wbr"}


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.handlers, self.sources = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        self.sources += [value for name, value in attrs if name == "src"]


def _live(page: str) -> _Elements:
    parser = _Elements()
    parser.feed(page)
    return parser


def _tampered_run(folder):
    folder.mkdir()
    per_class = [{"name": ATTACK, "label": ATTACK, "support": ATTACK, "precision": ATTACK,
                  "recall": ATTACK, "f1": ATTACK}]
    (folder / paths.METRICS).write_text(json.dumps({
        "split": ATTACK, "data": ATTACK, "accuracy": ATTACK, "f1_macro": ATTACK,
        "f1_macro_ci95": [ATTACK, ATTACK], "num_examples": ATTACK, "num_classes_present": ATTACK,
        "note": ATTACK, "per_class": per_class}))
    (folder / paths.CONFIG).write_text(
        f"[model]\nname = {json.dumps(ATTACK)}\n[train]\nepochs = {json.dumps(ATTACK)}\n"
        f"[data]\nimage_size = {json.dumps(ATTACK)}\n")
    plan = {"accelerator": ATTACK, "backend": ATTACK, "hardware": {ATTACK: ATTACK}}
    (folder / paths.PLAN).write_text(json.dumps({"sessions": [
        {"started": ATTACK, "plan": plan, "versions": {ATTACK: ATTACK}}]}))
    (folder / paths.HISTORY).write_text(f'epoch,"{ATTACK.replace(chr(34), chr(34) * 2)}"\n1,0.5\n')
    (folder / paths.DATA_CHECK).write_text(json.dumps({
        "read": ATTACK, "images": ATTACK, "hash": ATTACK, "note": ATTACK,
        "splits": {ATTACK: {"images": ATTACK, "unreadable": ATTACK, "imbalance": ATTACK,
                            "width": {"min": ATTACK, "max": ATTACK}}},
        "duplicates": {"groups": ATTACK, "exact_groups": ATTACK, "labels_differ": ATTACK,
                       "across_images": {ATTACK: ATTACK}},
        "groups": []}))
    with (folder / paths.LABEL_REVIEW).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["rank", "id", "given", "suggested", "p_given", "p_suggested"])
        writer.writerow([ATTACK] * 6)
    return folder


def test_markup_in_every_field_of_a_run_is_shown_as_text(tmp_path):
    page = html.document(html.sources(_tampered_run(tmp_path / "run")))
    found = _live(page)
    assert set(found.tags) <= OWN_TAGS and "script" not in found.tags, set(found.tags) - OWN_TAGS
    assert found.handlers == [] and "x" not in found.sources
    # Shown, as text, wherever it was: every table cell and paragraph escaped it.
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 20


def test_markup_in_an_ensemble_and_a_string_weight_are_text(tmp_path):
    folder = tmp_path / "ensemble"
    folder.mkdir()
    (folder / paths.METRICS).write_text(json.dumps({
        "f1_macro": 0.9, "weights_search": ATTACK,
        "members": [{"folder": ATTACK, "weight": ATTACK, "f1_macro": ATTACK,
                     "f1_macro_ci95": ATTACK}]}))
    page = html.document(html.sources(folder))
    found = _live(page)
    assert "script" not in found.tags and found.handlers == []
    assert page.count("&lt;script&gt;") >= 4


@pytest.mark.parametrize("sessions", ['"notalist"', '["a"]', "{}"])
def test_a_plan_json_whose_sessions_are_not_sessions_is_one_line(tmp_path, sessions):
    folder = _tampered_run(tmp_path / "run")
    (folder / paths.PLAN).write_text(f'{{"sessions": {sessions}}}')
    with pytest.raises(UserError, match=r"plan.json is damaged: its sessions are not a list"):
        html.document(html.sources(folder))
