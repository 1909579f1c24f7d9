"""The workflow from Python, in a few lines (for notebooks):

    import corolla
    run = corolla.train(data="/data/petals", model="efficientnet_b0", epochs=12)
    run.metrics["f1_macro"]      # val scores, as metrics.json holds them
    run.evaluate()               # again, e.g. after the data changed
    run.predict(tta=4)           # submission.csv, checked
    run.predict_photos("my_photos/")   # top-5 classes of each photo, by name
    run.export("tflite")         # RUN/export-tflite/: model.tflite, classes.txt, export.json
    run.explain("photo.jpg")     # RUN/explain/photo.png: where the evidence lies (Grad-CAM)
    run.report()                 # report.html; shown inline in Jupyter
    corolla.lr_find(data="/data/petals")["suggestion"]   # a range test; no run made
    corolla.train(data="/data/petals", learning_rate="find")   # trains at its suggestion
    run = corolla.open_run("runs/small_cnn-20261122-101500")

Keyword settings are the command line's flags by their Python names (`epochs`, `batch_size`,
`learning_rate`, `steps_per_epoch`, `runs_dir`, `name`, ...): they go through the CLI's one
flag -> config table (`corolla.config.flags`), so every flag is a keyword here too, and errors
name the keyword (`epochs=`), not the flag. The work is done by `corolla.flows`, which the
CLI's commands call as well, with the same one-line errors (a `UserError`) for bad input.
"""

from __future__ import annotations

import contextlib
import functools
from html import escape
from pathlib import Path

from corolla.flows.library_errors import as_user_errors
from corolla.config import range_test
from corolla.config.flags import from_keywords
from corolla.config.range_test import RangeSettings
from corolla.errors import UserError
from corolla.files import read_json
from corolla.flows import check_data as check_flow
from corolla.flows import evaluate, explain, export, predict
from corolla.flows import lr_find as lr_find_flow
from corolla.flows import photos as photos_flow
from corolla.flows import train as train_flow
from corolla.report import html as html_report
from corolla.runs import paths, rundir
from corolla.runtime import clock, hardware, tflog


# What evaluate and predict take: the machine's runtime and the inference batch.
_INFERENCE = ("runtime.", "train.batch_size", "train.global_batch_size")


@contextlib.contextmanager
def _command():
    """What every call below runs under, as the CLI's commands do: TensorFlow's C++ start-up
    lines kept off the notebook (whichever call first imports it) and library errors as one
    `UserError`."""
    with tflog.quiet_tensorflow(), as_user_errors():
        hardware.check_env_backend()
        yield


def _user_facing(function):
    """A UserError leaves the API as the user's mistake it is, one line: raised from here with
    none of Corolla's frames behind it (a script shows the call that failed and the message;
    IPython and Jupyter, which ask an exception for `_render_traceback_`, the message alone)."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except UserError as error:
            line = f"{type(error).__name__}: {error}"
            error._render_traceback_ = lambda: [line]
            raise error.with_traceback(None) from None

    return call


class Report:
    """A written report.html; Jupyter shows it inline."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _repr_html_(self) -> str:
        return html_report.fragment(self.path.parent)

    def __repr__(self) -> str:
        return f"Report({str(self.path)!r})"


class Run:
    """A run folder (or an ensemble folder): its config, its metrics and what can be done with
    it. Nothing is cached: the properties read the folder's files each time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    @_user_facing
    def config(self):
        """The run's resolved config, its time plan's decisions included (None for an ensemble
        folder, which has none)."""
        path = self.path / paths.CONFIG
        return rundir.config_of(self.path) if path.is_file() else None

    @property
    @_user_facing
    def metrics(self) -> dict | None:
        """metrics.json of the run's last evaluation (None before any)."""
        path = self.path / paths.METRICS
        fix = f"write it again with `run.evaluate()` (corolla evaluate {self.path})"
        return read_json(path, fix) if path.is_file() else None

    # The defaults tta=1 and top_k=5 are scoring.tta.NO_TTA and flows.photos.TOP_K written out,
    # so that the API reference (read from the source) shows values; a test holds them equal.
    @_user_facing
    def evaluate(self, tta: int = 1, data: str | Path | None = None,
                 out: str | Path | None = None, fit_bias: bool = False, **runtime) -> dict:
        """Scores the run on val (metrics.json, pictures, predictions, report.html) and returns
        the metrics (`tta`: test-time augmentation views; `fit_bias`: then fits the offsets for
        macro F1 into bias.json). `runtime`: backend, strategy, precision, batch_size,
        global_batch_size."""
        given = from_keywords(runtime, "Run.evaluate()", _INFERENCE)
        with _command():
            return evaluate.evaluate(self.path, given, data=_text(data), out=out,
                                     tta=tta, fit_bias=fit_bias)

    @_user_facing
    def predict(self, tta: int = 1, data: str | Path | None = None,
                out: str | Path | None = None, force: bool = False, bias: str = "none",
                **runtime) -> Path:
        """Writes the checked submission.csv (`tta`: test-time augmentation passes; `bias`
        "fitted": decided with the offsets of `evaluate(fit_bias=True)`) and returns its
        path."""
        given = from_keywords(runtime, "Run.predict()", _INFERENCE)
        with _command():
            return predict.predict(self.path, given, data=_text(data), out=out,
                                   force=force, tta=tta, bias=bias)

    @_user_facing
    def predict_photos(self, photos, top_k: int = 5, out: str | Path | None = None,
                       json: bool = False, strict: bool = False, force: bool = False,
                       tta: int = 1, bias: str = "none", **runtime) -> list[dict]:
        """The top-`top_k` classes of each photo (`photos`: a path or a list of image files,
        folders and CSVs of paths), as `corolla predict RUN PATH...`: one dict a photo,
        {"path", "top": [{"class", "class_index", "probability"}, ...]}."""
        given = from_keywords(runtime, "Run.predict_photos()", _INFERENCE)
        with _command():
            return photos_flow.predict_photos(self.path, photos, given,
                                              top=top_k, out=out, as_json=json, strict=strict,
                                              force=force, tta=tta, bias=bias)

    @_user_facing
    def export(self, format: str, out: str | Path | None = None,
               quantize: str = "none", check_images: int = 64) -> Path:
        """The model for deployment, as `corolla export`: `format` savedmodel, tflite or
        onnx (`quantize`: none, dynamic or float16, tflite only); returns the folder."""
        with _command():
            return export.export(self.path, format, out=out, quantize=quantize,
                                 check_images=check_images)

    @_user_facing
    def explain(self, images, out: str | Path | None = None, force: bool = False,
                **runtime) -> list[Path]:
        """Grad-CAM pictures of `images` (a path or a list of image files, folders, CSVs), as
        `corolla explain`; returns the files written."""
        given = from_keywords(runtime, "Run.explain()", _INFERENCE)
        with _command():
            return explain.explain(self.path, images, given, out=out, force=force)

    @_user_facing
    def report(self) -> Report:
        """Writes report.html from the run's files; Jupyter shows the result inline."""
        with _command():
            return Report(html_report.write(self.path))

    def _repr_html_(self) -> str:
        if self.metrics is None:
            return (f"<p>Corolla run <code>{escape(str(self.path))}</code>: not evaluated yet "
                    f"(<code>run.evaluate()</code>)</p>")

        return html_report.fragment(self.path)

    def __repr__(self) -> str:
        from corolla.scoring.metrics import f1_text

        m = self.metrics
        score = f", val {f1_text(m)}" if m and "f1_macro" in m else ""
        return f"Run({str(self.path)!r}{score})"


def _text(path) -> str | None:
    return None if path is None else str(path)


@_user_facing
def train(config: str | Path | None = None, resume: str | Path | None = None, log=print,
          strict: bool = False, **keywords) -> Run | None:
    """Trains a run as `corolla train` does (then evaluates on val and writes submission.csv)
    and returns it; None on a worker process that is not the chief. `config`: a TOML file, as
    --config; `resume`: an interrupted run to continue; `strict`: copies of images across
    splits (the data check before training) are an error; `keywords`: the command line's flags
    by their Python names (data=, model=, epochs=, time="10m" instead of epochs=, ...)."""
    began = clock.default_clock().now()  # a time budget is the call's: it counts from here
    given = from_keywords(keywords, "corolla.train()")
    with _command():
        run_dir, _ = train_flow.train(_text(config), given, resume=resume, log=log,
                                      strict=strict, began=began)
    return Run(run_dir) if run_dir is not None else None


@_user_facing
def lr_find(config: str | Path | None = None, start: float = range_test.START,
            end: float = range_test.END, steps: int = range_test.STEPS, rule: str = "steepest",
            out: str | Path | None = None, log=print, **keywords) -> dict:
    """The learning-rate range test of the run `keywords` describe (train's: data=, model=,
    batch_size=, ...), as `corolla lr-find`: the rate grows exponentially from `start` to `end`
    over `steps` training steps of the run's own model, data and optimizer; writes
    lr_find.png and lr_find.json into `out` (default: the current folder) and returns the
    record: {"suggestion": rate, "rule", "rates", "losses", "smoothed", ...}. No run folder is
    made; `corolla.train(..., learning_rate="find")` trains at the suggestion."""
    given = from_keywords(keywords, "corolla.lr_find()").with_names(
        {key: f"{key}=" for key in ("start", "end", "steps", "rule", "out")})
    with _command():
        return lr_find_flow.lr_find(_text(config), given,
                                    RangeSettings(start, end, steps, rule), out=out, log=log)


@_user_facing
def check_data(data: str | Path, out: str | Path | None = None, strict: bool = False,
               log=print) -> dict:
    """Checks a data set as `corolla check-data` does (duplicates within and across splits,
    class counts and imbalance, image sizes, images that do not decode), prints the table and
    returns everything found (`out`: also written to that new JSON file; `strict`: copies
    across splits are an error)."""
    with _command():
        return check_flow.check_data(str(data), out=out, strict=strict, log=log)


@_user_facing
def open_run(path: str | Path) -> Run:
    """An existing run (or ensemble) folder."""
    path = Path(path)
    if not (path / paths.CONFIG).is_file() and not (path / paths.METRICS).is_file():
        raise UserError(f"{str(path)!r} is not a run folder (no {paths.CONFIG}); pass a "
                        f"folder written by `corolla train` or `corolla ensemble`")
    return Run(path)
