"""`corolla lr-find --data D [the train flags]`: the learning-rate range test of the run those
flags describe (the config resolved as `corolla train` resolves it: recipe, flags, the batch
for this device; its own model, data stream, optimizer and global batch: `training.range_test`),
without a run: it prints the suggested rate and writes lr_find.png (the loss against the rate)
and lr_find.json (the numbers) into --out, the current folder unless told, replacing the
previous test's. `corolla train --lr find` runs the same test first and trains at its
suggestion.
"""

from __future__ import annotations

from pathlib import Path

from corolla.config.flags import Given
from corolla import config
from corolla import runtime
from corolla.config.range_test import RangeSettings
from corolla.errors import UserError
from corolla.files import check_folder, make_folder, write_json
from corolla.flows import train as train_flow
from corolla.runs import paths


def lr_find(config_file: str | None = None, given: Given = Given(),
            settings: RangeSettings = RangeSettings(),
            out: str | Path | None = None, log=print) -> dict:
    """The range test of the run that `given` (and `config_file`) describe, as `corolla
    lr-find`: writes lr_find.png and lr_find.json into `out` (default: the current folder),
    logs the suggestion and returns the record (lr_find.json's). A curve that never falls is
    a UserError, after its picture is written."""
    settings = settings.checked(given.names)
    if isinstance(given.get("train.learning_rate"), str):  # --lr find: what this does
        given = given.without("train.learning_rate")
    out = Path(out) if out is not None else Path(".")
    out_flag = given.name("out", "--out")
    if (out / paths.CONFIG).is_file():
        raise UserError(f"{out} is a run folder; lr-find does not write into runs (train "
                        f"with --lr find to keep the test in a run): pass {out_flag} with "
                        f"another folder")
    config_file = config.config_file(config_file)
    cfg = config.load_config(config_file, given.values, given.names)
    if not cfg.data.path:
        raise UserError(f"no data given; pass {given.name('data.path', '--data')} with a folder "
                        f"holding tfrecords-jpeg-SxS/, an image folder or a CSV")
    train_flow.check_first(cfg, config_file, given)
    check_folder(make_folder(out), out_flag)  # before the work
    plan = runtime.detect_for(cfg)  # first: it picks the Keras backend
    cfg, plan, recipe = train_flow.for_plan(config_file, given, plan, log)
    log(recipe.line(cfg))
    from corolla.training import range_test

    found = range_test.find(cfg, plan, settings, log)
    record = found.to_dict()
    if not plan.is_chief:
        return record
    write_json(record, out / paths.LR_FIND)
    from corolla.report import plots

    picture = plots.plot_lr_find(record, out / paths.LR_FIND_PICTURE)
    log(f"picture: {picture} (the numbers: {out / paths.LR_FIND})")
    if found.suggestion is None:
        raise range_test.no_suggestion(found, given.name("train.learning_rate", "--lr"))
    log(found.line())
    return record
