"""Any data path -> a Layout: the competition layout read as it is, or an image folder or CSV
(`corolla.data.prepare.sources`) converted once (`corolla.data.prepare.cache`) into a cache
keyed by its content and the conversion settings, so that training, evaluation and prediction
all read TFRecords through one pipeline."""

from __future__ import annotations

from pathlib import Path

from corolla.data.layout import open_layout, with_features, with_source
from corolla.data.audit import survey
from corolla.data.prepare import cache, sources
from corolla.data.prepare.settings import MANIFEST, Settings
from corolla.data.records import Features
from corolla.errors import UserError
from corolla.runtime import compile_cache

CACHE_ENV = compile_cache.CACHE_ENV  # where `train --data FOLDER|CSV` converts (`cache_dir`)


def cache_dir() -> Path:
    """Where `train --data FOLDER|CSV` keeps its conversions: $COROLLA_CACHE_DIR, else
    $XDG_CACHE_HOME/corolla, else ~/.cache/corolla (beside the demo's data and JAX's compiled
    programs: `runtime.compile_cache`). Not under the runs folder: evaluate, predict and
    check-submission, which know no runs folder, find the same conversion, and every run of a
    source shares it."""
    return compile_cache.cache_root()


def checks_dir() -> Path:
    """Where the data checks (`corolla.data.audit.survey`) are kept, by the data's key."""
    return cache_dir() / "checks"


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
        layout = open_layout(path, image_size, preferred_size)
        return with_features(layout, features) if features else layout
    source = sources.scan(path, log)
    settings = Settings(image_sizes=(image_size or preferred_size,))
    out = cache.cached(source, settings, cache_dir() / "converted", log=log,
                       copies=lambda: survey.copies(path, checks_dir(), log))
    layout = open_layout(str(out), image_size or preferred_size)
    return with_source(layout, source.path)


def open_recorded(data_config, preferred_size: int = 224, log=print):
    """The data a run was trained on, as its [data] config recorded it: evaluate, predict and
    resume read exactly the run's split, whatever happened to the source since.

    A TFRecord layout is read as it is. An image folder or CSV was converted into
    `data.converted`: that copy is read while it exists, so a source that changed since (a photo
    added, one touched) does not split again, which would put training images into val; the
    change is said in one line. When the copy is gone (the cache was cleared) the source is
    converted again, which gives the same split only if the source is unchanged: otherwise it
    is a UserError, never scores on another split."""
    path, recorded = data_config.path, data_config.converted
    features = features_of(data_config)
    if not recorded:
        return open_data(path, data_config.image_size, preferred_size, features=features,
                         log=log)
    recorded = Path(recorded)
    settings = Settings(image_sizes=(data_config.image_size or preferred_size,))
    try:
        source, unreadable = sources.scan(path, log), None
        now = cache.cache_folder(source, settings, cache_dir() / "converted")
    except UserError as e:  # the source moved or was removed: the run's copy still serves
        source, unreadable, now = None, e, None
    if (recorded / MANIFEST).is_file():
        if unreadable is not None:
            log(f"data: {path} cannot be read now ({unreadable}); reading this run's "
                f"conversion of it, {recorded}")
        elif now.name != recorded.name:
            log(f"data: {path} changed since this run was trained; the run keeps its own "
                f"split: reading its conversion {recorded} (train a new run to use the "
                f"changed files)")
        else:
            cache.announce_reuse(source.path, recorded, log)
        layout = open_layout(str(recorded), data_config.image_size)
        return with_source(layout, path)
    if unreadable is not None:
        raise UserError(f"this run's conversion of its data ({recorded}) is gone and {path} "
                        f"cannot be read ({unreadable}); restore either to evaluate or "
                        f"continue the run")
    if now.name != recorded.name:
        raise UserError(f"this run's conversion of its data ({recorded}) is gone and {path} "
                        f"changed since the run was trained: converting it again would split "
                        f"it differently (val would hold training images); restore {path} as "
                        f"it was, or train a new run")
    # The same files and settings: converted again into the same split.
    return open_data(path, data_config.image_size, preferred_size, features=features, log=log)
