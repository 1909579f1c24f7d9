"""Running a trained model: a run opened once with its plan and data (`OpenedRun`), its model
loaded and checked, batched class probabilities (with test-time augmentation). Evaluation,
prediction and training's val F1 callback all run models through here."""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path


from corolla.config.flags import Given
from corolla.config import RunConfig, with_settings
from corolla.data import datasets, folds
from corolla.data.classes import CLASSES_FILE, COMPETITION_CLASSES
from corolla.data.layout import Layout
from corolla import files
from corolla.errors import UserError, first_line
from corolla.models import hub
from corolla.runs import identity, paths, rundir
from corolla.runs.outputs import data_root
from corolla.runtime import Plan, detect_for


@dataclass(frozen=True)
class OpenedRun:
    """A trained run as one command uses it, opened once (`open_run`) and passed down: its
    folder, its config (config.toml parsed once), the plan its model runs with on this machine,
    and the data the command reads (its own split or other data; None: photos, no data set)."""
    folder: Path
    config: RunConfig
    plan: Plan
    layout: Layout | None = None


def open_run(run, given: Given = Given(), *,
             data_path: str | None = None, with_data: bool = True, plan: Plan | None = None,
             config: RunConfig | None = None, log=print) -> OpenedRun:
    """`run` opened for evaluation or prediction: refused when it has no model (a k-fold parent,
    an unfinished run: `rundir.load`), then its plan (`inference_plan`; `plan`: one the caller
    has, training's), then, `with_data`, its data (`open_data`; `log` hears how it is read).
    `config`: the run's config when the caller has read it already (`rundir.read`)."""
    folder, config = rundir.load(run, config)
    check_packages(folder, config)  # before the data is read
    if plan is None:
        plan = inference_plan(config, given)  # first: it picks the Keras backend
    layout = open_data(folder, config, data_path, log) if with_data else None
    return OpenedRun(folder, config, plan, layout)


def inference_plan(config: RunConfig, given: Given = Given()) -> Plan:
    """The plan to evaluate or predict with a trained run (its `config`) on this machine: the
    run's config with this machine's strategy and its own batch, unless runtime or batch
    settings say otherwise (other settings are the run's own and are ignored)."""
    given = given.only("runtime.", "train.")
    return detect_for(with_settings(config, {"runtime.strategy": "auto",
                                             "train.global_batch_size": 0, **given.values},
                                    given.names))


def check_packages(run_dir: Path, config: RunConfig) -> None:
    """A run whose model keras-hub builds, where keras-hub is not installed: one line (Keras'
    own error is a page of layer configs). Once per run opened, before its model is loaded:
    `open_run` does it, and a caller of `load_model` that does not open the run (export)."""
    hub.require(config.model.name, f"run {str(run_dir)!r} (model {config.model.name})")


def model_path(run_dir: Path, final: bool = False) -> Path:
    """The run's model.keras, or (`final`) the model the run predicts its test split with and
    deploys: its refit on train + val (`training.refit`) where it has one."""
    refit = run_dir / paths.REFIT
    return refit if final and refit.is_file() else run_dir / paths.MODEL


def load_model(run_dir: Path, plan: Plan, num_classes: int, config=None, final: bool = False):
    """The run's model (`model_path`; `final`: the one it predicts with), checked to output one
    probability per class of the run: a model of another width would pair its outputs with
    the wrong names (or none). With the run's `config`, also checked to be the run's own
    (`runs.identity`: its id and input size). Whether the model's packages are installed is
    checked once, when the run is opened (`check_packages`)."""
    import keras

    import corolla.models.layers  # noqa: F401  (registers Corolla's layers for loading)

    path = model_path(run_dir, final)
    files.check_regular(path, "model", files.MAX_MODEL)  # a FIFO would block the reading
    if not zipfile.is_zipfile(path):  # Keras would say "File not found" of a damaged file
        last = run_dir / paths.LAST
        other = f"copy {last} (the last epoch's model) over it if that one is whole, or " \
            if last.is_file() and zipfile.is_zipfile(last) else ""
        raise UserError(f"{path} is damaged (not a whole .keras archive); {other}train the "
                        f"run again")
    files.check_archive(path, "model")  # its members' sizes, before Keras inflates them
    with plan.inference_scope():
        try:
            model = keras.saving.load_model(path, compile=False)
        except (TypeError, ValueError) as e:  # Keras wraps the layer's ValueError in a TypeError
            # small_cnn trained on TensorFlow saves synchronized BatchNorm (see models.zoo).
            if "synchronized=True is only supported" in str(e):
                raise UserError(f"{run_dir} was trained on TensorFlow with synchronized "
                                f"BatchNormalization, which Keras loads only there; use "
                                f"--backend tensorflow") from None
            # Keras' safe mode refuses Python code stored in the file (a lambda can run
            # anything); Corolla's own models hold only registered layers.
            if str(e).startswith("Requested the deserialization of a"):
                what = "a Lambda layer" if "`Lambda` layer" in str(e) else "a Python lambda"
                raise UserError(f"{path} contains {what}; Corolla loads "
                                f"models only in Keras' safe mode: rebuild the model with "
                                f"registered layers instead") from None
            raise UserError(f"{path} cannot be loaded as a Keras model ({_why(e)}); put the "
                            f"run's own model back, or train the run again") from None
    if config is not None:
        identity.check(path, run_dir, config, model.input_shape[1])
    if model.output_shape[-1] != num_classes:
        raise UserError(f"{path} outputs {model.output_shape[-1]} classes but "
                        f"the run names {num_classes}; it is not this run's model")
    return model


def _why(error: Exception) -> str:
    """What Keras could not load, in a few words: its message ends with the inner error after
    the whole config (which a crafted file fills with anything)."""
    text = str(error).rsplit("Exception encountered:", 1)[-1].strip()
    named = re.search(r"Could not locate (class|function) '([^']{1,80})'", text)
    if named:  # a name outside Keras' and Corolla's registered layers: nothing is imported
        return f"it names a {named[1]} {named[2]!r} that is no registered Keras layer"
    return first_line(Exception(text), 160)


def open_data(run_dir: Path, config: RunConfig, data_path: str | None = None,
              log=print) -> Layout:
    """The data layout a run (`run_dir`, its `config`) is scored on, at its trained image size.
    The run's own data is the split it was trained on (`datasets.open_recorded`: never an
    image folder split again after it changed); `data_path` elsewhere is other data. The run's
    own class names win: data that names other classes would pair outputs with wrong labels.
    `log` hears how the data is read."""
    if not data_path or data_root(data_path) == data_root(config.data.path):
        layout = datasets.open_recorded(config.data, log=log)
        layout = folds.restrict(layout, config.data)  # a k-fold run's fold of its own data
    else:
        # Other data is read at whatever size it holds (the one nearest the run's), and scaled
        # to the model's input as it is decoded, as training scales its data.
        layout = datasets.open_data(data_path, 0, config.data.image_size or 224,
                                    features=datasets.features_of(config.data), log=log)
        if layout.source:  # photos (a folder, a CSV): all of them are new to the model
            layout = folds.whole(layout)
    saved = rundir.class_names(run_dir)
    if saved != layout.class_names:
        named = f"names {len(layout.class_names)} classes" if len(saved) != len(
            layout.class_names) else "names other classes"
        hint = "" if layout.class_names != COMPETITION_CLASSES else \
            f" (it has no {CLASSES_FILE}, so it holds the competition's 104 classes)"
        raise UserError(f"the data at {layout.root} {named}{hint}, not the {len(saved)} "
                        f"this run was trained on ({run_dir / paths.CLASSES}); a model scores "
                        f"only its own classes: pass --data with data of the same classes")
    return layout


def input_size(model, fallback: int) -> int:
    """The size `model` takes (its run's model.input_size): the data's images and photos are
    scaled to it as they are decoded, whatever size they have. `fallback` for a model whose
    input takes any size (the run's model.input_size, else its data's image size)."""
    shape = model.input_shape
    return (shape[1] if isinstance(shape, tuple) else None) or fallback
