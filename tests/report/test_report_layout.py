"""What report.html says and in which order, from a run folder written by hand: the per-class
table right after the metrics, the timings in the order they happened, history columns named for
what they hold, and the data's limits on the score stated with their figures."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from corolla.report import html
from corolla.runs import paths

START = datetime(2026, 11, 20, 12, 0, 0, tzinfo=timezone.utc)
# A 1x1 PNG: the report embeds every picture of the folder.
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S%z")


def _run(folder, *, photo_size=(128, 128), input_size=224, counts=None, evaluated=None):
    """A finished run: 2 sessions (at +0 s and +100 s), finished at +200 s, evaluated at
    `evaluated` (default +300 s: an evaluation run again after the finish)."""
    folder.mkdir()
    counts = counts if counts is not None else {"daisy": 40, "rose": 35, "tulip": 50}
    per_class = [{"name": n, "label": i, "support": 5, "precision": 0.5, "recall": 0.5,
                  "f1": 0.5} for i, n in enumerate(counts)]
    (folder / paths.METRICS).write_text(json.dumps({
        "split": "val", "accuracy": 0.5, "f1_macro": 0.5, "per_class": per_class}))
    (folder / paths.CONFIG).write_text(
        f'[model]\nname = "efficientnet_b0"\ninput_size = {input_size}\n'
        f"[data]\nimage_size = {input_size}\n[train]\nepochs = 2\n")
    (folder / paths.PLAN).write_text(json.dumps({"sessions": [
        {"started": _stamp(START), "plan": {"backend": "tensorflow"}},
        {"started": _stamp(START + timedelta(seconds=100)), "plan": {"backend": "tensorflow"}}]}))
    (folder / paths.FINISHED).write_text(_stamp(START + timedelta(seconds=200)) + "\n")
    (folder / paths.HISTORY).write_text("epoch,loss,seconds,val_f1_macro\n"
                                        "1,1.2,50.5,0.4\n2,0.9,101.0,0.5\n")
    width, height = photo_size
    size = {"min": min(photo_size), "median": width, "max": max(photo_size)}
    (folder / paths.DATA_CHECK).write_text(json.dumps({
        "read": "folder", "images": sum(counts.values()), "splits": {
            "train": {"images": sum(counts.values()), "unreadable": 0, "classes": counts,
                      "classes_missing": [], "imbalance": 1.4,
                      "width": size, "height": dict(size, median=height)}},
        "duplicates": {"groups": 0}, "groups": []}))
    (folder / paths.CONFUSION).write_bytes(PNG)
    when = evaluated if evaluated is not None else START + timedelta(seconds=300)
    os.utime(folder / paths.METRICS, (when.timestamp(), when.timestamp()))
    return folder


def _page(folder) -> str:
    return html.document(html.sources(folder))


def _timing_events(page: str) -> list[str]:
    section = page.split("<h2>Timings</h2>")[1].split("</table>")[0]
    return re.findall(r'<tr><td class="txt">([^<]*)</td>', section)


def test_the_per_class_table_comes_right_after_the_metrics(tmp_path):
    page = _page(_run(tmp_path / "run"))
    metrics, per_class = page.index("<h2>Metrics</h2>"), page.index("<h2>Per class</h2>")
    pictures = page.index("<h2>Pictures</h2>")
    assert metrics < per_class < pictures
    assert "<h2>" not in page[metrics + 1:per_class]  # nothing between them


def test_each_file_of_the_run_is_read_once(tmp_path, monkeypatch):
    """Several sections show config.toml, data_check.json and plan.json: one read each."""
    folder = _run(tmp_path / "run")
    reads, read_text = Counter(), Path.read_text

    def counted(self, *args, **kwargs):
        reads[self.name] += 1
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    page = _page(folder)
    assert "What limits the score" in page and "Hardware plan" in page  # all of them shown
    assert {name: reads[name] for name in (paths.CONFIG, paths.DATA_CHECK, paths.PLAN)} == {
        paths.CONFIG: 1, paths.DATA_CHECK: 1, paths.PLAN: 1}


def test_timings_are_listed_in_the_order_they_happened(tmp_path):
    page = _page(_run(tmp_path / "run"))
    assert _timing_events(page) == ["session 1 started", "session 2 started", "run finished",
                                    "evaluation written", "wall time, first start to finish"]


def test_an_evaluation_before_the_finish_is_listed_before_it(tmp_path):
    page = _page(_run(tmp_path / "run", evaluated=START + timedelta(seconds=150)))
    assert _timing_events(page)[:4] == ["session 1 started", "session 2 started",
                                        "evaluation written", "run finished"]


def test_the_history_seconds_column_says_it_is_cumulative(tmp_path):
    page = _page(_run(tmp_path / "run"))
    history = page.split("Training history (2 epochs")[1].split("</thead>")[0]
    assert re.findall(r"<th>(.*?)</th>", history) == [
        "epoch", "loss", "seconds (cumulative)", "val_<wbr>f1_<wbr>macro"]


def test_photos_smaller_than_the_models_input_are_named_with_their_sizes(tmp_path):
    page = _page(_run(tmp_path / "run", photo_size=(128, 96), input_size=224))
    assert ("The training photos are 128 x 96 px (median), smaller than the model&#x27;s "
            "224 px input") in page
    limits = page.index("What limits the score")
    assert page.index("<h2>Metrics</h2>") < limits < page.index("<h2>Per class</h2>")


def test_classes_with_few_training_photos_are_counted_and_named(tmp_path):
    counts = {"daisy": 40, "rose": 4, "tulip": 9, "iris": 10}
    page = _page(_run(tmp_path / "run", counts=counts))
    assert ("2 of 4 classes have fewer than 10 training photos (fewest: rose (4), "
            "tulip (9))") in page


@pytest.mark.parametrize("photo_size, input_size", [((224, 224), 224), ((512, 300), 224)])
def test_data_that_does_not_limit_the_score_gets_no_note(tmp_path, photo_size, input_size):
    page = _page(_run(tmp_path / "run", photo_size=photo_size, input_size=input_size))
    assert "What limits the score" not in page


def test_wide_tables_and_the_config_wrap_instead_of_scrolling(tmp_path):
    page = _page(_run(tmp_path / "run"))
    assert "overflow-x" not in page
    assert re.search(r"\.corolla-report th, \.corolla-report td \{[^}]*overflow-wrap: anywhere",
                     page)
    assert re.search(r"\.corolla-report td\.num \{[^}]*white-space: nowrap", page)  # no 0.93 / 98
    assert "<th>val_<wbr>f1_<wbr>macro</th>" in page  # a header breaks between words
    assert re.search(r"\.corolla-report pre \{[^}]*white-space: pre-wrap", page)


def test_the_plan_has_a_row_a_setting_and_a_column_a_session(tmp_path):
    page = _page(_run(tmp_path / "run"))
    plan = page.split("<h2>Hardware plan (plan.json)</h2>")[1].split("</table>")[0]
    assert re.findall(r"<th>([^<]*)</th>", plan) == [
        "setting", f"session 1, started {_stamp(START)}",
        f"session 2, started {_stamp(START + timedelta(seconds=100))}"]
    assert '<td class="txt">backend</td><td class="txt">tensorflow</td>' \
        '<td class="txt">tensorflow</td>' in plan


def _epochs_fact(page: str) -> str:
    header = page.split('<table class="facts">')[1].split("</table>")[0]
    return re.search(r"<tr><th>epochs</th><td>([^<]*)</td></tr>", header).group(1)


def test_the_header_counts_the_epochs_trained_not_those_planned(tmp_path):
    """A time budget plans 4 epochs (config.toml keeps the plan) and ends after 3: the header
    says 3, and the plan beside it."""
    folder = _run(tmp_path / "run")
    assert _epochs_fact(_page(folder)) == "2"  # as planned
    (folder / paths.CONFIG).write_text((folder / paths.CONFIG).read_text().replace(
        "epochs = 2", "epochs = 4"))
    (folder / paths.HISTORY).write_text("epoch,loss,seconds\n1,1.2,50\n2,0.9,100\n3,0.8,150\n")
    assert _epochs_fact(_page(folder)) == "3 of 4 planned"


def test_a_timed_runs_plan_is_shown_beside_its_config(tmp_path):
    """What the time plan decided is time_plan.json's, not config.toml's: the page shows both."""
    folder = _run(tmp_path / "run")
    assert "time_plan.json" not in _page(folder)
    (folder / paths.TIME_PLAN).write_text(json.dumps({"budget": "6m", "plan": "5 epochs <of>"}))
    page = _page(folder)
    config, plan = page.index("<h2>Config (config.toml)</h2>"), \
        page.index("<h2>Time plan (time_plan.json)</h2>")
    assert config < plan and "5 epochs &lt;of&gt;" in page[plan:]


def test_the_header_says_where_the_run_kept_its_linear_head(tmp_path):
    """The curves show the trained epochs; where none beat the linear head the metrics are the
    head's, and the header says so. A record that is not Corolla's says nothing."""
    folder = _run(tmp_path / "run")
    assert "model kept" not in _page(folder)
    (folder / paths.LINEAR_HEAD).write_text(json.dumps({"val_f1": 0.988, "c": 0.1,
                                                        "kept": True}))
    assert "<th>model kept</th><td>the linear head on the frozen features (val macro F1 " \
        "0.9880): no trained epoch beat it</td>" in _page(folder)
    for record in ({"val_f1": 0.988, "c": 0.1, "kept": False}, {"val_f1": 7, "kept": True},
                   {"val_f1": "0.9", "kept": True}, [1], "x"):
        (folder / paths.LINEAR_HEAD).write_text(json.dumps(record))
        assert "model kept" not in _page(folder)
    (folder / paths.LINEAR_HEAD).write_text("{not json")
    assert "model kept" not in _page(folder)
