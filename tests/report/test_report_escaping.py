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


def _tamper(folder, name, data):
    (folder / name).write_text(json.dumps(data))


@pytest.mark.parametrize("name, data, section", [
    (paths.METRICS, {"f1_macro": 0.5, "per_class": [1, 2]}, "Per class"),
    (paths.DATA_CHECK, {"splits": {"train": {"images": 3}}, "groups": [
        {"exact": True, "labels_differ": True, "members": []}]}, "Data check"),
    (paths.DATA_CHECK, {"splits": ["train"]}, "Data check"),
    (paths.PLAN, {"sessions": [{"started": 5}]}, "Timings"),
    (paths.PLAN, {"sessions": [{"started": "x", "plan": {"hardware": [1, 2]}}]},
     "Hardware plan"),
    (paths.PLAN, {"sessions": [{"started": "x", "versions": "3.1"}]}, "Hardware plan"),
])
def test_a_part_of_another_shape_than_corolla_writes_is_noted_and_the_rest_shown(
        tmp_path, name, data, section):
    """Fields of other types (edited files, another tool's): the section they feed is left out
    with a note naming the file, not the whole report lost to a traceback."""
    folder = _tampered_run(tmp_path / "run")
    _tamper(folder, name, data)
    page = html.document(html.sources(folder))
    assert f'<p class="note">{section}: not shown, ' in page
    assert "is malformed (" in page and page.count("is malformed (") == 1
    assert "<h2>Metrics</h2>" in page and "<h2>Config (config.toml)</h2>" in page


@pytest.mark.parametrize("members", ['"abc"', "[1, 2]", '{"a": 1}'])
def test_ensemble_members_of_another_shape_are_noted(tmp_path, members):
    folder = tmp_path / "ensemble"
    folder.mkdir()
    (folder / paths.METRICS).write_text(f'{{"f1_macro": 0.9, "members": {members}}}')
    page = html.document(html.sources(folder))
    assert '<p class="note">Members: not shown, metrics.json is malformed (' in page


@pytest.mark.parametrize("metrics", ["[]", "3", '"x"'])
def test_metrics_that_are_not_an_object_are_one_line(tmp_path, metrics):
    folder = _tampered_run(tmp_path / "run")
    (folder / paths.METRICS).write_text(metrics)
    with pytest.raises(UserError, match=r"metrics.json is damaged: it holds a JSON \w+, not an "
                                        r"object of metrics; write it again"):
        html.sources(folder)


def test_label_review_fields_are_cut_and_an_oversized_one_noted(tmp_path):
    """A long id is shown cut; a 200 kB field (past the CSV reader's limit) leaves the table
    out with a note; only the rows shown are kept, the rest counted."""
    folder = _tampered_run(tmp_path / "run")
    with (folder / paths.LABEL_REVIEW).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["rank", "id", "given", "suggested", "p_given", "p_suggested"])
        writer.writerows([[k, "i" * 5000, "a", "b", 0.1, 0.9] for k in range(1000)])
    page = html.document(html.sources(folder))
    assert "1000 image(s) whose given label" in page
    assert "i" * 200 + "... (5000 characters)" in page and "i" * 201 not in page
    with (folder / paths.LABEL_REVIEW).open("a", newline="") as f:
        csv.writer(f).writerow([1, "x" * 200_000, "a", "b", 0.1, 0.9])
    page = html.document(html.sources(folder))
    assert '<p class="note">Labels to review: not shown, label_review.csv is malformed (' \
        "Error: field larger than field limit" in page
    assert "x" * 1000 not in page


def test_a_history_longer_than_any_run_is_one_line_read_no_further(tmp_path):
    """Runs train at most MAX_EPOCHS epochs: a history.csv of a million rows made a 206 MB
    page in a minute."""
    from corolla.config.schema import MAX_EPOCHS

    folder = _tampered_run(tmp_path / "run")
    (folder / paths.HISTORY).write_text(
        "epoch,loss\n" + "".join(f"{k},0.5\n" for k in range(MAX_EPOCHS + 1)))
    with pytest.raises(UserError, match=rf"history.csv holds more than {MAX_EPOCHS} epochs, "
                                        r"more than a run trains; .*move it away"):
        html.document(html.sources(folder))
    (folder / paths.HISTORY).write_text(
        "epoch,loss\n" + "".join(f"{k},0.5\n" for k in range(MAX_EPOCHS)))
    assert f"Training history ({MAX_EPOCHS} epochs" in html.document(html.sources(folder))


@pytest.mark.parametrize("text", ["data = 3\nmodel = [1]\n", "train = 'x'\n",
                                  "x = " + "[" * 3000 + "]" * 3000 + "\n"])
def test_a_config_of_another_shape_leaves_the_header_without_its_settings(tmp_path, text):
    """config.toml is shown as it is written; only the headline settings need its tables."""
    folder = _tampered_run(tmp_path / "run")
    (folder / paths.CONFIG).write_text(text)
    page = html.document(html.sources(folder))
    assert "is malformed" not in page and "<h2>Config (config.toml)</h2>" in page
