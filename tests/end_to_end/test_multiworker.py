"""Two real processes on 127.0.0.1 run `corolla train` together: TensorFlow workers from
TF_CONFIG (MultiWorkerMirroredStrategy) and JAX processes from KERAS_DISTRIBUTION_*
(keras.distribution.initialize). Both must finish with identical weights, and only the chief
may write the run directory."""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from corolla.runs import paths, rundir
from helpers.processes import REPO, SCRIPTS, free_ports
from helpers.runs import assert_same_stored_weights, epochs, history

pytestmark = pytest.mark.slow
TIMEOUT = 300


def _cluster_env(backend: str, index: int, ports: list[int]) -> dict:
    addresses = [f"127.0.0.1:{p}" for p in ports]
    if backend == "tensorflow":
        return {"TF_CONFIG": json.dumps({"cluster": {"worker": addresses},
                                         "task": {"type": "worker", "index": index}})}
    return {"KERAS_DISTRIBUTION_JOB_ADDRESSES": ",".join(addresses),
            "KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": str(index)}


def _run_workers(backend, tmp_path, args, expect=0, cluster_env=_cluster_env):
    """Runs `python ARGS` as the 2 workers of a loopback cluster; returns their outputs.
    `cluster_env(backend, index, ports)`: the environment that makes them one cluster."""
    ports = free_ports(2)
    procs = []
    for index in range(2):
        scratch = tmp_path / f"tmp{index}"  # each worker's private scratch (its own TMPDIR)
        scratch.mkdir(exist_ok=True)
        env = {**os.environ, **cluster_env(backend, index, ports), "TMPDIR": str(scratch),
               "TF_CPP_MIN_LOG_LEVEL": "3"}
        env.pop("KERAS_BACKEND", None)  # the cluster variables alone choose the backend
        procs.append(subprocess.Popen([sys.executable, *map(str, args)], env=env, cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    try:
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, out in zip(procs, outputs):
        assert p.returncode == expect, out[-3000:]
    return outputs


CRASH = SCRIPTS / "crash_train.py"


# About a minute for TensorFlow's pair, 100 s for JAX's: CI's large step runs both. Two real
# workers fitting in step under MultiWorkerMirroredStrategy (with Corolla's fix) stay in the
# README's suite: tests/runtime/test_multiworker_keras.py, half a minute.
@pytest.mark.large
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_two_workers_train_in_step_and_resume_an_unnamed_run(backend, tiny_petals, tmp_path):
    """Two workers train together and only the chief writes the run; both die after epoch 0
    (as under SIGKILL); `--resume` without --name (the same command on both) continues every
    worker from epoch 1, from its own backup, found through the run's id; they end with
    identical weights and history.csv has each epoch once."""
    runs = tmp_path / "runs"
    crashed = _run_workers(backend, tmp_path, [CRASH, "epoch_end:0", "train", "--data",
                                               tiny_petals, "--epochs", 2,
                                               "--global-batch-size", 16, "--runs-dir", runs],
                           expect=3)
    assert all("CRASH after epoch 0" in out for out in crashed)
    strategy = "MultiWorkerMirroredStrategy" if backend == "tensorflow" else "DataParallel"
    assert f"on {strategy} (2 replica(s), global batch 16)" in crashed[0]
    [run] = list(runs.iterdir())  # only the chief made a run, named <model>-<timestamp>
    run_id = tomllib.loads((run / paths.CONFIG).read_text())["output"]["run_id"]
    scratch = tmp_path / "tmp1" / f"corolla-{run_id}" / "worker-1"
    assert (scratch / paths.BACKUP / paths.STATE).is_file()
    assert oct(scratch.stat().st_mode & 0o777) == "0o700"
    assert not list((tmp_path / "tmp0").glob("corolla-*"))  # the chief's backup is the run's

    resumed = _run_workers(backend, tmp_path, [CRASH, "none", "train", "--resume", run])
    assert all("FIRST_EPOCH 1" in out for out in resumed), resumed
    assert "after epoch 1 of 2" in resumed[0]
    assert "done:" in resumed[0] and "done:" not in resumed[1]
    assert [p.name for p in runs.iterdir()] == [run.name]
    assert {paths.CONFIG, paths.MODEL, paths.HISTORY, paths.METRICS, paths.SUBMISSION,
            paths.FINISHED} <= {p.name for p in run.iterdir()}
    assert epochs(run) == ["1", "2"]
    assert_same_stored_weights(run / paths.MODEL, scratch / paths.MODEL)


@pytest.mark.large  # about a minute each: CI runs them after the README's suite
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_worker_that_lost_its_scratch_folder_continues_from_the_chiefs_backup(
        backend, tiny_petals, tmp_path):
    """Both die after epoch 0; worker 1's private scratch folder is gone (a preempted VM
    recreated) when the same command resumes. It continues from the chief's epoch with the
    chief's weights and optimizer, where it used to refuse; on TensorFlow, had it started afresh
    (its own initial weights, a new optimizer), the two would not end with the same weights. On
    JAX, where Keras loads a file into the processes' shared arrays collectively, the chief reads
    its backup alone and sends it."""
    runs = tmp_path / "runs"
    _run_workers(backend, tmp_path, [CRASH, "epoch_end:0", "train", "--data", tiny_petals,
                                     "--epochs", 2, "--global-batch-size", 16, "--runs-dir",
                                     runs], expect=3)
    [run] = list(runs.iterdir())
    run_id = tomllib.loads((run / paths.CONFIG).read_text())["output"]["run_id"]
    shutil.rmtree(tmp_path / "tmp1" / f"corolla-{run_id}")

    resumed = _run_workers(backend, tmp_path, [CRASH, "none", "train", "--resume", run])
    assert all("FIRST_EPOCH 1" in out for out in resumed), resumed
    assert ("every process continues from the chief's backup, after epoch 1: epochs in the "
            "workers' own backups: process 1 (0)") in resumed[0]
    assert epochs(run) == ["1", "2"]
    scratch = tmp_path / "tmp1" / f"corolla-{run_id}" / "worker-1"
    assert_same_stored_weights(run / paths.LAST, scratch / paths.LAST)


@pytest.mark.large  # about a minute each: CI runs them after the README's suite
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_two_workers_validate_every_image_of_val_once(backend, tiny_petals, tmp_path):
    """The per-epoch validation of a two-process job scores every val image once, in the right
    order: the last epoch's val figures in history.csv equal a single-process `corolla
    evaluate` of that epoch's model (last.keras), and the chief's final metrics.json equals one
    of model.keras."""
    runs = tmp_path / "runs"
    _run_workers(backend, tmp_path, ["-m", "corolla.cli", "train", "--data", tiny_petals,
                                     "--epochs", 4, "--global-batch-size", 16,
                                     "--runs-dir", runs, "--name", "mw"])
    run = runs / "mw"
    last = history(run)[-1]
    last_run = tmp_path / "last"  # the run as it was after its last epoch
    shutil.copytree(run, last_run)
    shutil.copy(run / paths.LAST, last_run / paths.MODEL)

    def alone(folder):
        out = tmp_path / f"eval-{folder.name}"
        subprocess.run([sys.executable, "-m", "corolla.cli", "evaluate", str(folder), "--out",
                        str(out), "--backend", backend], check=True, capture_output=True,
                       timeout=TIMEOUT, cwd=REPO,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        return json.loads((out / paths.METRICS).read_text())

    of_last, of_best = alone(last_run), alone(run)
    assert of_last["num_examples"] == 32
    assert float(last["val_accuracy"]) == pytest.approx(of_last["accuracy"], abs=1e-6)
    assert float(last["val_f1_macro"]) == pytest.approx(of_last["f1_macro"], abs=1e-6)
    in_cluster = json.loads((run / paths.METRICS).read_text())
    assert in_cluster["f1_macro"] == pytest.approx(of_best["f1_macro"], abs=1e-6)


JOIN_THEN_TRAIN = """
import os, sys, jax
address, index = os.environ["TEST_JAX_JOIN"].split()
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(address, num_processes=2, process_id=int(index))
from corolla.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.large  # about a minute each: CI runs them after the README's suite
def test_jax_processes_joined_without_keras_distribution_have_one_chief(tiny_petals, tmp_path):
    """Processes that joined JAX themselves (as on a TPU pod slice, or a notebook that called
    jax.distributed.initialize), with no KERAS_DISTRIBUTION_* set: Corolla counts them from JAX,
    trains them as one job and lets only process 0 write the run."""
    def join_env(backend, index, ports):
        return {"TEST_JAX_JOIN": f"127.0.0.1:{ports[0]} {index}"}  # and no KERAS_BACKEND

    runs = tmp_path / "runs"
    args = ["-c", JOIN_THEN_TRAIN, "train", "--data", tiny_petals,
            "--epochs", 1, "--global-batch-size", 16, "--runs-dir", runs, "--name", "pod"]
    outputs = _run_workers("jax", tmp_path, args, cluster_env=join_env)
    assert "on DataParallel (2 replica(s), global batch 16)" in outputs[0], outputs[0][-2000:]
    assert "done:" in outputs[0] and "done:" not in outputs[1]
    assert [p.name for p in runs.iterdir()] == ["pod"]


COUNT = SCRIPTS / "count_decodes.py"


@pytest.mark.large  # about a minute each: CI runs them after the README's suite
def test_each_jax_process_decodes_only_its_share_of_the_global_batch(tiny_petals, tmp_path):
    """Two JAX processes, global batch 16: each decodes batches of 8, its half of every global
    batch (Keras' own sharding of a global stream had each decode all 16 and keep 8), and at
    least the 2 epochs x 4 steps x 8 images it trains on."""
    outputs = _run_workers("jax", tmp_path, [COUNT, "train", "--data", tiny_petals,
                                             "--epochs", 2, "--global-batch-size", 16,
                                             "--steps-per-epoch", 4, "--start-size", 0,
                                             "--no-cache",  # counted as each epoch decodes
                                             "--runs-dir", tmp_path / "runs"])
    for out in outputs:
        total, largest = map(int, out.split("DECODED ")[1].split()[:2])
        assert largest == 8, out[-1500:]
        assert total >= 2 * 4 * 8, out[-1500:]


SLOW_CHIEF = SCRIPTS / "slow_chief.py"


@pytest.mark.large  # about a minute each: CI runs them after the README's suite
def test_the_other_jax_processes_wait_for_the_chief_to_evaluate(tiny_petals, tmp_path):
    """After training, the chief alone evaluates and predicts. The other process waits for it
    instead of leaving the job: leaving, it would wait in JAX's shutdown barrier, which gives up
    (after 300 s; 5 s here, with the chief 15 s late) and fails both processes."""
    outputs = _run_workers("jax", tmp_path, [SLOW_CHIEF, "train", "--data", tiny_petals,
                                             "--epochs", 1, "--global-batch-size", 16,
                                             "--runs-dir", tmp_path / "runs"])
    assert "done:" in outputs[0]


BUSY_CHIEF = SCRIPTS / "busy_chief.py"


@pytest.mark.large  # about a minute: CI runs it after the README's suite
def test_two_workers_train_the_chiefs_time_plan_and_stop_short_of_it_in_step(tiny_petals,
                                                                             tmp_path):
    """`--time` in a two-worker job: both probe (the probe's steps are collective) and both
    train the chief's plan, its epochs and steps per epoch, and the chief's plan made again
    after the first epoch; a worker on its own numbers would fail or hang in a collective. The
    chief's epochs then take a second longer than planned: both stop where the chief's clock
    says the next epoch would end past the budget (a worker going on alone would hang in the
    next epoch's collectives), within the budget, with identical weights, and only the chief
    says the plan and the stop."""
    runs = tmp_path / "runs"
    outs = _run_workers("tensorflow", tmp_path, [BUSY_CHIEF, "1", "train", "--data",
                                                 tiny_petals, "--global-batch-size", 16,
                                                 "--time", "60s", "--runs-dir", runs,
                                                 "--name", "t"])
    run = runs / "t"
    saved = rundir.config_of(run).to_dict()  # config.toml with its time_plan.json
    train = saved["train"]
    [line] = [s for s in outs[0].splitlines() if s.startswith("time 60s: ") and "planned" in s]
    # Epochs of 3 executions or more are timed step by step: the plan is made again after the
    # first; fewer (a busy host's plan), after the second, which traces nothing.
    steps = int(re.search(r"^training .* epochs? x (\d+) steps?$", outs[0], re.M).group(1))
    after = 1 if steps >= 3 else 2
    replans = [s for s in outs[0].splitlines() if s.startswith("time 60s: ") and
               (f"plan made again after epoch {after}," in s or
                s.startswith(f"time 60s: epoch {after} took"))]
    assert len(replans) == 1, outs[0]  # (the chief's output: what it planned and did)
    assert train["time_plan"].startswith(line.partition(": ")[2])
    rows = history(run)
    [stop] = [s for s in outs[0].splitlines() if s.startswith("time 60s: stopping after")]
    assert stop.startswith(f"time 60s: stopping after epoch {len(rows)} of {train['epochs']}:")
    assert not any(s.startswith("time 60s") for s in outs[1].splitlines())
    assert 2 <= len(rows) < train["epochs"] and float(rows[-1]["seconds"]) <= 60
    # The stop is agreed on after every epoch: TensorFlow's eager all-gather would trace anew
    # each time, and say so.
    assert not any("retracing" in out for out in outs)
    scratch = tmp_path / "tmp1" / f"corolla-{saved['output']['run_id']}" / "worker-1"
    for name in (paths.MODEL, paths.LAST):
        assert_same_stored_weights(run / name, scratch / name)


@pytest.mark.large  # about a minute each: CI runs them after the README's suite
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_only_the_chief_tracks_a_two_worker_run_in_one_mlflow_run(backend, tiny_petals,
                                                                   tmp_path, monkeypatch):
    """`--track mlflow` in a two-process job, the store beside the runs (RUNS/mlflow.db, which
    both processes' --runs-dir name): one MLflow run, named after the run, each epoch once at
    its step, the final scores; the worker opens no run of its own (it would be a second one
    in that store, or a store elsewhere) and writes no tracking.json."""
    import mlflow

    from corolla.files import read_history
    from helpers.tracking import steps

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # (the workers get os.environ)
    runs = tmp_path / "runs"
    outputs = _run_workers(backend, tmp_path, ["-m", "corolla.cli", "train", "--data",
                                               tiny_petals, "--epochs", 2,
                                               "--global-batch-size", 16, "--runs-dir", runs,
                                               "--name", "mw", "--track", "mlflow"])
    assert "tracking with MLflow" in outputs[0] and "tracking with MLflow" not in outputs[1]
    client = mlflow.MlflowClient(f"sqlite:///{runs / paths.MLFLOW_DB}")
    [tracked] = client.search_runs([client.get_experiment_by_name("corolla").experiment_id])
    assert tracked.info.run_name == "mw" and tracked.info.status == "FINISHED"
    run = runs / "mw"
    assert json.loads((run / paths.TRACKING).read_text())["run_id"] == tracked.info.run_id
    history = read_history(run / paths.HISTORY)
    for key in ("loss", "val_f1_macro"):
        logged = steps(client, tracked.info.run_id, key)
        assert [step for step, _ in logged] == [row["epoch"] for row in history] == [1, 2]
        assert [v for _, v in logged] == pytest.approx([row[key] for row in history])
    assert tracked.data.metrics["final/f1_macro"] == pytest.approx(
        json.loads((run / paths.METRICS).read_text())["f1_macro"])
    assert sorted(tmp_path.rglob(paths.TRACKING)) == [run / paths.TRACKING]
    assert sorted(tmp_path.rglob(paths.MLFLOW_DB)) == [runs / paths.MLFLOW_DB]
