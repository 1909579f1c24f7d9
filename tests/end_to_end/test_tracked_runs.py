"""--track: tiny runs sent to a real MLflow store (the SQLite file beside the runs, and an
`mlflow server` on 127.0.0.1) and to W&B in offline mode, read back from what they stored."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from corolla.cli import main
from corolla.files import read_history
from corolla.runs import paths
from helpers.runs import Stop
from helpers.tracking import mlflow_run, mlflow_server, steps, stop, wandb_offline

pytestmark = pytest.mark.slow  # tiny tracked trainings (MLflow's store, W&B offline)

EPOCH_KEYS = ("loss", "accuracy", "val_loss", "val_accuracy", "val_f1_macro", "learning_rate")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A runs folder whose MLflow store is Corolla's default (MLFLOW_TRACKING_URI unset:
    RUNS/mlflow.db); (runs folder, a client of its store)."""
    import mlflow

    mp = pytest.MonkeyPatch()
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    runs = tmp_path_factory.mktemp("tracked")
    yield runs, mlflow.MlflowClient(f"sqlite:///{runs / paths.MLFLOW_DB}")
    mp.undo()


@pytest.fixture(scope="module")
def tracked(store, train_tiny):
    """One finished 2-epoch tiny run tracked with MLflow: (run folder, client, MLflow run)."""
    runs, client = store
    run = train_tiny(runs, "--epochs", "2", "--track", "mlflow", name="r")
    return run, client, mlflow_run(client, "r")


def test_the_mlflow_run_is_named_after_the_run_and_holds_its_config(tracked, store):
    run, client, tracked_run = tracked
    record = json.loads((run / paths.TRACKING).read_text())
    assert record["tracker"] == "mlflow" and record["run_id"] == tracked_run.info.run_id
    assert record["tracking_uri"] == f"sqlite:///{(store[0] / paths.MLFLOW_DB).resolve()}"
    assert tracked_run.info.status == "FINISHED"
    params = tracked_run.data.params
    assert params["train.epochs"] == "2" and params["output.track"] == "mlflow"
    assert params["model.name"] == "small_cnn" and params["train.steps_per_epoch"] == "2"
    run_id = (run / paths.CONFIG).read_text().split('run_id = "')[1].split('"')[0]
    assert tracked_run.data.tags["corolla.run_id"] == run_id
    # The store's files beside the runs, not in the working folder.
    assert tracked_run.info.artifact_uri.startswith(
        (store[0] / paths.MLFLOW_ARTIFACTS).resolve().as_uri())


def test_every_epoch_is_logged_once_at_its_step_as_history_csv_has_it(tracked):
    run, client, tracked_run = tracked
    history = read_history(run / paths.HISTORY)
    for key in EPOCH_KEYS:
        _same(steps(client, tracked_run.info.run_id, key), history, key)


def test_the_final_scores_carry_the_macro_f1_interval(tracked):
    run, _, tracked_run = tracked
    metrics = json.loads((run / paths.METRICS).read_text())
    logged = tracked_run.data.metrics
    assert logged["final/f1_macro"] == pytest.approx(metrics["f1_macro"])
    assert [logged["final/f1_macro_ci95_low"], logged["final/f1_macro_ci95_high"]] == \
        pytest.approx(metrics["f1_macro_ci95"])
    assert logged["final/accuracy"] == pytest.approx(metrics["accuracy"])


def test_the_report_history_and_confusion_matrix_are_artefacts(tracked, tmp_path):
    run, client, tracked_run = tracked
    names = {a.path for a in client.list_artifacts(tracked_run.info.run_id)}
    assert {paths.REPORT, paths.HISTORY, paths.CONFUSION, paths.METRICS} <= names
    got = client.download_artifacts(tracked_run.info.run_id, paths.REPORT, str(tmp_path))
    # The run's last report.html (train's, with the data check), not an earlier one.
    assert open(got, "rb").read() == (run / paths.REPORT).read_bytes()


def test_evaluate_and_ensemble_join_the_tracked_run(tracked, tmp_path):
    run, client, tracked_run = tracked
    run_id = tracked_run.info.run_id
    assert main(["evaluate", str(run), "--out", str(tmp_path / "again")]) == 0
    twin = shutil.copytree(run, tmp_path / "twin")  # the same tracked run, as a second member
    assert main(["ensemble", str(run), str(twin), "--out", str(tmp_path / "blend")]) == 0
    again = mlflow_run(client, "r")
    assert again.info.run_id == run_id  # no other run made
    metrics = again.data.metrics
    assert metrics["again/f1_macro"] == pytest.approx(tracked_run.data.metrics["final/f1_macro"])
    assert "blend/f1_macro" in metrics and "blend/f1_macro_ci95_low" in metrics
    folders = {a.path for a in client.list_artifacts(run_id)}
    assert {"again", "blend"} <= folders
    assert paths.REPORT in {a.path.split("/")[-1] for a in client.list_artifacts(run_id,
                                                                                 "again")}


def test_a_killed_run_resumed_continues_its_mlflow_run_each_epoch_once(store, train_tiny,
                                                                       monkeypatch):
    """Killed after epoch 1's backup, before its tracker heard of it (where history.csv is
    written): the resumed run logs epoch 1 then epoch 2, into the same MLflow run."""
    from corolla.training import backup

    runs, client = store
    write_history = backup.write_history

    def dies_after_the_backup(rows, path):
        if len(rows) == 1:
            raise Stop  # the state is committed, the tracker not yet called
        write_history(rows, path)

    monkeypatch.setattr(backup, "write_history", dies_after_the_backup)
    train_tiny.fit(runs, "k", {"train.epochs": 2, "output.track": "mlflow"})
    monkeypatch.setattr(backup, "write_history", write_history)
    killed = mlflow_run(client, "k")
    assert steps(client, killed.info.run_id, "loss") == []  # epoch 1 never reached it

    assert main(["train", "--resume", str(runs / "k")]) == 0
    resumed = mlflow_run(client, "k")  # one run of that name: the same
    assert resumed.info.run_id == killed.info.run_id and resumed.info.status == "FINISHED"
    history = read_history(runs / "k" / paths.HISTORY)
    for key in EPOCH_KEYS:
        _same(steps(client, resumed.info.run_id, key), history, key)
    assert "final/f1_macro" in resumed.data.metrics


# 29 s (up to 100 s on 2 busy cores): the server's start, two tiny runs. CI's large step runs
# it; the README's suite holds MLflow's tracking on a local store.
@pytest.mark.large
def test_an_mlflow_server_receives_the_run_and_its_loss_mid_run_loses_nothing(
        tmp_path, train_tiny, monkeypatch, tiny_petals):
    """MLFLOW_TRACKING_URI: a server on 127.0.0.1 gets the parameters, every epoch, the final
    scores and the files. Then a run whose server stops after its first epoch: one line says
    so (without the password of the server's address), the run trains to its end, and the
    server kept epoch 1."""
    import keras
    import mlflow

    from corolla import config, runtime, training

    with mlflow_server(tmp_path / "server") as (uri, server):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        client = mlflow.MlflowClient(uri)
        run = train_tiny(tmp_path / "runs", "--epochs", "2", "--track", "mlflow", name="s")
        served = mlflow_run(client, "s")
        assert served.data.params["train.epochs"] == "2"
        history = read_history(run / paths.HISTORY)
        _same(steps(client, served.info.run_id, "val_f1_macro"), history, "val_f1_macro")
        assert served.data.metrics["final/f1_macro"] == pytest.approx(
            json.loads((run / paths.METRICS).read_text())["f1_macro"])
        assert {paths.REPORT, paths.HISTORY, paths.CONFUSION} <= {
            a.path for a in client.list_artifacts(served.info.run_id)}

        class ServerGoes(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):  # after the epoch was sent
                if epoch == 0:
                    stop(server)

        # The second run reaches the server through an address with a password in it: what
        # the dying server's errors quote of it is scrubbed.
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri.replace("://", "://user:s3cr3tPW@"))
        lines = []
        cfg = config.load_config(overrides={
            "data.path": str(tiny_petals), "train.batch_size": 8, "train.steps_per_epoch": 2,
            "train.epochs": 2, "output.runs_dir": str(tmp_path / "runs"),
            "output.name": "gone", "output.track": "mlflow"})
        result = training.run(cfg, runtime.detect_for(cfg), log=lines.append,
                              callbacks=[ServerGoes()])
    assert (result.run_dir / paths.MODEL).is_file()
    assert [r["epoch"] for r in read_history(result.run_dir / paths.HISTORY)] == [1, 2]
    stopped = [line for line in lines if "tracking stopped" in line]
    assert len(stopped) == 1 and "the run goes on without it" in stopped[0], lines
    assert not [line for line in lines if "s3cr3tPW" in line], lines


def test_wandb_offline_writes_the_run_its_epochs_and_scores(tmp_path, train_tiny, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    run = train_tiny(tmp_path / "runs", "--epochs", "2", "--track", "wandb", name="w")
    record = json.loads((run / paths.TRACKING).read_text())
    found = wandb_offline(tmp_path / "runs")  # beside the runs: RUNS/wandb/
    assert found["names"] == {"w"} and found["ids"] == {record["run_id"]}
    history = read_history(run / paths.HISTORY)
    logged = {step: row for step, row in found["history"]}
    assert sorted(logged) == [1, 2] and len(found["history"]) == 2
    for row in history:
        for key in EPOCH_KEYS:
            assert logged[row["epoch"]][key] == pytest.approx(row[key]), key
    metrics = json.loads((run / paths.METRICS).read_text())
    assert found["summary"]["final/f1_macro"] == pytest.approx(metrics["f1_macro"])
    assert found["summary"]["final/f1_macro_ci95_low"] == pytest.approx(
        metrics["f1_macro_ci95"][0])
    assert found["config"]["train.epochs"] == 2
    assert {paths.REPORT, paths.HISTORY, paths.CONFUSION} <= found["files"]


@pytest.mark.large  # 23 s (2 busy cores): a 2-fold tiny run in two sessions; CI runs it later
def test_a_kfold_run_is_one_mlflow_run_its_folds_nested_in_it_and_resumed_into_it(
        store, train_tiny, monkeypatch):
    """`--folds 2 --track mlflow`, stopped (Ctrl-C) in fold 2 after its epoch's backup, then
    resumed: one MLflow run named after the parent folder, with the config, the pooled
    out-of-fold scores and the parent's files, and the two folds' runs nested in it, all in
    the store beside the runs; the resumed session continued the parent's run and fold 2's."""
    from corolla.training import backup

    runs, client = store
    write_history = backup.write_history

    def stopped_in_fold_2(rows, path):
        if Path(path).parent.name == "fold-2":
            raise KeyboardInterrupt
        write_history(rows, path)

    monkeypatch.setattr(backup, "write_history", stopped_in_fold_2)
    parent = train_tiny(runs, "--folds", "2", "--track", "mlflow", name="kf", code=130)
    monkeypatch.setattr(backup, "write_history", write_history)
    killed = mlflow_run(client, "kf")
    assert killed.info.status == "KILLED"

    assert main(["train", "--resume", str(parent)]) == 0
    whole = mlflow_run(client, "kf")  # one run of that name: the same
    assert whole.info.run_id == killed.info.run_id and whole.info.status == "FINISHED"
    assert json.loads((parent / paths.TRACKING).read_text())["run_id"] == whole.info.run_id
    assert whole.data.params["train.folds"] == "2" and whole.data.params["data.fold"] == "0"
    folds = client.search_runs([whole.info.experiment_id], order_by=["attributes.run_name"],
                               filter_string=f"tags.mlflow.parentRunId = '{whole.info.run_id}'")
    assert [f.info.run_name for f in folds] == ["fold-1", "fold-2"]
    for k, fold in enumerate(folds, 1):
        fold_dir = parent / f"fold-{k}"
        assert json.loads((fold_dir / paths.TRACKING).read_text())["run_id"] == \
            fold.info.run_id
        assert fold.info.status == "FINISHED"
        _same(steps(client, fold.info.run_id, "loss"), read_history(fold_dir / paths.HISTORY),
              "loss")  # fold 2's epoch once, sent by the resumed session
    pooled = json.loads((parent / paths.METRICS).read_text())
    logged = whole.data.metrics
    assert logged["final/f1_macro"] == pytest.approx(pooled["f1_macro"])
    assert [logged["final/f1_macro_ci95_low"], logged["final/f1_macro_ci95_high"]] == \
        pytest.approx(pooled["f1_macro_ci95"])
    assert logged["final/num_examples"] == pooled["num_examples"] == 96  # all of train+val
    names = {a.path for a in client.list_artifacts(whole.info.run_id)}
    assert {paths.REPORT, paths.METRICS, paths.CONFUSION} <= names
    assert not (parent / paths.MLFLOW_DB).exists()  # the folds' runs are in the runs' store


@pytest.mark.large  # 22 s (2 busy cores): a 2-fold tiny run; CI runs it after the README's suite
def test_a_kfold_run_is_a_wandb_group_whose_kfold_run_holds_the_pooled_scores(
        tmp_path, train_tiny, monkeypatch):
    """`--folds 2 --track wandb` (offline): the folds' runs and the parent's share the group
    named after the parent folder; the parent's run (job_type "kfold") holds the config, the
    pooled out-of-fold scores and the parent's files, each fold's (job_type "fold") its
    epoch and its own scores."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    runs = tmp_path / "runs"
    parent = train_tiny(runs, "--folds", "2", "--track", "wandb", name="kw")
    record = json.loads((parent / paths.TRACKING).read_text())
    whole = wandb_offline(runs, record["run_id"])
    assert whole["names"] == {"kw"} and whole["ids"] == {record["run_id"]}
    assert whole["groups"] == {"kw"} and whole["job_types"] == {"kfold"}
    assert whole["config"]["train.folds"] == 2 and whole["history"] == []
    pooled = json.loads((parent / paths.METRICS).read_text())
    assert whole["summary"]["final/f1_macro"] == pytest.approx(pooled["f1_macro"])
    assert [whole["summary"]["final/f1_macro_ci95_low"],
            whole["summary"]["final/f1_macro_ci95_high"]] == pytest.approx(
        pooled["f1_macro_ci95"])
    assert {paths.REPORT, paths.METRICS, paths.CONFUSION} <= whole["files"]
    for k in (1, 2):
        fold_dir = parent / f"fold-{k}"
        fold = wandb_offline(runs, json.loads((fold_dir / paths.TRACKING).read_text())["run_id"])
        assert fold["names"] == {f"fold-{k}"}
        assert fold["groups"] == {"kw"} and fold["job_types"] == {"fold"}
        assert [step for step, _ in fold["history"]] == [1]
        assert fold["summary"]["final/f1_macro"] == pytest.approx(
            json.loads((fold_dir / paths.METRICS).read_text())["f1_macro"])
    assert not (parent / "wandb").exists()  # every session beside the runs: RUNS/wandb/


def test_a_killed_run_resumed_continues_its_wandb_run_each_epoch_once(tmp_path, train_tiny,
                                                                      monkeypatch):
    """Killed after epoch 1's backup, before its tracker heard of it: the resumed session
    (offline W&B: a second session file of the same run id) logs epoch 1 then epoch 2."""
    from corolla.training import backup

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    runs = tmp_path / "runs"
    write_history = backup.write_history

    def dies_after_the_backup(rows, path):
        if len(rows) == 1:
            raise Stop
        write_history(rows, path)

    monkeypatch.setattr(backup, "write_history", dies_after_the_backup)
    train_tiny.fit(runs, "k", {"train.epochs": 2, "output.track": "wandb"})
    monkeypatch.setattr(backup, "write_history", write_history)
    record = json.loads((runs / "k" / paths.TRACKING).read_text())
    assert record["epochs_logged"] == 0

    assert main(["train", "--resume", str(runs / "k")]) == 0
    found = wandb_offline(runs)
    assert len(list((runs / "wandb").glob("offline-run-*"))) == 2  # a session each
    assert found["ids"] == {record["run_id"]} and found["names"] == {"k"}
    history = read_history(runs / "k" / paths.HISTORY)
    assert [step for step, _ in found["history"]] == [1, 2]
    for (step, logged), row in zip(found["history"], history):
        for key in EPOCH_KEYS:
            assert logged[key] == pytest.approx(row[key]), key
    assert found["summary"]["final/f1_macro"] == pytest.approx(
        json.loads((runs / "k" / paths.METRICS).read_text())["f1_macro"])


def test_a_stop_after_wandb_took_an_epoch_waits_until_tracking_json_counts_it(
        tmp_path, train_tiny, monkeypatch):
    """SIGTERM (`docker stop`) arriving after W&B took epoch 1's row, before tracking.json
    counted it: the stop waits until the count is written, so the resumed session does not
    send epoch 1 again (an offline session starts at step 0 and keeps any step it is given)."""
    from corolla.runs.tracking import wandb_tracker

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    runs = tmp_path / "runs"
    write_json = wandb_tracker.write_json

    def stopped_meanwhile(data, path):
        if data.get("epochs_logged") == 1:
            signal.raise_signal(signal.SIGTERM)  # to `corolla train`'s handler
        return write_json(data, path)

    monkeypatch.setattr(wandb_tracker, "write_json", stopped_meanwhile)
    run = train_tiny(runs, "--epochs", "2", "--track", "wandb", name="t", code=143)
    monkeypatch.setattr(wandb_tracker, "write_json", write_json)
    assert json.loads((run / paths.TRACKING).read_text())["epochs_logged"] == 1
    assert [r["epoch"] for r in read_history(run / paths.HISTORY)] == [1]

    assert main(["train", "--resume", str(run)]) == 0
    found = wandb_offline(runs)
    assert len(found["ids"]) == 1
    assert [step for step, _ in found["history"]] == [1, 2]


def _same(logged: list[tuple[int, float]], history: list[dict], key: str) -> None:
    """One value of `key` per epoch, at step = the epoch, as history.csv has it."""
    assert [step for step, _ in logged] == [row["epoch"] for row in history], key
    assert [value for _, value in logged] == pytest.approx([row[key] for row in history]), key
