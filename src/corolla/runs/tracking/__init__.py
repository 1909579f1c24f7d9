"""Experiment tracking (`--track mlflow|wandb`, output.track): a run also sent to MLflow or to
Weights & Biases: its resolved config as parameters, every epoch's row of history.csv as it is
committed, the final scores (macro F1 with its interval) and report.html, history.csv and the
confusion matrix as files. The tracked run is named after the run folder; its id is kept in
RUN/tracking.json, so a resumed run continues the same tracked run and `corolla evaluate` and
`corolla ensemble` join it.

Each library's client, not its Keras integration: `mlflow.keras.autolog` (documented up to
Keras 3.13) and W&B's `WandbMetricsLogger` log at Keras' epoch end, before Corolla's checkpoint
commits the epoch, so an epoch trained again after a kill would be logged twice (MLflow keeps
every value), and they know neither the epoch's learning rate as history.csv has it nor the
run's later evaluations. Here an epoch is logged once its backup is written
(`training.callbacks.TrackEpochs`), at step = its number, and a resumed run first logs the
committed epochs its tracked run lacks.

A k-fold run (`--folds K`) is tracked as a whole: its parent folder is a tracked run of its
own (the config, then the pooled out-of-fold scores as final/NAME and the parent's report) and
each fold's run is its child, in the parent's store: in MLflow nested under it (the tag
mlflow.parentRunId, by which MLflow's UI nests runs), in W&B in its group (the parent folder's
name; job_type "kfold" for the parent's run, "fold" for the folds', W&B's way of grouping
cross-validation).

Only the chief tracks. A tracker that fails mid-run (its server gone) says so once and stops;
the run goes on. A missing package or an unreachable server is one line before training
(`check`). mlflow and wandb are imported only where a tracker is used: with `none` (the
default) neither is ever imported.
"""

from __future__ import annotations

import contextlib
import logging
import netrc
import os
import shutil
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from corolla.errors import UserError, first_line
from corolla.files import hold_lock, read_json, write_json
from corolla.runs import paths
from corolla.runs.kfold import is_parent

NONE, MLFLOW, WANDB = "none", "mlflow", "wandb"
PROJECT = "corolla"  # MLflow's experiment, W&B's project, unless their environment names one
PROBE_SECONDS = 5  # how long an MLflow server has to answer /health before training
FINAL = "final"  # the prefix of the run's own val scores (final/f1_macro); eval-<data>/ others

_INSTALL = {MLFLOW: 'pip install "corolla[mlflow]"', WANDB: 'pip install "corolla[wandb]"'}
_open: dict[Path, "Tracker"] = {}  # the tracked runs open in this process, by run folder


def _said(e: BaseException) -> str:  # a tracker library's error: its type says most
    return first_line(e, 300, typed=True)


def check(kind: str, runs_dir: str | Path) -> None:
    """Before training (on the chief): the tracker's package importable and, for an MLflow
    server, the server answering, or one line saying what to do, within seconds."""
    if kind == NONE:
        return
    _import(kind)
    if kind == MLFLOW:
        _bound_mlflow_http()
        _probe(_mlflow_uri(runs_dir)[0])
    else:
        _wandb_logged_in()


def start(config, run_dir: Path, resume: bool, log=print) -> Tracker:
    """The tracker of a run about to train (or of a k-fold parent about to train its folds): a
    new tracked run, named after the run folder, with the config as parameters; or, for a
    continued run, the one RUN/tracking.json names. A fold of a k-fold run whose parent is
    tracked in this process is its child; once the parent's tracking has stopped, its folds
    are not tracked either, and a fold's run that cannot start stops it (one line: the k-fold
    run goes on)."""
    kind = config.output.track
    if kind == NONE:
        return Tracker()
    record = _read(run_dir) if resume else None
    parent = _open.get(run_dir.parent.resolve()) if config.data.fold else None
    if parent is not None and parent.kind == kind:
        tracker = parent._safely("starting a fold's run", _open_run, kind, config, run_dir,
                                 record, parent, log) or Tracker()
    else:
        tracker = _open_run(kind, config, run_dir, record, None, log)
    _open[run_dir.resolve()] = tracker
    return tracker


def _open_run(kind: str, config, run_dir: Path, record: dict | None, parent, log) -> Tracker:
    if record is not None:
        return _resume(record, run_dir, log)
    tracker = _new(kind, config, run_dir, parent, log)
    write_json(tracker.record, run_dir / paths.TRACKING)
    return tracker


def for_run(run_dir: str | Path, log=print) -> Tracker:
    """The tracked run of a run folder, open in this process or joined again from its
    tracking.json (where `corolla evaluate` and `ensemble` log); a no-op tracker for a run that
    is not tracked. A tracker that cannot be joined says so and is a no-op: the command goes
    on."""
    run_dir = Path(run_dir)
    if run_dir.resolve() in _open:
        return _open[run_dir.resolve()]
    record = _read(run_dir)
    if record is None:
        return Tracker()
    try:
        tracker = _resume(record, run_dir, log)
    except Exception as e:  # a UserError too: scores are written whether or not they are sent
        log(f"not sent to {record.get('tracker')}: {_said(e)}")
        return Tracker()
    _open[run_dir.resolve()] = tracker
    return tracker


def finish(run_dir: str | Path | None, log=print, files=(), status: str = "FINISHED") -> None:
    """Ends this process's session of the run's tracked run (if one is open), `files` sent
    first. `status`: FINISHED, FAILED or KILLED."""
    if run_dir is None:
        return
    tracker = _open.pop(Path(run_dir).resolve(), None)
    if tracker is not None:
        tracker.log_files([f for f in files if Path(f).is_file()], Path(run_dir))
        tracker.close(status)


def send_scored(run_dir: str | Path, folder: str | Path, metrics: dict, log=print) -> None:
    """A scored folder's metrics and files into the run's tracked run, if it has one: the run's
    own (as final/NAME, with history.csv) or an eval-<data>/ or ensemble folder's (as
    <folder>/NAME, its files under <folder>/)."""
    tracker = for_run(run_dir, log)
    if tracker.kind == NONE:
        return
    folder = Path(folder)
    own = folder.resolve() == Path(run_dir).resolve()
    tracker.log_scores(metrics, FINAL if own else folder.name)
    files = [folder / name for name in (paths.METRICS, paths.CONFUSION, paths.CURVES,
                                        paths.REPORT)]
    files += [folder / paths.HISTORY] if own else []
    tracker.log_files([f for f in files if f.is_file()], folder if own else folder.parent)


def scores(metrics: dict) -> dict[str, float]:
    """The figures of a metrics.json worth a chart: its numbers, and macro F1's interval as
    f1_macro_ci95_low / _high."""
    out = {k: float(v) for k, v in metrics.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    interval = metrics.get("f1_macro_ci95")
    if interval:
        out["f1_macro_ci95_low"], out["f1_macro_ci95_high"] = map(float, interval)
    return out


class Tracker:
    """A tracked run. This base tracks nothing (`--track none`); each method of a real one runs
    through `_safely`: the first failure is one line in the log and the end of tracking."""

    kind = NONE
    record: dict = {}

    def __init__(self, log=print):
        self.log, self.broken = log, False

    def log_epochs(self, rows: list[dict]) -> None:
        """Committed epochs (history.csv's rows); those already logged are skipped."""

    def log_scores(self, metrics: dict, prefix: str) -> None:
        """A scored folder's metrics (metrics.json) as prefix/NAME."""

    def log_files(self, files, base: Path) -> None:
        """Files, under their path relative to `base`."""

    def close(self, status: str = "FINISHED") -> None:
        pass

    def _safely(self, what: str, fn, *args):
        if self.broken:
            return None
        try:
            return fn(*args)
        except Exception as e:  # the run matters more than its copy in a tracker
            self.broken = True
            self.log(f"{self.kind} tracking stopped ({what}: {_said(e)}); the run goes on "
                     f"without it")
            return None


class _MLflow(Tracker):
    """MLflow through `MlflowClient` (explicit run ids, no process-wide active run)."""

    kind = MLFLOW

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


class _Wandb(Tracker):
    """Weights & Biases through its `Run` object (`run.log(..., step=epoch)`, its summary for
    the scores, `run.save` for files). W&B keeps no record an offline session could ask, so
    the epochs logged are counted in tracking.json.

    That count follows each `run.log`, so an epoch a kill came between them is sent again by
    the resumed session. Online W&B drops it (a resumed run continues after the server's last
    step, and a step below it is dropped with a warning); offline, each session is a file of
    its own that starts at step 0 (wandb.init's `resumed` is False) and keeps every step it is
    given, so the epoch would be in two sessions' files, both uploaded into the one run by
    `wandb sync`. Hence a stop (Ctrl-C, SIGTERM, SIGHUP) is held until both are done; only a
    SIGKILL between them still sends an epoch twice (`_uninterrupted`)."""

    kind = WANDB

    def __init__(self, run, record: dict, run_dir: Path, log=print):
        super().__init__(log)
        self.run, self.record, self.run_dir = run, record, run_dir
        self.logged = int(record.get("epochs_logged", 0))

    def log_epochs(self, rows: list[dict]) -> None:
        self._safely("logging an epoch", self._log_epochs, rows)

    def _log_epochs(self, rows):
        for row in rows:
            epoch = int(row["epoch"])
            if epoch <= self.logged:
                continue
            with _uninterrupted():
                self.run.log({k: v for k, v in row.items() if k != "epoch"}, step=epoch)
                self.logged = epoch
                self.record["epochs_logged"] = epoch
                write_json(self.record, self.run_dir / paths.TRACKING)

    def log_scores(self, metrics: dict, prefix: str) -> None:
        self._safely("logging scores", self.run.summary.update,
                     {f"{prefix}/{k}": v for k, v in scores(metrics).items()})

    def log_files(self, files, base: Path) -> None:
        # Copied into the run's files/ first: W&B would link to the originals (and warn on
        # stderr for each call), which a later evaluation rewrites.
        def log():
            for f in files:
                copy = Path(self.run.dir) / Path(f).resolve().relative_to(Path(base).resolve())
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, copy)
                self.run.save(str(copy), base_path=self.run.dir, policy="now")
        self._safely("sending files", log)

    def close(self, status: str = "FINISHED") -> None:
        self._safely("ending the run", self.run.finish, 0 if status == "FINISHED" else 1)


@contextlib.contextmanager
def _uninterrupted():
    """A stop asked for by Ctrl-C, SIGTERM or SIGHUP (a KeyboardInterrupt wherever the main
    thread is) held until the block is done, then delivered to the handler that was there.
    Signals are handled in the main thread only: elsewhere nothing is held (nor can SIGKILL
    be)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held, previous = [], {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) not in (None, signal.SIG_IGN):
            previous[signum] = signal.signal(signum, lambda got, frame: held.append(got))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            signal.raise_signal(held[0])


def _new(kind: str, config, run_dir: Path, parent: Tracker | None, log) -> Tracker:
    """A new tracked run; `parent`: the k-fold parent's (open) tracker of a fold's run."""
    from corolla.config import flatten

    params = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else v
              for k, v in flatten(config.to_dict()).items()}
    tags = {"corolla.run_dir": str(run_dir.resolve())}
    if config.output.run_id:  # (a k-fold parent has none: its folds do)
        tags["corolla.run_id"] = config.output.run_id
    if kind == MLFLOW:
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
        return _MLflow(client, run_id, record, log)
    if parent is not None:  # the parent's folder, project and group
        folder, project = parent.record.get("dir"), parent.record.get("project")
        group, job_type = parent.record.get("group"), "fold"
    else:
        folder, project = _wandb_dir(config.output.runs_dir), None
        group, job_type = (run_dir.name, "kfold") if is_parent(config) else (None, None)
    run = _wandb_run(config.output.run_id or None, run_dir, params, tags, folder, project,
                     group, job_type)
    record = {"tracker": WANDB, "run_id": run.id, "project": run.project, "dir": folder,
              "epochs_logged": 0}
    if group:  # a resumed session joins it again
        record.update(group=group, job_type=job_type)
    log(f"tracking with W&B: run {run.id} in project {run.project}")
    return _Wandb(run, record, run_dir, log)


def _resume(record: dict, run_dir: Path, log) -> Tracker:
    kind, run_id = record.get("tracker"), record.get("run_id")
    if kind not in (MLFLOW, WANDB) or not run_id:
        raise UserError(f"{run_dir / paths.TRACKING} names no tracked run; move it away to "
                        f"track the run anew")
    _import(kind)
    if kind == MLFLOW:
        _bound_mlflow_http()
        uri = os.environ.get("MLFLOW_TRACKING_URI") or record.get("tracking_uri")
        _probe(uri)
        import mlflow

        with _store_made_once(uri):
            client = _mlflow_client(uri)
        try:
            client.update_run(run_id, status="RUNNING")
        except mlflow.exceptions.MlflowException as e:
            raise UserError(f"{run_dir / paths.TRACKING} names MLflow run {run_id}, which "
                            f"{_no_password(uri)} does not have ({_said(e)}); set "
                            f"MLFLOW_TRACKING_URI to the store it was tracked in") from None
        return _MLflow(client, run_id, dict(record), log)
    run = _wandb_run(run_id, run_dir, None, None, record.get("dir"), record.get("project"),
                     record.get("group"), record.get("job_type"))
    return _Wandb(run, dict(record), run_dir, log)


def _read(run_dir: Path) -> dict | None:
    path = Path(run_dir) / paths.TRACKING
    if not path.is_file():
        return None
    return read_json(path, "move it away to track the run anew")


def _import(kind: str):
    try:
        if kind == MLFLOW:
            import mlflow
            _quiet_mlflow_logs()
            return mlflow
        import wandb
        return wandb
    except ImportError as e:
        raise UserError(f"--track {kind} needs the {kind} package ({e}); run: "
                        f"{_INSTALL[kind]}, or leave out --track") from None


# MLflow -------------------------------------------------------------------------------------

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


# W&B ----------------------------------------------------------------------------------------

def _wandb_dir(runs_dir) -> str | None:
    """Where W&B writes its files: WANDB_DIR when set (W&B reads it), else beside the runs
    (<runs_dir>/wandb/) rather than in the working folder."""
    if os.environ.get("WANDB_DIR") or runs_dir is None:
        return None
    Path(runs_dir).mkdir(parents=True, exist_ok=True)
    return str(Path(runs_dir).resolve())


_WANDB_MODES = ("", "online", "offline", "disabled", "dryrun", "shared")  # wandb.Settings.mode


def _wandb_logged_in() -> None:
    """Online W&B needs an API key: without one, wandb.init asks for it at a terminal (a
    prompt that blocks the command: ultralytics#2973) or fails after the run folder is made.
    Where W&B keeps one (WANDB_API_KEY, or the netrc file `wandb login` writes, NETRC or
    ~/.netrc, for WANDB_BASE_URL's host), or offline, training goes on; else one line now."""
    mode = os.environ.get("WANDB_MODE", "")
    if mode.lower() not in _WANDB_MODES:
        raise UserError(f"WANDB_MODE={mode!r} is not a W&B mode; set it to one of "
                        f"{', '.join(m for m in _WANDB_MODES if m)}, or unset it (online)")
    if mode.lower() in ("offline", "disabled", "dryrun") or os.environ.get("WANDB_API_KEY"):
        return
    host = urllib.parse.urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc").expanduser()
    try:
        if netrc.netrc(path).authenticators(host.hostname or ""):
            return
    except (OSError, netrc.NetrcParseError):
        pass
    raise UserError(f"--track wandb has no W&B API key for {host.hostname} (neither "
                    f"WANDB_API_KEY nor {path}); run: wandb login, or set "
                    f"WANDB_MODE=offline to keep the run's W&B files locally")


def _wandb_run(run_id, run_dir: Path, params, tags, folder=None, project=None, group=None,
               job_type=None):
    """wandb.init of the run `run_id`, new or continued (resume="allow"), as its own Run
    object ("create_new": a k-fold run tracks its parent's run and one run per fold in one
    process), its files under `folder` (None: WANDB_DIR's, or the working folder). Everything
    else follows W&B's environment (WANDB_MODE, WANDB_PROJECT, WANDB_ENTITY, WANDB_API_KEY);
    its wait for a server is bounded to 30 s unless WANDB_INIT_TIMEOUT says otherwise."""
    import wandb

    settings = {"reinit": "create_new", "silent": True}
    if not os.environ.get("WANDB_INIT_TIMEOUT"):
        settings["init_timeout"] = 30
    try:
        return wandb.init(project=project or os.environ.get("WANDB_PROJECT") or PROJECT,
                          name=run_dir.name, id=run_id, resume="allow", config=params,
                          tags=[f"corolla:{tags['corolla.run_id']}"]
                          if tags and tags.get("corolla.run_id") else None,
                          group=group, job_type=job_type, dir=folder,
                          settings=wandb.Settings(**settings))
    except Exception as e:  # no network, no login: one line, before training
        raise UserError(f"W&B could not start run {run_id or run_dir.name} ({_said(e)}); "
                        f"log in (wandb login), set WANDB_MODE=offline, or leave out "
                        f"--track") from None
