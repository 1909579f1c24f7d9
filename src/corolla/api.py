"""The workflow from Python, in a few lines (for notebooks):

    import corolla
    run = corolla.train(data="/data/petals", model="efficientnet_b0", epochs=12)
    run.metrics["f1_macro"]      # val scores, as metrics.json holds them
    run.evaluate()               # again, e.g. after the data changed
    run.predict(tta=4)           # submission.csv, checked
    run.report()                 # report.html; shown inline in Jupyter
    run = corolla.open_run("runs/small_cnn-20261122-101500")

Keyword settings are the command line's flags by their Python names (`epochs`, `batch_size`,
`learning_rate`, `steps_per_epoch`, `runs_dir`, `name`, ...): they go through the CLI's one
flag -> config table (`corolla.cli.FLAG_KEYS`), so every flag is a keyword here too. The work is
done by `corolla.workflow`, which the CLI calls as well.
"""

from __future__ import annotations

from pathlib import Path

from corolla import rundir, workflow
from corolla.errors import UserError


def settings(given: dict, what: str, only: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """(config key -> value, config key -> "name=") of keyword settings, by the CLI's table;
    `only`: the config key prefixes this call takes. An unknown keyword is a UserError naming
    it."""
    from corolla.cli import FLAG_KEYS

    flags, names = {}, {}
    for name, value in given.items():
        key = FLAG_KEYS.get(name)
        if key is None or (only and not key.startswith(only)):
            allowed = sorted(n for n, k in FLAG_KEYS.items() if not only or k.startswith(only))
            raise UserError(f"{what} got an unknown setting {name}=; it takes "
                            f"{', '.join(allowed)}")
        if value is not None:
            flags[key] = str(value) if isinstance(value, Path) else value
            names[key] = f"{name}="
    return flags, names


# What evaluate and predict take: the machine's runtime and the inference batch.
_INFERENCE = ("runtime.", "train.batch_size", "train.global_batch_size")


class Report:
    """A written report.html; Jupyter shows it inline."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _repr_html_(self) -> str:
        from corolla.report import html as html_report

        return html_report.fragment(self.path.parent)

    def __repr__(self) -> str:
        return f"Report({str(self.path)!r})"


class Run:
    """A run folder (or an ensemble folder): its config, its metrics and what can be done with
    it. Nothing is cached: the properties read the folder's files each time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def config(self):
        """The run's resolved config (None for an ensemble folder, which has none)."""
        from corolla import config as config_lib

        path = self.path / rundir.CONFIG
        return config_lib.load(path) if path.is_file() else None

    @property
    def metrics(self) -> dict | None:
        """metrics.json of the run's last evaluation (None before any)."""
        import json

        path = self.path / rundir.METRICS
        return json.loads(path.read_text()) if path.is_file() else None

    def evaluate(self, tta: int = 1, data: str | Path | None = None,
                 out: str | Path | None = None, **runtime) -> dict:
        """Scores the run on val (metrics.json, pictures, predictions, report.html) and returns
        the metrics (`tta`: test-time augmentation views). `runtime`: backend, strategy,
        precision, batch_size, global_batch_size."""
        flags, names = settings(runtime, "Run.evaluate()", _INFERENCE)
        return workflow.evaluate(self.path, flags, names, data=_text(data), out=out, tta=tta)

    def predict(self, tta: int = 1, data: str | Path | None = None,
                out: str | Path | None = None, force: bool = False, **runtime) -> Path:
        """Writes the checked submission.csv (`tta`: test-time augmentation passes) and returns
        its path."""
        flags, names = settings(runtime, "Run.predict()", _INFERENCE)
        return workflow.predict(self.path, flags, names, data=_text(data), out=out,
                                force=force, tta=tta)

    def report(self) -> Report:
        """Writes report.html from the run's files; Jupyter shows the result inline."""
        return Report(workflow.report(self.path))

    def _repr_html_(self) -> str:
        from html import escape

        if self.metrics is None:
            return (f"<p>Corolla run <code>{escape(str(self.path))}</code>: not evaluated yet "
                    f"(<code>run.evaluate()</code>)</p>")
        from corolla.report import html as html_report

        return html_report.fragment(self.path)

    def __repr__(self) -> str:
        m = self.metrics
        score = f", val macro F1 {m['f1_macro']:.4f}" if m and "f1_macro" in m else ""
        return f"Run({str(self.path)!r}{score})"


def _text(path) -> str | None:
    return None if path is None else str(path)


def train(config: str | Path | None = None, resume: str | Path | None = None, log=print,
          **keywords) -> Run | None:
    """Trains a run as `corolla train` does (then evaluates on val and writes submission.csv)
    and returns it; None on a worker process that is not the chief. `config`: a TOML file, as
    --config; `resume`: an interrupted run to continue; `keywords`: the command line's flags
    by their Python names (data=, model=, epochs=, ...)."""
    flags, names = settings(keywords, "corolla.train()")
    run_dir, _ = workflow.train(_text(config), flags, names, resume=resume, log=log)
    return Run(run_dir) if run_dir is not None else None


def open_run(path: str | Path) -> Run:
    """An existing run (or ensemble) folder."""
    path = Path(path)
    if not (path / rundir.CONFIG).is_file() and not (path / rundir.METRICS).is_file():
        raise UserError(f"{str(path)!r} is not a run folder (no {rundir.CONFIG}); pass a "
                        f"folder written by `corolla train` or `corolla ensemble`")
    return Run(path)
