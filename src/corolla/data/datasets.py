"""Any data path -> a Layout: the competition layout read as it is, or an image folder or CSV
(`corolla.data.sources`) converted once (`corolla.data.convert`) into a cache keyed by its
content and the conversion settings, so that training, evaluation and prediction all read
TFRecords through one pipeline."""

from __future__ import annotations

import os
from pathlib import Path

from corolla.data import convert, sources
from corolla.data import layout as layout_lib
from corolla.data.records import Features

CACHE_ENV = "COROLLA_CACHE_DIR"  # where `train --data FOLDER|CSV` converts (see `cache_dir`)


def cache_dir() -> Path:
    """Where `train --data FOLDER|CSV` keeps its conversions: $COROLLA_CACHE_DIR, else
    $XDG_CACHE_HOME/corolla, else ~/.cache/corolla (beside the demo's data). Not under the runs
    folder: evaluate, predict and check-submission, which know no runs folder, find the same
    conversion, and every run of a source shares it."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "corolla"


def features_of(data_config):
    """The record feature names a run's [data] config gives (see `records.Features`)."""
    return Features(image=data_config.image_feature, label=data_config.label_feature,
                    id=data_config.id_feature)


def open_data(path: str, image_size: int = 0, preferred_size: int = 224, *, features=None,
              log=print):
    """Any data path -> a competition Layout: read as it is (its records' features named as
    `features` says, see `features_of`), or converted (once, cached) from an image folder or a
    CSV at `image_size` (or `preferred_size`, the model's)."""
    if not path or sources.kind_of(path) == "layout":
        layout = layout_lib.open_layout(path, image_size, preferred_size)
        return layout_lib.with_features(layout, features) if features else layout
    source = sources.scan(path)
    settings = convert.Settings(image_sizes=(image_size or preferred_size,))
    out = convert.cached(source, settings, cache_dir() / "converted", log=log)
    layout = layout_lib.open_layout(str(out), image_size or preferred_size)
    return layout_lib.with_source(layout, source.path)
