"""Weights & Biases through its `Run` object: a run's epochs, scores and files, online or
offline (WANDB_MODE), its files beside the runs unless WANDB_DIR says otherwise. wandb is
imported only when a run is tracked with it."""

from __future__ import annotations

import netrc
import os
import shutil
import urllib.parse
from pathlib import Path

from corolla.errors import UserError
from corolla.files import write_json
from corolla.runs import paths
from corolla.runs.kfold import is_parent
from corolla.runs.tracking.base import PROJECT, WANDB, Tracker, said, scores
from corolla.runtime import signals


class WandbTracker(Tracker):
    """Weights & Biases through its `Run` object (`run.log(..., step=epoch)`, its summary for
    the scores, `run.save` for files). W&B keeps no record an offline session could ask, so
    the epochs logged are counted in tracking.json.

    That count follows each `run.log`, so an epoch a kill came between them is sent again by
    the resumed session. Online W&B drops it (a resumed run continues after the server's last
    step, and a step below it is dropped with a warning); offline, each session is a file of
    its own that starts at step 0 (wandb.init's `resumed` is False) and keeps every step it is
    given, so the epoch would be in two sessions' files, both uploaded into the one run by
    `wandb sync`. Hence a stop (Ctrl-C, SIGTERM, SIGHUP) is held until both are done; only a
    SIGKILL between them still sends an epoch twice (`signals.held`)."""

    kind = WANDB
    install = 'pip install "corolla[wandb]"'

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
            with signals.held():
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

    @staticmethod
    def _import():
        import wandb

        return wandb

    @classmethod
    def check(cls, runs_dir) -> None:
        _wandb_logged_in()

    @classmethod
    def new(cls, config, run_dir: Path, params: dict, tags: dict, parent, log) -> Tracker:
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
        return cls(run, record, run_dir, log)

    @classmethod
    def resume(cls, record: dict, run_dir: Path, log) -> Tracker:
        run = _wandb_run(record["run_id"], run_dir, None, None, record.get("dir"),
                         record.get("project"), record.get("group"), record.get("job_type"))
        return cls(run, dict(record), run_dir, log)


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
        raise UserError(f"W&B could not start run {run_id or run_dir.name} ({said(e)}); "
                        f"log in (wandb login), set WANDB_MODE=offline, or leave out "
                        f"--track") from None
