"""--track before any training: off by default without importing a tracker, and a missing
package or an unreachable MLflow server is one line, in seconds, before a run folder exists."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from corolla import config
from corolla.credentials import scrub
from corolla.errors import UserError
from corolla.runs import tracking
from corolla.runs.tracking import mlflow_tracker
from corolla.runtime import signals
from helpers.cli import one_line_error
from helpers.processes import free_ports


def test_track_none_is_the_default_and_imports_no_tracker(tmp_path, monkeypatch):
    # A tracker imported anyway would fail here: an import of a None entry raises ImportError.
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "wandb", None)
    cfg = config.load_config(overrides={"output.runs_dir": str(tmp_path)})
    assert cfg.output.track == "none"
    tracking.check(cfg.output.track, tmp_path)
    tracker = tracking.start(cfg, tmp_path, resume=False)
    tracker.log_epochs([{"epoch": 1, "loss": 1.0}])
    tracker.log_scores({"f1_macro": 0.5}, tracking.FINAL)
    assert tracker.kind == "none" and tracking.for_run(tmp_path).kind == "none"
    tracking.finish(tmp_path)
    assert not any(tmp_path.iterdir())  # no tracking.json, no store


def test_track_is_a_flag_and_a_python_keyword():
    from corolla.commands import train
    from corolla.config.flags import from_flags, from_keywords

    assert from_keywords({"track": "wandb"}, "corolla.train()").values == {"output.track": "wandb"}
    assert from_flags({"track": "mlflow"}, {"track": "--track"}).values == {
        "output.track": "mlflow"}
    import argparse

    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    assert parser.parse_args(["--track", "mlflow"]).track == "mlflow"
    assert parser.parse_args([]).track is None  # the config's default: none


def test_a_bad_track_value_is_one_line(capsys, tiny_petals, tmp_path):
    one_line_error(capsys, ["train", "--data", str(tiny_petals), "--config", str(
        _config(tmp_path, 'track = "tensorboard"'))], "output.track must be one of none, mlflow, "
        "wandb", "'tensorboard'")


def test_track_with_its_package_missing_is_one_line_before_training(capsys, tiny_petals,
                                                                    tmp_path, monkeypatch):
    for kind in ("mlflow", "wandb"):
        monkeypatch.setitem(sys.modules, kind, None)
        one_line_error(capsys, ["train", "--data", str(tiny_petals), "--epochs", "1",
                                "--runs-dir", str(tmp_path / "runs"), "--track", kind],
                       f"--track {kind} needs the {kind} package",
                       f'pip install "corolla[{kind}]"')
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_mlflow_server_is_one_line_from_one_bounded_request(capsys, tiny_petals,
                                                                           tmp_path, monkeypatch):
    # "Within seconds" is the request's own timeout, not this test's wall time (which is the
    # host's load): one request, no retries, given PROBE_SECONDS.
    (port,) = free_ports(1)  # nothing listens there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    requests = []
    real = urllib.request.urlopen

    def spy(url, *args, **kwargs):
        requests.append((getattr(url, "full_url", url), kwargs.get("timeout")))
        return real(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", spy)
    one_line_error(capsys, ["train", "--data", str(tiny_petals), "--epochs", "1", "--runs-dir",
                            str(tmp_path / "runs"), "--track", "mlflow"],
                   f"the MLflow server at http://127.0.0.1:{port} does not answer",
                   "MLFLOW_TRACKING_URI")
    assert requests == [(f"http://127.0.0.1:{port}/health", mlflow_tracker.PROBE_SECONDS)]
    assert mlflow_tracker.PROBE_SECONDS <= 10
    assert not (tmp_path / "runs").exists()


def test_a_silent_mlflow_server_is_one_line_when_the_probe_times_out(monkeypatch):
    # A server that takes the connection and never answers: the probe's timeout ends the wait.
    monkeypatch.setattr(mlflow_tracker, "PROBE_SECONDS", 0.2)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        with pytest.raises(UserError, match=f"127.0.0.1:{port} does not answer.*timed out"):
            mlflow_tracker._probe(f"http://127.0.0.1:{port}")


def test_an_mlflow_store_that_cannot_be_made_is_one_line_before_training(capsys, tiny_petals,
                                                                         tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    for uri, said in ((f"sqlite:///{tmp_path}/afile/sub/mlflow.db", "is a file, not a folder"),
                      (f"sqlite:///{tmp_path}", "is not a file")):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        one_line_error(capsys, ["train", "--data", str(tiny_petals), "--epochs", "1",
                                "--runs-dir", str(tmp_path / "runs"), "--track", "mlflow"],
                       "the MLflow store", said, "MLFLOW_TRACKING_URI")
    assert not (tmp_path / "runs").exists()


_OPEN_STORE = """
import sys, time
from pathlib import Path
from types import SimpleNamespace
from corolla.runs.tracking import mlflow_tracker
import mlflow  # imported before the start, so that both open the store at once
go = Path(sys.argv[1])
(go.parent / f"ready-{sys.argv[2]}").touch()
while not go.exists():
    time.sleep(0.005)
uri = "sqlite:///" + sys.argv[3]
with mlflow_tracker._store_made_once(uri):
    client = mlflow_tracker._mlflow_client(uri)
    print(mlflow_tracker._mlflow_experiment(client, str(go.parent), True))
"""


def test_a_held_lock_is_refused_at_once_or_waited_for(tmp_path):
    """`hold_lock` refuses a lock another holder has, or, with `wait` (as the store's is
    taken), gets it when that holder lets it go. flock: two opens conflict in one process."""
    import threading

    from corolla.files import hold_lock

    lock = tmp_path / ".mlflow.db.lock"
    held = hold_lock(lock)
    with pytest.raises(BlockingIOError):
        hold_lock(lock)
    got = []
    waiter = threading.Thread(target=lambda: got.append(hold_lock(lock, wait=True)),
                              daemon=True)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not got
    os.close(held)
    waiter.join(30)
    assert not waiter.is_alive() and len(got) == 1
    os.close(got[0])


@pytest.mark.slow
def test_runs_starting_together_into_a_fresh_store_both_track(tmp_path):
    """MLflow makes a new SQLite store's tables on first use: two processes at once, both
    opening it the moment a file appears, get one experiment and no error."""
    import subprocess

    db = tmp_path / "runs" / "mlflow.db"
    starts = [subprocess.Popen([sys.executable, "-c", _OPEN_STORE, str(tmp_path / "go"), str(i),
                                str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for i in range(3)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    (tmp_path / "go").touch()
    ended = [p.communicate(timeout=180) for p in starts]
    assert [p.returncode for p in starts] == [0, 0, 0], [err[-1500:] for _, err in ended]
    assert len({out.strip() for out, _ in ended}) == 1, ended


def test_online_wandb_without_an_api_key_is_one_line_before_training(capsys, tiny_petals,
                                                                     tmp_path, monkeypatch):
    """No key where W&B keeps one: one line now, not wandb.init's login prompt mid-command. A
    key in the netrc file `wandb login` writes, or offline mode, lets the run start."""
    from corolla.runs import tracking

    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    monkeypatch.setenv("NETRC", str(netrc))
    one_line_error(capsys, ["train", "--data", str(tiny_petals), "--epochs", "1", "--runs-dir",
                            str(tmp_path / "runs"), "--track", "wandb"],
                   "--track wandb has no W&B API key for api.wandb.ai", "wandb login",
                   "WANDB_MODE=offline")
    assert not (tmp_path / "runs").exists()
    netrc.write_text("machine api.wandb.ai\n  login user\n  password 0123456789abcdef\n")
    netrc.chmod(0o600)
    tracking.check("wandb", tmp_path / "runs")  # logged in: no error
    netrc.unlink()
    monkeypatch.setenv("WANDB_MODE", "offline")
    tracking.check("wandb", tmp_path / "runs")
    monkeypatch.setenv("WANDB_MODE", "bogus")  # a typo is named as such, not as a missing key
    one_line_error(capsys, ["train", "--data", str(tiny_petals), "--epochs", "1", "--runs-dir",
                            str(tmp_path / "runs"), "--track", "wandb"],
                   "WANDB_MODE='bogus' is not a W&B mode", "offline")


def test_a_tracker_that_fails_says_so_once_and_stops(tmp_path):
    """Mid-run: the first failure is one line, later calls do nothing (and raise nothing)."""
    lines = []

    class Gone:
        calls = 0

        def log_batch(self, *args, **kwargs):
            Gone.calls += 1
            raise ConnectionError("server gone\nsecond line")

        def get_metric_history(self, *args):
            return []

    tracker = mlflow_tracker.MLflowTracker(Gone(), "abc", {}, lines.append)
    tracker.log_epochs([{"epoch": 1, "loss": 1.0}])
    tracker.log_epochs([{"epoch": 2, "loss": 0.5}])
    tracker.log_scores({"f1_macro": 0.5}, tracking.FINAL)
    assert lines == ["mlflow tracking stopped (logging an epoch: ConnectionError: server gone); "
                     "the run goes on without it"]
    assert Gone.calls == 1


def test_a_failing_tracker_quotes_no_password_nor_token_of_its_address():
    """A library's error quotes the URL it failed on, with whatever credentials it held."""
    lines = []

    class Gone:
        def log_batch(self, *args, **kwargs):
            raise ConnectionError("API request to http://user:s3cr3tPW@127.0.0.1:5055/api/2.0/"
                                  "mlflow/runs/log-batch?token=s3cr3tTOKEN&run=1 failed")

        def get_metric_history(self, *args):
            return []

    mlflow_tracker.MLflowTracker(Gone(), "abc", {}, lines.append).log_epochs(
        [{"epoch": 1, "loss": 1.0}])
    assert len(lines) == 1 and "s3cr3t" not in lines[0], lines
    assert "http://***@127.0.0.1:5055/api/2.0/mlflow/runs/log-batch?token=***&run=1" in lines[0]


@pytest.mark.parametrize("text, scrubbed", [
    ("https://me:pw@host:5000/x", "https://***@host:5000/x"),
    ("https://me@host/x", "https://***@host/x"),
    ("GET https://h/x?a=1&api_key=k1 and https://h/y?access_token=t1#f",
     "GET https://h/x?a=1&api_key=*** and https://h/y?access_token=***#f"),
    ("https://h/x?secret=s&password=p&sig=g", "https://h/x?secret=***&password=***&sig=***"),
    ("http://127.0.0.1:5000/x?experiment=key&run=3", "http://127.0.0.1:5000/x?experiment=key&run=3"),
    ("user@example.com wrote a:b@c", "user@example.com wrote a:b@c"),  # no URL: nothing to hide
])
def test_secrets_are_scrubbed_from_any_quoted_address(text, scrubbed):
    assert scrub(text) == scrubbed


def test_a_user_error_quoting_a_password_prints_without_it(capsys, monkeypatch):
    """The CLI's last line of defence: whatever a UserError quotes passes the same scrubbing."""
    from corolla import cli

    def fails(args):
        raise UserError("the server at http://me:s3cr3tPW@127.0.0.1:1/ said no")

    monkeypatch.setattr(cli.COMMANDS["info"], "main", fails)
    code = cli.main(["info"])
    err = capsys.readouterr().err
    assert code == 2 and "s3cr3tPW" not in err and "http://***@127.0.0.1:1/" in err, err


def test_a_stop_inside_an_uninterrupted_block_comes_after_it_to_the_handler_that_was_there():
    """What keeps a W&B epoch and its count in tracking.json together: Ctrl-C (Python's
    KeyboardInterrupt) and SIGTERM (a handler, as `corolla train`'s) arrive once the block is
    done, each to its own handler, which is back in place."""
    got = []

    def handler(signum, frame):
        got.append(signum)

    previous = {s: signal.signal(s, h) for s, h in (
        (signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, handler))}
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with signals.held():
                signal.raise_signal(signal.SIGINT)
                done.append("the block")
        assert done == ["the block"]
        with signals.held():
            signal.raise_signal(signal.SIGTERM)
            assert got == []
        assert got == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        for signum, was in previous.items():
            signal.signal(signum, was)


def test_scores_take_the_numbers_and_split_the_interval():
    assert tracking.scores({"f1_macro": 0.8, "f1_macro_ci95": [0.7, 0.9], "split": "val",
                            "num_examples": 32, "per_class": [], "ok": True}) == {
        "f1_macro": 0.8, "f1_macro_ci95_low": 0.7, "f1_macro_ci95_high": 0.9,
        "num_examples": 32.0}


def test_no_password_is_written_into_the_run():
    assert mlflow_tracker._no_password("https://me:secret@mlflow.example:5000/x") == \
        "https://mlflow.example:5000/x"
    assert mlflow_tracker._no_password("sqlite:////runs/mlflow.db") == \
        "sqlite:////runs/mlflow.db"


def _config(tmp_path, line):
    path = tmp_path / "c.toml"
    path.write_text(f"[output]\n{line}\n")
    return path


_START_MLFLOW = """
import sys
from pathlib import Path
from corolla import config
from corolla.runs import tracking
runs = Path(sys.argv[1])
cfg = config.load_config(overrides={"output.runs_dir": str(runs), "output.track": "mlflow",
                             "output.name": "q"})
tracking.check("mlflow", runs)
(runs / "q").mkdir(parents=True)
tracking.start(cfg, runs / "q", resume=False, log=print)
tracking.finish(runs / "q")
"""


@pytest.mark.slow
@pytest.mark.parametrize("asked", [False, True])
def test_mlflows_store_set_up_lines_show_only_when_asked_for(tmp_path, asked):
    """A fresh interpreter (MLflow configures its logging at import): making the local store
    logs "Creating initial MLflow database tables..." at INFO, kept off unless the user asked
    for MLflow's logs."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_LOGGING_LEVEL"}
    env.pop("MLFLOW_TRACKING_URI", None)
    if asked:
        env["MLFLOW_LOGGING_LEVEL"] = "INFO"
    result = subprocess.run([sys.executable, "-c", _START_MLFLOW, str(tmp_path / "runs")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "tracking with MLflow" in result.stdout
    assert ("Creating initial MLflow database tables" in result.stderr) == asked, result.stderr
    if not asked:
        assert " INFO " not in result.stderr, result.stderr


def test_a_scored_file_that_is_a_link_is_not_sent(tmp_path, monkeypatch):
    """What a tracked run sends is a run's own files: a link (to a secret anywhere) among them
    would upload what it points to."""
    from corolla.runs import paths
    from corolla.runs.tracking.base import Tracker

    sent = []

    class Recording(Tracker):
        kind = "mlflow"

        def log_scores(self, metrics, prefix):
            pass

        def log_files(self, files, base):
            sent.extend(files)

    run = tmp_path / "run"
    run.mkdir()
    (run / paths.METRICS).write_text("{}")
    secret = tmp_path / "secret.png"
    secret.write_text("s3cr3t")
    os.symlink(secret, run / paths.CONFUSION)
    monkeypatch.setitem(tracking._open, run.resolve(), Recording())
    tracking.send_scored(run, run, {"f1_macro": 0.5})
    assert sent == [run / paths.METRICS]
