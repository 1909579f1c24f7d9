"""A run's settings resolved once, from its config, the plan and the data: everything that
`0`/auto left open is filled in, so that the saved config.toml says exactly what ran."""

from __future__ import annotations

import uuid

import numpy as np

from corolla.config import RunConfig, derived_rate, with_settings
from corolla import models
from corolla.data import check, datasets, folds, pipeline
from corolla.data.layout import Layout
from corolla.errors import UserError
from corolla.files import absolute
from corolla.runtime import Plan


def input_size(config: RunConfig, spec, layout: Layout) -> int:
    """The size the model takes: model.input_size, at most the data's; checked (with the first
    size of progressive resizing) against the smallest the model takes, before anything is
    written."""
    size = min(config.model.input_size or layout.image_size, layout.image_size)
    # Named as the user set it: --input-size, or (unset) the data's size, --image-size.
    given = "the input size (--input-size)" if config.model.input_size else \
        "the data's image size (--image-size)"
    _at_least(spec, [(given, size)])
    return size


def _at_least(spec, sizes) -> None:
    """Each (what, size) against the smallest `spec`'s model takes (0: unset)."""
    for what, value in sizes:
        if value and value < spec.min_size:
            raise UserError(f"model {spec.name!r} takes images of at least {spec.min_size} px; "
                            f"{what} is {value}: choose a larger one, or another --model")


def data_size(config: RunConfig, spec) -> int:
    """The image size the run would like its data at: the largest it reads (model.input_size,
    which progressive resizing ends at) or, when that is the data's, the model's own. An image
    folder or CSV is converted at it, and of a TFRecord layout's sizes the nearest is read.
    The sizes asked for are checked first: before data is converted at one."""
    _at_least(spec, [("the input size (--input-size)", config.model.input_size),
                     ("the start size of progressive resizing (--start-size)",
                      config.train.start_size)])
    return config.model.input_size or spec.image_size


def resolve(config: RunConfig, plan: Plan, resume: bool = False,
            log=print) -> tuple[RunConfig, Layout]:
    """Checks the config against the registry and the data, and fills in everything that
    `0`/auto left open (image size, global batch, steps per epoch, the learning rates: the peak
    scaled with the replicas when train.scale_lr asks, start and minimum; the data path made
    absolute), so that the saved config says exactly what ran and a resumed run keeps its
    schedule whatever hardware it resumes on. A config that never went through a recipe
    (`config.recipe.compose`; built in Python) records train.recipe = "none". An image folder
    or CSV is converted (once, into the cache; see `data.datasets.open_data`): the config keeps
    it as data.path, and records the converted copy as data.converted, which a resumed run reads
    (`data.datasets.open_recorded`)."""
    spec = models.get(config.model.name)
    models.check_weights(spec, config.model.weights)
    path = config.data.path and absolute(config.data.path)
    if resume or config.data.fold:
        # The split the run (or its k-fold parent) was made on, whatever happened to the
        # source since.
        layout = datasets.open_recorded(config.data, data_size(config, spec), log=log)
    else:
        layout = datasets.open_data(path, config.data.image_size, data_size(config, spec),
                                    features=datasets.features_of(config.data), log=log)
    layout = folds.restrict(layout, config.data)  # a k-fold run's fold of train+val
    splits = [layout.split("train"), layout.split("val")]  # both must exist before anything
    if layout.has_split("test"):
        splits.append(layout.split("test"))
    # The checked train split counts what training will draw (less any skipped records).
    train_split = [check.check_split(split, len(layout.class_names),
                                     skip_bad_records=config.data.skip_bad_records)
                   for split in splits][0]
    if not config.train.steps_per_epoch:  # one pass over the split: at least one batch
        check.one_global_batch("train", train_split.count, plan.global_batch)
    steps = config.train.steps_per_epoch or train_split.count // plan.global_batch
    t = config.train
    peak = derived_rate(t.learning_rate * (plan.replicas if t.scale_lr == "replicas" else 1))
    return with_settings(config, {
        "data.path": path, "data.image_size": layout.image_size,
        "model.input_size": input_size(config, spec, layout),
        "data.converted": layout.root if layout.source else "",
        "train.recipe": "none" if t.recipe == "auto" else t.recipe,
        # Scaled once, here: the saved config holds the peak that ran (scale_lr "none"), so a
        # rerun or a resume on other hardware keeps it, as it keeps the global batch.
        "train.learning_rate": peak, "train.scale_lr": "none",
        "train.start_learning_rate": t.start_learning_rate or derived_rate(peak / 10),
        "train.min_learning_rate": t.min_learning_rate or derived_rate(peak / 100),
        "train.global_batch_size": plan.global_batch, "train.steps_per_epoch": steps,
        "output.run_id": config.output.run_id if resume else uuid.uuid4().hex[:12],
        "train.refit": refit(config, plan, train_split, log),
    }), layout


# train.refit "auto" refits a timed run whose classes have fewer training photos than this
# each (the median over the classes present): a refit shares the budget with the validated
# training, which pays where a class's val photos are a large share of what it has (learning
# curves are steep below a few dozen photos a class) and costs epochs where they are not (flat
# beyond). Figures: docs/benchmarks.md#figures-behind-the-defaults.
FEW_PHOTOS = 30


def refit(config: RunConfig, plan: Plan, train_split, log) -> str:
    """train.refit decided: "on" or "off" as given; "auto" is on for a timed run of one model
    in one process (not k-fold, whose folds' models all predict; not multi-worker, whose refit
    would train in one process) whose classes have few training photos each (FEW_PHOTOS),
    off otherwise. Said in the log where it is decided by the photos."""
    t = config.train
    if t.refit != "auto":
        return t.refit
    if not t.time_budget or t.folds or config.data.fold or plan.multi_worker:
        return "off"


    labels = pipeline.metadata(train_split, config.data.skip_bad_records)["labels"]
    counts = np.bincount(np.asarray(labels, dtype=np.int64))
    median = float(np.median(counts[counts > 0]))
    on = median < FEW_PHOTOS
    log(f"refit auto: {'on' if on else 'off'}, a median of {median:g} training photos a class "
        f"({'fewer than' if on else 'not fewer than'} {FEW_PHOTOS}: "
        + ("val's photos add to what little each class has, so the model that predicts "
           "trains again on train + val after validation; --refit off to skip it)" if on else
           "the time goes to one model's epochs; --refit on to refit anyway)"))
    return "on" if on else "off"
