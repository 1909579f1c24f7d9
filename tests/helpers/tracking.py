"""What the experiment trackers received, read back from their own stores: an `mlflow server`
started on 127.0.0.1 for a test, and the records of a W&B offline run."""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from helpers.processes import free_ports


@contextlib.contextmanager
def mlflow_server(folder: Path, timeout: float = 60):
    """`mlflow server` on a free port of 127.0.0.1 with a SQLite store and its artefacts in
    `folder`, until /health answers; yields (its URI, the process); always stopped after."""
    (port,) = free_ports(1)
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / "server.log", "w")
    server = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "mlflow"), "server", "--host",
         "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{folder / 'server.db'}",
         "--artifacts-destination", (folder / "artefacts").as_uri()],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        # Its job executor (GenAI jobs, huey workers) doubles the start: 13 s instead of 31 s
        # on 2 busy cores.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mlflow server did not start: "
                                       f"{(folder / 'server.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield uri, server
    finally:
        stop(server)
        log.close()


def stop(server: subprocess.Popen) -> None:
    """Ends the server and the workers it started (its own process group)."""
    if server.poll() is None:
        os.killpg(server.pid, 15)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait()


def mlflow_run(client, run_name: str):
    """The one MLflow run of that name in Corolla's experiment (failing on none or several)."""
    experiment = client.get_experiment_by_name("corolla")
    runs = client.search_runs([experiment.experiment_id],
                              filter_string=f"attributes.run_name = '{run_name}'")
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return runs[0]


def steps(client, run_id: str, key: str) -> list[tuple[int, float]]:
    """(step, value) of every value logged for `key`, in step order (repeats kept)."""
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


# W&B's offline run files: run-<id>.wandb is a LevelDB-style log of protobuf records (a 7-byte
# file header, then 32 KiB blocks of chunks with a 7-byte header: CRC, length, type). wandb
# 0.31 ships no Python reader of it (its own moved into the Go core), so this is one.
_BLOCK, _HEADER = 32768, 7
_FULL, _LAST = 1, 4


def wandb_records(path: Path):
    """The records of a .wandb file (wandb.proto.wandb_internal_pb2.Record), in order."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    ident, magic, _ = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1, (ident, magic)
    pos, pending = 7, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # a block's tail too small for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        pos += _HEADER
        if kind == 0 and length == 0:
            pos += (_BLOCK - pos % _BLOCK) % _BLOCK
            continue
        pending += data[pos:pos + length]
        pos += length
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def wandb_offline(folder: Path, run_id: str = "*") -> dict:
    """What the W&B offline runs under `folder`/wandb/ hold (`run_id`: that run's alone), all
    their sessions together: {"names": run names, "ids": run ids, "groups", "job_types",
    "history": [(step, {key: value})], "summary": {key: value}, "config": {key: value},
    "files": names under the sessions' files/}."""
    import json

    import wandb

    # run.finish() only asks W&B's service to close the run's stream: the file's last records
    # (the final epoch's history row, the exit) are written when it does, which a busy host
    # can delay past finish's return. teardown() waits for the service to end.
    wandb.teardown()
    found = {"names": set(), "ids": set(), "groups": set(), "job_types": set(), "history": [],
             "summary": {}, "config": {}, "files": set()}
    # (each session's folder is named after its start: sorted, the sessions in order)
    for path in sorted(Path(folder, "wandb").glob(f"offline-run-*/run-{run_id}.wandb")):
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                found["names"].add(record.run.display_name)
                found["ids"].add(record.run.run_id)
                found["groups"].add(record.run.run_group)
                found["job_types"].add(record.run.job_type)
                found["config"].update({i.key: json.loads(i.value_json)
                                        for i in record.run.config.update})
            elif kind == "history":
                row = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                       for i in record.history.item}
                found["history"].append((record.history.step.num,
                                         {k: v for k, v in row.items()
                                          if not k.startswith("_")}))
            elif kind == "summary":
                found["summary"].update({(i.key or "/".join(i.nested_key)):
                                         json.loads(i.value_json) for i in record.summary.update})
            elif kind == "config":
                found["config"].update({i.key: json.loads(i.value_json)
                                        for i in record.config.update})
        found["files"] |= {p.relative_to(path.parent / "files").as_posix()
                           for p in (path.parent / "files").rglob("*") if p.is_file()}
    return found
