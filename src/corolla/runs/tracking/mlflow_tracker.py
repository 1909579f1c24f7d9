"""MLflow through `MlflowClient` (explicit run ids, no process-wide active run): its store is
MLFLOW_TRACKING_URI's, else a SQLite file beside the runs. mlflow is imported only when a run is
tracked with it."""

from __future__ import annotations

import contextlib
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from corolla.errors import UserError
from corolla.files import hold_lock
from corolla.runs import paths
from corolla.runs.tracking.base import MLFLOW, PROJECT, Tracker, said, scores

PROBE_SECONDS = 5  # how long an MLflow server has to answer /health before training


class MLflowTracker(Tracker):
    """MLflow through `MlflowClient` (explicit run ids, no process-wide active run)."""

    kind = MLFLOW
    install = 'pip install "corolla[mlflow]"'

    def __init__(self, client, run_id: str, record: dict, log=print):
        super().__init__(log)
        self.client, self.run_id, self.record = client, run_id, record
        self.logged = self._safely("reading its epochs", self._logged_epochs) or set()

    def _logged_epochs(self) -> set[int]:
        # The server's record, not ours: an epoch logged just before a kill is not logged again.
        return {m.step for m in self.client.get_metric_history(self.run_id, "loss")}

    def log_epochs(self, rows: list[dict]) -> None:
        self._safely("logging an epoch", self._log_epochs, rows)

    def _log_epochs(self, rows):
        from mlflow.entities import Metric

        for row in rows:
            epoch = int(row["epoch"])
            if epoch in self.logged:
                continue
            now = int(time.time() * 1000)
            self.client.log_batch(self.run_id, metrics=[
                Metric(k, float(v), now, epoch) for k, v in row.items()
                if k != "epoch" and isinstance(v, (int, float))])
            self.logged.add(epoch)

    def log_scores(self, metrics: dict, prefix: str) -> None:
        def log():
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            self.client.log_batch(self.run_id, metrics=[
                Metric(f"{prefix}/{k}", v, now, 0) for k, v in scores(metrics).items()])
        self._safely("logging scores", log)

    def log_files(self, files, base: Path) -> None:
        def log():
            for f in files:
                folder = Path(f).resolve().parent.relative_to(Path(base).resolve()).as_posix()
                self.client.log_artifact(self.run_id, str(f),
                                         None if folder == "." else folder)
        self._safely("sending files", log)

    def close(self, status: str = "FINISHED") -> None:
        self._safely("ending the run", self.client.set_terminated, self.run_id, status)

    @staticmethod
    def _import():
        import mlflow

        _quiet_mlflow_logs()
        return mlflow

    @classmethod
    def check(cls, runs_dir) -> None:
        _bound_mlflow_http()
        _probe(_mlflow_uri(runs_dir)[0])

    @classmethod
    def new(cls, config, run_dir: Path, params: dict, tags: dict, parent, log) -> Tracker:
        from mlflow.entities import Param

        if parent is None:
            uri, local = _mlflow_uri(config.output.runs_dir)
            with _store_made_once(uri):
                client = _mlflow_client(uri)
                experiment = _mlflow_experiment(client, config.output.runs_dir, local)
        else:  # the parent's store and experiment (a fold's runs_dir is the parent folder)
            client, uri = parent.client, parent.record["tracking_uri"]
            experiment = parent.record["experiment_id"]
            tags["mlflow.parentRunId"] = parent.run_id
        run = client.create_run(experiment, run_name=run_dir.name, tags=tags)
        run_id = run.info.run_id
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow takes 100 parameters a request
            client.log_batch(run_id, params=items[i:i + 100])
        record = {"tracker": MLFLOW, "run_id": run_id, "tracking_uri": _no_password(uri),
                  "experiment_id": experiment}
        log(f"tracking with MLflow: run {run_id} in {_no_password(uri)}")
        return cls(client, run_id, record, log)

    @classmethod
    def resume(cls, record: dict, run_dir: Path, log) -> Tracker:
        import mlflow

        run_id = record["run_id"]
        _bound_mlflow_http()
        uri = os.environ.get("MLFLOW_TRACKING_URI") or record.get("tracking_uri")
        _probe(uri)
        with _store_made_once(uri):
            client = _mlflow_client(uri)
        try:
            client.update_run(run_id, status="RUNNING")
        except mlflow.exceptions.MlflowException as e:
            raise UserError(f"{run_dir / paths.TRACKING} names MLflow run {run_id}, which "
                            f"{_no_password(uri)} does not have ({said(e)}); set "
                            f"MLFLOW_TRACKING_URI to the store it was tracked in") from None
        return cls(client, run_id, dict(record), log)


def _mlflow_uri(runs_dir) -> tuple[str, bool]:
    """(the tracking URI, whether it is Corolla's local default): MLFLOW_TRACKING_URI when set,
    else a SQLite file beside the runs. Not MLflow's own default (./mlflow.db in the working
    folder) and not the ./mlruns file store, which MLflow 3 has put in maintenance mode: it
    refuses it unless MLFLOW_ALLOW_FILE_STORE=true and points to SQLite instead."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri, False
    return f"sqlite:///{(Path(runs_dir) / paths.MLFLOW_DB).resolve()}", True


def _mlflow_client(uri: str):
    import mlflow

    _bound_mlflow_http()
    _quiet_mlflow_logs()
    return mlflow.MlflowClient(tracking_uri=uri)


def _sqlite_file(uri: str) -> Path | None:
    """The database file of a SQLite store (sqlite:///relative or sqlite:////absolute)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?")[0]
    return Path(path) if path and path != ":memory:" else None


@contextlib.contextmanager
def _store_made_once(uri: str):
    """For a SQLite store, the block (opening the store, making the experiment) run by one
    process at a time: MLflow creates a new store's tables on first use, and two runs starting
    together into a fresh store otherwise fail ("table experiments already exists")."""
    db = _sqlite_file(uri)
    if db is None:
        yield
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    lock = hold_lock(db.parent / f".{db.name}.lock", wait=True)
    try:
        yield
    finally:
        os.close(lock)  # releases it


def _check_sqlite(uri: str) -> None:
    """A SQLite store's file can be written, or made where its folder can be: checked before
    training, as MLflow would fail only once the run is made."""
    db = _sqlite_file(uri)
    if db is None:
        return
    problem = None
    if db.exists():
        if not db.is_file():
            problem = "is not a file"
        elif not os.access(db, os.R_OK | os.W_OK):
            problem = "cannot be read and written"
    else:
        there = db.parent
        while not there.exists() and there != there.parent:
            there = there.parent
        if not there.is_dir():
            problem = f"cannot be made: {there} is a file, not a folder"
        elif not os.access(there, os.W_OK | os.X_OK):
            problem = f"cannot be made: {there} cannot be written"
    if problem:
        raise UserError(f"the MLflow store {db} {problem}; set MLFLOW_TRACKING_URI to a store "
                        f"that can be written (unset: RUNS_DIR/{paths.MLFLOW_DB}), or leave out "
                        f"--track")


def _mlflow_experiment(client, runs_dir, local: bool) -> str:
    """The experiment id: MLFLOW_EXPERIMENT_ID, or the experiment MLFLOW_EXPERIMENT_NAME (or
    "corolla") names, made if missing. In the local store its files go to
    <runs_dir>/mlartifacts, not to ./mlruns in the working folder (MLflow's default for a
    SQLite store without a server)."""
    from mlflow.exceptions import MlflowException

    if os.environ.get("MLFLOW_EXPERIMENT_ID"):
        return os.environ["MLFLOW_EXPERIMENT_ID"]
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or PROJECT
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    where = (Path(runs_dir) / paths.MLFLOW_ARTIFACTS).resolve().as_uri() if local else None
    try:
        return client.create_experiment(name, artifact_location=where)
    except MlflowException:  # made meanwhile by another run
        return client.get_experiment_by_name(name).experiment_id


# MLflow's INFO lines about its store ("Creating initial MLflow database tables...", alembic's
# migrations): MLflow's own stderr handler would print them among Corolla's lines.
_MLFLOW_CHATTER = ("mlflow.store.db.utils", "alembic")


def _quiet_mlflow_logs() -> None:
    """Keeps MLflow's store set-up (INFO) off the terminal; its warnings still show. Left alone
    when the user asked for MLflow's logs (MLFLOW_LOGGING_LEVEL) or set those loggers' level."""
    if os.environ.get("MLFLOW_LOGGING_LEVEL"):
        return
    for name in _MLFLOW_CHATTER:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


def _bound_mlflow_http() -> None:
    """MLflow's HTTP client retries a failed request 7 times with a doubling backoff (about 4
    minutes) and waits 120 s for an answer (MLFLOW_HTTP_REQUEST_MAX_RETRIES, _BACKOFF_FACTOR,
    _TIMEOUT): a server gone mid-run would stall each epoch's end for minutes before the run
    could go on without it. Bounded to 2 retries, 1 s backoff and 10 s an answer (at most
    about 35 s once, after which the tracker stops), unless the user set them."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")


def _probe(uri: str) -> None:
    """An MLflow server (http, https) must answer its /health within PROBE_SECONDS: one direct
    request, no retries (a dead server fails in milliseconds, a silent one in PROBE_SECONDS).
    Any HTTP answer counts (one needing a login is there). A SQLite store must be writable
    (`_check_sqlite`); other stores are opened as used."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        _check_sqlite(uri)
        return
    url = urllib.parse.urlunsplit((parts.scheme, parts.hostname + (
        f":{parts.port}" if parts.port else ""), parts.path.rstrip("/") + "/health", "", ""))
    try:
        urllib.request.urlopen(url, timeout=PROBE_SECONDS).close()
    except urllib.error.HTTPError:
        pass
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise UserError(f"the MLflow server at {_no_password(uri)} does not answer ({reason}); "
                        f"start it, set MLFLOW_TRACKING_URI to one that runs (unset: "
                        f"RUNS_DIR/{paths.MLFLOW_DB}), or leave out --track") from None


def _no_password(uri: str) -> str:
    """The URI without user and password, as written into the run and the log."""
    parts = urllib.parse.urlsplit(uri)
    if not parts.password and not parts.username:
        return uri
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
