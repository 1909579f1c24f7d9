"""`corolla predict RUN PATH...`: the top classes of anyone's photos, by name, from a trained
run: read as `corolla convert` reads images, fitted to the run's input size as its data was,
predicted a chunk at a time; a table for a few, a CSV (and JSON) for many."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from corolla.config.flags import Given
from corolla.data.prepare import image_files
from corolla.errors import UserError
from corolla.stopping import check_stop
from corolla.scoring.tta import NO_TTA, check_views
from corolla.flows.predict import check_bias, is_stdout, to_stderr
from corolla.report import photo_table
from corolla.runs import rundir
from corolla.runs.outputs import output_path

TOP_K = 5  # classes listed per photo (`--top-k`, `top_k=`), likeliest first
TABLE_MAX = 20  # photos printed as a table; more go to a CSV only
CHUNK = 256  # photos decoded and predicted at a time: memory stays flat for any number


def predict_photos(run, photos, given: Given = Given(),
                   top: int = TOP_K, out: str | Path | None = None, as_json: bool = False,
                   strict: bool = False, force: bool = False, tta: int = NO_TTA,
                   bias: str = "none", log=print) -> list[dict]:
    """`corolla predict RUN PATH...`: the top-`top` classes of each photo named by `photos`
    (a path, or a list of image files, folders searched recursively, CSVs of paths), read as
    `corolla convert` reads images and fitted to the run's input size as its data was. A table
    for a few photos; a CSV (and with `as_json` a JSON file) at `out`, or beside the current
    folder for many. A file that does not decode is skipped and listed at the end (`strict`:
    an error). Returns the rows (path and top classes of each photo)."""
    photos = image_files.as_paths(photos)
    tta = check_views(tta)
    check_bias(bias)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise UserError(f"--top-k must be a number of classes, 1 or more, got {top!r}")
    # The run, the photos and the outputs are checked before Keras is imported (seconds): a
    # misspelt run folder is said at once.
    run_dir, config = rundir.load(run)
    class_names = rundir.class_names(run_dir)
    top = min(top, len(class_names))  # --top-k 1000 of 5 classes: all 5, said as such
    offsets = None
    if bias == "fitted":  # (scikit-learn, a second's import: only where it is used)
        from corolla.evaluation.bias import adjusted, load_offsets

        offsets = load_offsets(run_dir, class_names)
    files = image_files.list_photos(photos)
    if not files:
        raise UserError("no photos given; pass image files, folders of them, or a CSV of paths")
    # Where the files go is checked before the model is loaded (see runs.outputs).
    stdout = is_stdout(out)
    if stdout:
        out, log = None, to_stderr
    elif out is None and (as_json or len(files) > TABLE_MAX):
        out = Path.cwd() / f"{run_dir.resolve().name}-predictions.csv"
    csv_path, json_path = _outputs(run_dir, config, out, as_json, force, [*photos, *files])
    from corolla.evaluation.inference import input_size, load_model, open_run

    plan = open_run(run_dir, given, with_data=False, config=config).plan  # picks the backend
    import keras

    model = load_model(run_dir, plan, len(class_names), config, final=True)
    size = input_size(model, config.model.input_size or config.data.image_size)
    fit = image_files.fit_of(config.data.converted or config.data.path)
    bar = keras.utils.Progbar(len(files), unit_name="photo") \
        if len(files) > CHUNK and sys.stdout.isatty() else None
    kept, probabilities, skipped = _predict_chunks(model, plan, files, size, fit, tta, strict,
                                                   bar, log)
    probabilities = np.concatenate(probabilities) if probabilities else \
        np.zeros((0, len(class_names)), np.float32)
    if offsets is not None:  # decision scores whose argmax is the fitted decision
        probabilities = adjusted(probabilities, offsets)
    rows = photo_table.records(kept, probabilities, class_names, top)
    _report(rows, skipped, len(files), as_json, stdout, csv_path, json_path,
            dict(run=str(run_dir), tta=tta, bias=bias), top, log)
    return rows


def _outputs(run_dir: Path, config, out, as_json: bool, force: bool, inputs: list):
    """(the CSV's path or None, the JSON's or None), checked (`runs.outputs.output_path`)."""
    # --json --out P.json: the CSV beside it (P.csv), not first written there and replaced.
    csv_out = Path(out).with_suffix(".csv") if as_json and out is not None and \
        Path(out).suffix == ".json" else out
    csv_path = output_path(run_dir, csv_out, force, inputs, config) if out is not None \
        else None
    json_path = output_path(run_dir, csv_path.with_suffix(".json"), force, inputs, config) \
        if as_json and csv_path is not None else None
    return csv_path, json_path


def _predict_chunks(model, plan, files: list, size: int, fit, tta: int, strict: bool, bar,
                    log) -> tuple[list, list, dict]:
    """(the photos read, their probabilities a chunk at a time, path -> why for those
    skipped): `files` decoded and predicted `CHUNK` at a time; `strict`: a file that does not
    decode is an error."""
    from corolla.scoring.batched import predict_images

    kept, probabilities, skipped = [], [], {}
    for start in range(0, len(files), CHUNK):
        check_stop()
        chunk = files[start:start + CHUNK]
        images, failed = image_files.read_many(chunk, size, fit)
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
    return kept, probabilities, skipped


def _report(rows: list, skipped: dict, given: int, as_json: bool, stdout: bool, csv_path,
            json_path, about: dict, top: int, log) -> None:
    """The rows as a table (a few), on stdout, in the CSV and JSON files; the skipped files
    listed last. No row: an error, and no file written. `about`: the run, tta and bias the
    JSON records."""
    if not rows:  # no file is written: a script must not take a header-only CSV for success
        for line in photo_table.skipped_lines(skipped):
            log(line)
        raise UserError(f"none of the {given} photo(s) given could be read (listed "
                        f"above); nothing was predicted")
    if len(rows) <= TABLE_MAX:
        for line in photo_table.table(rows):
            log(line)
    if stdout:
        sys.stdout.write(photo_table.json_text(rows, skipped, **about) if as_json else
                         photo_table.csv_text(rows))
    if csv_path is not None:
        log(f"wrote {photo_table.write_csv(rows, csv_path)} ({len(rows)} photos, top {top})")
    if json_path is not None:
        written = photo_table.write_json(rows, skipped, json_path, **about)
        log(f"wrote {written}")
    for line in photo_table.skipped_lines(skipped):
        log(line)
