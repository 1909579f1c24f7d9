"""Run directories: one per run, never silently overwritten; made, locked, recorded and opened
here (their files' names: `corolla.runs.paths`)."""

from __future__ import annotations

import json
import os
import platform
import socket
import time
from importlib import metadata
from pathlib import Path

from corolla.config import RunConfig, load_config, save_config
from corolla.config.flags import Given
from corolla.data.classes import format_classes_file, parse_classes_file
from corolla.errors import UserError
from corolla.files import (UNMAKEABLE, hold_lock, lock_is_free, read_json, remove_partials,
                           write_text_atomic)
from corolla.runs.kfold import refuse_parent
from corolla.runs import time_plan_file
from corolla.runs.paths import CLASSES, CONFIG, FINISHED, LOCK, MODEL, PLAN


def create(runs_dir: str | Path, name: str, default_prefix: str) -> Path:
    """A new, empty run directory. An explicit name that exists is an error; a generated one
    gets a numeric suffix instead (two runs started in the same second)."""
    runs_dir = Path(runs_dir)
    check_free(runs_dir, name)
    try:
        if name:
            path = runs_dir / name
            if _unstarted(path):  # a kill came between its mkdir and its config.toml
                return path
            path.mkdir(parents=True)
            return path
        base = f"{default_prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
        for suffix in ["", *(f"-{i}" for i in range(2, 1000))]:
            path = runs_dir / f"{base}{suffix}"
            try:
                path.mkdir(parents=True)
                return path
            except FileExistsError:
                continue
    except OSError as e:
        if e.errno not in UNMAKEABLE:  # a bug keeps its traceback
            raise
        raise UserError(f"cannot create a run directory in {str(runs_dir)!r} ({e.strerror}); "
                        f"pass --runs-dir with a folder you can write") from None
    raise UserError(f"could not create a new run directory under {str(runs_dir)!r}")


def check_free(runs_dir: str | Path, name: str, given: Given = Given()) -> None:
    """Refuses what `create` would: --runs-dir a file, or an explicit name taken (a finished
    run, any other folder; `train` continues an unfinished run of the same name before this).
    Checked before a run's work (recipe, data, time probe) too, so that the refusal comes first.
    `given`: the settings as the user wrote them (`--name`, or `name=` from Python)."""
    runs_dir, path = Path(runs_dir), Path(runs_dir) / name
    try:
        is_file = runs_dir.exists() and not runs_dir.is_dir()
        taken = bool(name) and path.exists() and not _unstarted(path)
    except OSError:  # a folder that cannot be read: `create` says so as it fails to make one
        return
    if is_file:
        raise UserError(f"{given.name('output.runs_dir', '--runs-dir')} {str(runs_dir)!r} is "
                        f"a file, not a folder; pass a folder (made if missing)")
    if taken:
        finished = " (a finished run)" if status(path) == FINISHED_STATUS else ""
        raise UserError(f"run directory {str(path)!r} already exists{finished}; choose another "
                        f"{given.name('output.name', '--name')} or move the old run away")


def _unstarted(path: Path) -> bool:
    """A run folder that holds nothing but, perhaps, a lock nobody holds: its process was killed
    before it wrote its config.toml, so nothing was trained in it and it may be taken over."""
    if not path.is_dir() or {p.name for p in path.iterdir()} - {LOCK}:
        return False
    lock = path / LOCK
    return not lock.is_file() or lock_is_free(lock)  # held: a live process sets the run up


def free_name(runs_dir: str | Path, name: str) -> str:
    """`name`, or the first of name-2, name-3, ... that no run uses yet."""
    for candidate in [name, *(f"{name}-{i}" for i in range(2, 1000))]:
        if not (Path(runs_dir) / candidate).exists():
            return candidate
    raise UserError(f"no free run name like {name!r} under {str(runs_dir)!r}")


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("corolla", "keras", "tensorflow", "jax", "jaxlib", "numpy"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return found


def _session(plan) -> dict:
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "plan": plan.to_dict(),
            "versions": _versions()}


def record(run_dir: Path, config, plan, class_names) -> None:
    """Writes what a new run is: its resolved config, the plan and versions it runs with, and
    the names of its classes."""
    save(run_dir, config)
    write_text_atomic(run_dir / CLASSES, format_classes_file(class_names))
    write_text_atomic(run_dir / PLAN, json.dumps({"sessions": [_session(plan)]}, indent=1))


def save(run_dir: Path, config: RunConfig) -> None:
    """The run's config: what its time plan decided into time_plan.json (first: where a kill
    comes between the two, its schedule holds), the rest into config.toml."""
    time_plan_file.write(run_dir, config)
    save_config(config, run_dir / CONFIG)


def record_session(run_dir: Path, plan) -> None:
    """Adds a resumed session's plan (the hardware may differ from the first one's)."""
    path = run_dir / PLAN
    fix = "move it away (it only records the run's sessions) and run the command again"
    sessions = read_json(path, fix).get("sessions", []) if path.is_file() else []
    write_text_atomic(path, json.dumps({"sessions": sessions + [_session(plan)]}, indent=1))


def class_names(run_dir: Path) -> tuple[str, ...]:
    """The run's saved class names: which class each output of its model is. Required: the
    data's names are no stand-in, since its classes.txt may have been edited or reordered
    since (every output would then be named wrong, silently)."""
    path = Path(run_dir) / CLASSES
    if not path.is_file():
        raise UserError(f"{path} is missing: it names the classes of the run's model, in "
                        f"order; copy it back from a copy of the run (or, if the data's class "
                        f"list is unchanged since training, from the data's {CLASSES})")
    return parse_classes_file(path.read_text())


# What a run folder says about its run: training (interrupted, or under way), trained (model.keras
# written, evaluation or submission may be missing) or finished (FINISHED written, last of all).
TRAINING, TRAINED, FINISHED_STATUS = "training", "trained", "finished"


def status(run_dir: str | Path) -> str:
    run_dir = Path(run_dir)
    if (run_dir / FINISHED).is_file():
        return FINISHED_STATUS
    return TRAINED if (run_dir / MODEL).is_file() else TRAINING


def mark_finished(run_dir: Path) -> None:
    write_text_atomic(run_dir / FINISHED, time.strftime("%Y-%m-%dT%H:%M:%S%z\n"))


def _open(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG).is_file():
        raise UserError(f"{str(run_dir)!r} is not a run directory (no {CONFIG}); pass a folder "
                        f"written by `corolla train`, e.g. runs/<run>")
    return run_dir


def read(run_dir: str | Path) -> tuple[Path, RunConfig]:
    """The run's folder and its config (config.toml, parsed, with its time plan's decisions:
    `config_of`): the one read of it a command makes (the config is passed down, not read
    again)."""
    run_dir = _open(run_dir)
    return run_dir, config_of(run_dir)


def config_of(run_dir: Path) -> RunConfig:
    """The run's config: its config.toml with what its time plan decided (time_plan.json,
    `time_plan_file.merged`)."""
    return time_plan_file.merged(run_dir, load_config(run_dir / CONFIG))


def load(run: str | Path, config: RunConfig | None = None) -> tuple[
        Path, RunConfig]:
    """The folder and resolved config of a run whose model is to be used: a k-fold parent (it
    has none) or a run whose training did not finish is an error. `config`: the run's, when the
    caller has `read` it already."""
    run_dir, config = (Path(run), config) if config is not None else read(run)
    refuse_parent(run, config)  # (named as given)
    if status(run_dir) == TRAINING:
        raise UserError(untrained(run_dir))
    return run_dir, config


def untrained(run_dir: Path) -> str:
    """Why a run without a model cannot be used yet, and what to do: wait for the process
    training it, or continue it (it was stopped)."""
    lock = Path(run_dir) / LOCK
    # (This process may hold it still: a notebook's training that stopped with an error.)
    if Path(run_dir).resolve() not in _held and lock.is_file() and not lock_is_free(lock):
        holder = lock.read_text(errors="replace")[:200].strip() or "another process"
        return (f"run {str(run_dir)!r} is being trained (by {holder}) and has no {MODEL} "
                f"yet; use it once its training ends")
    return (f"run {str(run_dir)!r} has no {MODEL}: its training did not finish; continue it "
            f"with `corolla train --resume {run_dir}`")


def load_unfinished(run_dir: str | Path) -> tuple[Path, RunConfig]:
    """An interrupted run to continue: its folder and config. A finished run is not trained
    again (that would overwrite its model)."""
    run_dir = _open(run_dir)
    if status(run_dir) == FINISHED_STATUS:
        raise UserError(f"run {str(run_dir)!r} already finished; evaluate or predict with it, "
                        f"or start a new run")
    return run_dir, config_of(run_dir)


_held: dict[Path, int] = {}  # run folder -> the open lock file this process holds


def claim(run_dir: Path, log=print) -> None:
    """Makes this process the run's one writer until `release` (or its exit: the kernel drops
    an flock with its process, so a killed run leaves no lock that blocks the next one)."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        return
    path = run_dir / LOCK
    try:
        fd = hold_lock(path)
    except BlockingIOError:
        holder = path.read_text(errors="replace")[:200].strip() or "another process"
        raise UserError(f"run {str(run_dir)!r} is being written by {holder}; wait for it to "
                        f"end (or stop it) before training or resuming this run") from None
    previous = os.pread(fd, 200, 0).decode(errors="replace").strip()
    if previous:
        log(f"taking over {path.name} from {previous}, which is no longer running")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"process {os.getpid()} on {socket.gethostname()}".encode(), 0)
    _held[run_dir] = fd
    remove_partials(run_dir)  # left by a writer that was killed mid-write


def release(run_dir: Path) -> None:
    fd = _held.pop(Path(run_dir).resolve(), None)
    if fd is not None:
        os.ftruncate(fd, 0)  # an empty lock file: nobody held it when it was left
        os.close(fd)
