"""`corolla predict`: a trained run's checked submission.csv for the test split, and the test
predictions saved where evaluate saves val's; `corolla predict RUN PATH...`: the top classes of
anyone's photos, by name (`predict_photos`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from corolla.commands import arguments
from corolla.data.prepare import photos as photos_lib
from corolla.errors import UserError, check_stop
from corolla.evaluation import predictions as predictions_lib
from corolla.evaluation import tta as tta_lib
from corolla.files import make_folder
from corolla.report import photos as photo_report
from corolla.report import submission
from corolla.runs import paths, rundir
from corolla.runs.kfold import is_parent
from corolla.runs.outputs import output_dir, output_path

if TYPE_CHECKING:  # the module loads Keras: commands import it where they run
    from corolla.evaluation.inference import OpenedRun

BIAS_CHOICES = ("none", "fitted")  # --bias: argmax, or the offsets of evaluate --fit-bias


def predict(run, flags: dict | None = None, names: dict | None = None,
            data: str | None = None, out: str | Path | None = None, force: bool = False,
            tta: int = 1, bias: str = "none", log=print) -> Path:
    """`corolla predict`: writes the run's checked submission.csv; returns its path. `tta`:
    test-time augmentation views (1: none). `bias`: "fitted" decides with the offsets of
    `corolla evaluate RUN --fit-bias` (a k-fold run: on its averaged test predictions)."""
    tta = tta_lib.check(tta)
    _check_bias(bias)
    if _is_stdout(out):  # the run's checked submission.csv, then its text on stdout
        path = _predict(run, flags, names, data, None, force, tta, bias, _to_stderr)
        sys.stdout.write(path.read_text())
        return path
    return _predict(run, flags, names, data, out, force, tta, bias, log)


def _predict(run, flags, names, data, out, force: bool, tta: int, bias: str, log) -> Path:
    """`predict` with its arguments checked."""
    run_dir, config = rundir.read(run)
    if bias == "fitted" and is_parent(config):
        return _parent_with_offsets(run_dir, out, force, log)
    from corolla.evaluation.inference import open_run

    opened = open_run(run, flags, names, data_path=data, config=config, log=log)
    return predict_run(opened, out=out, force=force, log=log, tta=tta, bias=bias)


def _is_stdout(out) -> bool:
    """`--out -`: standard output, as `-` means on every command line."""
    return isinstance(out, str) and out == "-"


def _to_stderr(*args) -> None:  # the log, when stdout carries the output itself
    print(*args, file=sys.stderr)


def _check_bias(bias: str) -> None:
    if bias not in BIAS_CHOICES:
        raise UserError(f"--bias must be one of {', '.join(BIAS_CHOICES)}, got {bias!r}")


def _parent_with_offsets(parent: Path, out, force: bool, log) -> Path:
    """A k-fold run's submission from its averaged test predictions, decided with its
    offsets (fitted on its out-of-fold predictions)."""
    from corolla.evaluation import bias as bias_lib

    test = predictions_lib.load(predictions_lib.path_in(parent, "test"))
    path = output_path(parent, out, force)
    labels = bias_lib.decide(test.probabilities, bias_lib.load(parent, test.class_names))
    submission.write(test.ids, labels, path, num_classes=len(test.class_names))
    log(f"wrote {path} ({len(test.ids)} test images, the folds' mean, decided with the "
        f"offsets of {parent / paths.BIAS}; checked)")
    return path


def predict_run(opened: OpenedRun, model=None, out: str | Path | None = None, log=print,
                force: bool = False, report_skipped: bool = True, tta: int = 1,
                bias: str = "none") -> Path:
    """`corolla predict` of an opened run on its data (`tta` and `bias` as `predict` checked
    them): writes submission.csv (into the run directory unless `out` is given; see
    `runs.outputs.output_path` for what `out` and `force` may replace), checked against the
    test ids. The test predictions are saved where evaluate saves val's (the run, or
    RUN/eval-<data>/ for other data; see `runs.outputs.output_dir`), whatever `out` is: they are
    the run's record of its model on that data, which ensembles read. `tta`: the mean of that
    many views of each image (see `corolla.evaluation.tta`), recorded in the saved
    predictions. `bias` "fitted": the submission's classes are decided with the run's fitted
    offsets (`corolla.evaluation.bias`); the saved probabilities stay the model's own."""
    from corolla.data import check
    from corolla.evaluation import bias as bias_lib
    from corolla.evaluation import predict as predict_lib
    from corolla.evaluation.inference import load_model, model_path
    from corolla.report import scored

    run_dir, config, layout, plan = opened.folder, opened.config, opened.layout, opened.plan
    offsets = bias_lib.load(run_dir, layout.class_names) if bias == "fitted" else None
    if layout.source and not layout.has_split("test"):  # an image folder or CSV, converted
        raise UserError(f"the data {layout.source} has no test split to predict: put unlabelled "
                        f"images in a test/ folder beside train/ (or rows with split = test in "
                        f"the CSV) and train a new run, or pass --data with data that has one")
    path = output_path(run_dir, out, force, config=config)
    try:
        saved_in = output_dir(run_dir, config, layout)
    except UserError:
        if out is None:
            raise
        saved_in = None  # a run this user may not write into: the submission goes to `out`
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names),
                                                           config, final=True)
    result = predict_lib.predict(model, layout, plan,
                                 skip_bad_records=config.data.skip_bad_records, tta=tta, log=log)
    if saved_in is not None:
        make_folder(saved_in)
        saved = scored.save_predictions(paths.predictions_file(saved_in, result.split),
                                        result.ids, None, result.probabilities,
                                        layout.class_names, tta=tta)
    log(f"wrote {saved}" if saved_in is not None else
        f"test predictions not saved: cannot write into {run_dir}")
    y_pred = result.y_pred if offsets is None else bias_lib.decide(result.probabilities, offsets)
    submission.write(result.ids, y_pred, path, num_classes=len(layout.class_names))
    by_refit = model_path(run_dir, final=True).name == paths.REFIT
    log(f"wrote {path} ({len(result.ids)} test images"
        f"{', by the refit on train + val' if by_refit else ''}"
        f"{f', mean of {tta} views' if tta > 1 else ''}"
        f"{'; decided with the fitted offsets' if offsets is not None else ''}; checked)")
    if report_skipped:
        for line in check.skipped_summary([layout.split("test")]):
            log(line)
    return path


TABLE_MAX = 20  # photos printed as a table; more go to a CSV only
CHUNK = 256  # photos decoded and predicted at a time: memory stays flat for any number


def predict_photos(run, photos, flags: dict | None = None, names: dict | None = None,
                   top: int = 5, out: str | Path | None = None, as_json: bool = False,
                   strict: bool = False, force: bool = False, tta: int = 1,
                   bias: str = "none", log=print) -> list[dict]:
    """`corolla predict RUN PATH...`: the top-`top` classes of each photo named by `photos`
    (a path, or a list of image files, folders searched recursively, CSVs of paths), read as
    `corolla convert` reads images and fitted to the run's input size as its data was. A table
    for a few photos; a CSV (and with `as_json` a JSON file) at `out`, or beside the current
    folder for many. A file that does not decode is skipped and listed at the end (`strict`:
    an error). Returns the rows (path and top classes of each photo)."""
    import keras

    from corolla.evaluation import bias as bias_lib
    from corolla.evaluation.inference import input_size, load_model, open_run, predict_images

    photos = photos_lib.as_paths(photos)
    tta = tta_lib.check(tta)
    _check_bias(bias)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise UserError(f"--top-k must be a number of classes, 1 or more, got {top!r}")
    opened = open_run(run, flags, names, with_data=False)
    run_dir, config, plan = opened.folder, opened.config, opened.plan
    class_names = rundir.class_names(run_dir)
    top = min(top, len(class_names))  # --top-k 1000 of 5 classes: all 5, said as such
    offsets = bias_lib.load(run_dir, class_names) if bias == "fitted" else None
    files = photos_lib.list_photos(photos)
    if not files:
        raise UserError("no photos given; pass image files, folders of them, or a CSV of paths")
    # Where the files go is checked before the model is loaded (see runs.outputs).
    stdout = _is_stdout(out)
    if stdout:
        out, log = None, _to_stderr
    elif out is None and (as_json or len(files) > TABLE_MAX):
        out = Path.cwd() / f"{run_dir.resolve().name}-predictions.csv"
    inputs = [*photos, *files]
    # --json --out P.json: the CSV beside it (P.csv), not first written there and replaced.
    csv_out = Path(out).with_suffix(".csv") if as_json and out is not None and \
        Path(out).suffix == ".json" else out
    csv_path = output_path(run_dir, csv_out, force, inputs, config) if out is not None \
        else None
    json_path = output_path(run_dir, csv_path.with_suffix(".json"), force, inputs, config) \
        if as_json and csv_path is not None else None
    model = load_model(run_dir, plan, len(class_names), config, final=True)
    size = input_size(model, config.model.input_size or config.data.image_size)
    fit = photos_lib.fit_of(config.data.converted or config.data.path)
    kept, probabilities, skipped = [], [], {}
    bar = keras.utils.Progbar(len(files), unit_name="photo") \
        if len(files) > CHUNK and sys.stdout.isatty() else None
    for start in range(0, len(files), CHUNK):
        check_stop()
        chunk = files[start:start + CHUNK]
        images, failed = photos_lib.read_many(chunk, size, fit)
        if failed and strict:
            path, why = next(iter(failed.items()))
            raise UserError(f"{path} is not a readable image ({why}); remove it, or leave out "
                            f"--strict to skip such files")
        skipped.update(failed)
        if len(images):
            kept += [p for p in chunk if p not in failed]
            probabilities.append(predict_images(model, images, plan, tta=tta,
                                                log=log if start == 0 else None,
                                                progress=False))
        if bar is not None:
            bar.add(len(chunk))
    probabilities = np.concatenate(probabilities) if probabilities else \
        np.zeros((0, len(class_names)), np.float32)
    if offsets is not None:  # decision scores whose argmax is the fitted decision
        probabilities = bias_lib.adjust(probabilities, offsets)
    rows = photo_report.records(kept, probabilities, class_names, top)
    if not rows:  # no file is written: a script must not take a header-only CSV for success
        for line in photo_report.skipped_lines(skipped):
            log(line)
        raise UserError(f"none of the {len(files)} photo(s) given could be read (listed "
                        f"above); nothing was predicted")
    if len(rows) <= TABLE_MAX:
        for line in photo_report.table(rows):
            log(line)
    if stdout:
        sys.stdout.write(photo_report.json_text(rows, skipped, run=str(run_dir), tta=tta,
                                                bias=bias) if as_json else
                         photo_report.csv_text(rows))
    if csv_path is not None:
        log(f"wrote {photo_report.write_csv(rows, csv_path)} ({len(rows)} photos, top {top})")
    if json_path is not None:
        written = photo_report.write_json(rows, skipped, json_path, run=str(run_dir), tta=tta,
                                          bias=bias)
        log(f"wrote {written}")
    for line in photo_report.skipped_lines(skipped):
        log(line)
    return rows


HELP = "write a run's submission.csv for the test split"


def add_arguments(p) -> None:
    arguments.scored_run(p)
    _photo_flags(p)
    p.add_argument("--out", help="submission file (default: RUN/submission.csv); with PATHs, "
                   "the CSV of their predictions (default for more than 20 photos or --json: "
                   "./RUN_NAME-predictions.csv); never a file of the run")
    p.add_argument("--force", action="store_true", help="let --out replace an existing file")
    p.add_argument("--bias", choices=BIAS_CHOICES, default="none",
                   help="fitted: decide with the per-class offsets of `corolla evaluate RUN "
                        "--fit-bias` (for macro F1); default none (argmax)")
    arguments.tta(p)
    arguments.runtime(p)
    arguments.batch(p, " for inference")


def _photo_flags(p) -> None:
    p.add_argument("photos", nargs="*", metavar="PATH", help="predict on these photos instead "
                   "of the test split: image files, folders (searched recursively) or CSVs of "
                   "paths; any size, format and mode")
    g = p.add_argument_group("photos (with PATH)")
    g.add_argument("--top-k", type=int, default=5, metavar="K",
                   help="classes listed per photo, likeliest first (default 5)")
    g.add_argument("--json", action="store_true", help="also write the predictions as JSON "
                   "(beside the CSV, with the skipped files)")
    g.add_argument("--strict", action="store_true", help="stop at the first file that does "
                   "not decode (default: skip it, and list it at the end)")


def main(args) -> int:
    if args.photos:
        if args.data:
            raise UserError("--data names a data set's test split; with photo PATHs, leave it "
                            "out")
        predict_photos(args.run, args.photos, *arguments.settings(args), top=args.top_k,
                       out=args.out, as_json=args.json, strict=args.strict, force=args.force,
                       tta=args.tta, bias=args.bias)
        return 0
    photo_only = [flag for flag, given in (("--json", args.json), ("--strict", args.strict),
                                           ("--top-k", args.top_k != 5)) if given]
    if photo_only:
        raise UserError(f"{photo_only[0]} is for predictions on photos: pass their PATHs after "
                        f"the run (corolla predict RUN photos/)")
    predict(args.run, *arguments.settings(args), data=args.data, out=args.out, force=args.force,
            tta=args.tta, bias=args.bias)
    return 0
