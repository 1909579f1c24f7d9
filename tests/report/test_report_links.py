"""report.html shows only a folder's own files: a file of the run that is a link (to a secret
anywhere on the machine) or a special file is not read into the page, which is mailed and
archived, but named there as not read; the rest of the report is written as usual."""

from __future__ import annotations

import base64
import json
import os

import pytest

from corolla.errors import UserError
from corolla.report import html
from corolla.runs import paths

SECRET = "s3cr3t-token-5d41402abc4b2a76"

# Each file the report reads from a run, and a secret in a form the report would show.
LINKED = {
    "leak.png": SECRET,
    paths.CONFUSION: SECRET,
    paths.CONFIG: f'[model]\nname = "{SECRET}"\n',
    paths.PLAN: json.dumps({"sessions": [{"started": SECRET, "versions": {SECRET: SECRET}}]}),
    paths.HISTORY: f"epoch,{SECRET}\n1,0.5\n",
    paths.DATA_CHECK: json.dumps({"read": SECRET, "splits": {}}),
    paths.LABEL_REVIEW: f"rank,id,given,suggested,p_given,p_suggested\n1,{SECRET},a,b,0.1,0.9\n",
    paths.FINISHED: "2026-01-02T03:04:05+0000\n",  # a time is all it shows: not read either
}


def _run(folder):
    folder.mkdir()
    (folder / paths.METRICS).write_text(json.dumps({"f1_macro": 0.5, "split": "val"}))
    (folder / paths.CONFIG).write_text('[model]\nname = "small_cnn"\n')
    (folder / "own.png").write_bytes(b"own picture")
    return folder


@pytest.mark.parametrize("name", sorted(LINKED))
def test_a_run_file_that_links_elsewhere_is_named_not_read(tmp_path, name):
    run = _run(tmp_path / "run")
    secret = tmp_path / "home" / "secret"
    secret.parent.mkdir()
    secret.write_text(LINKED[name])
    (run / name).unlink(missing_ok=True)
    os.symlink(secret, run / name)
    page = html.document(html.sources(run))
    assert SECRET not in page
    assert base64.b64encode(secret.read_bytes()).decode() not in page
    assert f"Not read: {run / name}: a link or not a regular file" in page
    # The run's own files are still shown.
    assert base64.b64encode(b"own picture").decode() in page and "0.5000" in page


def test_a_linked_config_leaves_the_header_without_its_settings(tmp_path):
    run = _run(tmp_path / "run")
    secret = tmp_path / "secret.toml"
    secret.write_text(LINKED[paths.CONFIG])
    (run / paths.CONFIG).unlink()
    os.symlink(secret, run / paths.CONFIG)
    page = html.document(html.sources(run))
    assert "<h2>Config (config.toml)</h2>\n<p>Not read (see above).</p>" in page
    assert SECRET not in page and page.count(str(run / paths.CONFIG)) == 1


@pytest.mark.timeout(30)
def test_a_pipe_named_like_a_picture_is_named_not_read(tmp_path):
    """Reading a FIFO waits for a writer that never comes."""
    run = _run(tmp_path / "run")
    os.mkfifo(run / "stuck.png")
    page = html.document(html.sources(run))
    assert f"Not read: {run / 'stuck.png'}" in page


def test_linked_metrics_are_one_line(tmp_path):
    run = _run(tmp_path / "run")
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"f1_macro": 0.5, "note": SECRET}))
    (run / paths.METRICS).unlink()
    os.symlink(secret, run / paths.METRICS)
    with pytest.raises(UserError, match=r"metrics\.json is a link or not a regular file; a "
                                        r"report reads only a folder's own files") as e:
        html.document(html.sources(run))
    assert "\n" not in str(e.value)
