"""What every tracker is: `Tracker`, the interface each library's module implements (and,
itself, the tracker of an untracked run), and the figures of a metrics.json it sends."""

from __future__ import annotations

from pathlib import Path

from corolla.errors import UserError, first_line

NONE, MLFLOW, WANDB = "none", "mlflow", "wandb"
PROJECT = "corolla"  # MLflow's experiment, W&B's project, unless their environment names one
FINAL = "final"  # the prefix of the run's own val scores (final/f1_macro); eval-<data>/ others


def said(e: BaseException) -> str:  # a tracker library's error: its type says most
    return first_line(e, 300, typed=True)


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
    through `_safely`: the first failure is one line in the log and the end of tracking.

    A library's tracker also says, as class methods, how its runs are opened: `check` before
    training, `new` for a run tracked anew, `resume` for one its tracking.json names."""

    kind = NONE
    install = ""  # the command that installs the library
    record: dict = {}

    def __init__(self, log=print):
        self.log, self.broken = log, False

    @classmethod
    def library(cls):
        """The library, imported; a UserError saying how to install it where it is missing."""
        try:
            return cls._import()
        except ImportError as e:
            raise UserError(f"--track {cls.kind} needs the {cls.kind} package ({e}); run: "
                            f"{cls.install}, or leave out --track") from None

    @staticmethod
    def _import():
        return None

    @classmethod
    def check(cls, runs_dir) -> None:
        """Before training (on the chief): the library importable and its store reachable, or
        one line saying what to do, within seconds."""

    @classmethod
    def new(cls, config, run_dir: Path, params: dict, tags: dict, parent, log) -> Tracker:
        """A new tracked run; `parent`: the k-fold parent's (open) tracker of a fold's run."""
        raise NotImplementedError

    @classmethod
    def resume(cls, record: dict, run_dir: Path, log) -> Tracker:
        """The tracked run `record` (RUN/tracking.json) names, continued."""
        raise NotImplementedError

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
            self.log(f"{self.kind} tracking stopped ({what}: {said(e)}); the run goes on "
                     f"without it")
            return None
