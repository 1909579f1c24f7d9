"""`corolla check-data --data D`: duplicates within and across splits, class counts and
imbalance, image sizes, files that do not decode (`corolla.data.audit.survey`); and the check that
`corolla train` runs once per data set, said in one line."""

from __future__ import annotations

from pathlib import Path

from corolla.data.audit import findings, survey
from corolla.errors import UserError
from corolla.files import write_json
from corolla.runs import paths


def _strict_error(result: survey.Survey, data: str) -> UserError:
    leaked = ", ".join(f"{n} {split}" for split, n in result.leaked().items())
    return UserError(f"{len(result.across())} group(s) of duplicates span the splits of {data} "
                     f"({leaked} image(s) with a copy in another split) and --strict makes "
                     f"that an error; list them with `corolla check-data --data {data}`, then "
                     f"remove the copies (or convert the source again: corolla convert keeps "
                     f"copies in one split)")


def check_data(data: str, out: str | Path | None = None, strict: bool = False,
               log=print) -> dict:
    """Checks `data` (cached by its key: an unchanged data set is not read again), prints the
    table and returns the summary; `out`: a new JSON file with everything found (every group
    of duplicates with its ids and paths). `strict`: copies across splits are an error."""
    from corolla.data import datasets

    if not data:
        raise UserError("no data given; pass --data with a TFRecord layout, an image folder "
                        "or a CSV of path,label")
    if out is not None and Path(out).exists():
        raise UserError(f"{out} already exists; check-data never overwrites: remove it or "
                        f"choose another --out")
    result, was_cached = survey.cached(data, datasets.checks_dir(), log=log)
    if was_cached:
        log(f"data check of {data} from the cache {datasets.checks_dir()} (the data is "
            f"unchanged since it was checked)")
    for line in findings.check_table(result):
        log(line)
    summary = result.summary()
    if out is not None:
        write_json(summary, out)
        log(f"wrote {out}")
    if strict and result.across():
        raise _strict_error(result, data)
    return summary


def for_training(data: str, features=None, strict: bool = False, log=print,
                 skip_bad_records: bool = False) -> dict | None:
    """The check `corolla train` runs before training: once per data set (cached), one line;
    with `strict`, copies across splits are an error. Data that is no data at all (no images,
    a CSV without labels) is an error, said once. A file the check cannot read (a damaged
    one) is the error training would end with, said now; with `skip_bad_records`, said in one
    line and left to training, which skips its damaged records: None then."""
    from corolla.data import datasets

    try:
        result, _ = survey.cached(data, datasets.checks_dir(), features, log=log)
    except survey.Unreadable as e:
        if not skip_bad_records:
            raise
        log(f"data check: not done ({e})")
        return None
    log(findings.one_line(result, f"corolla check-data --data {data}"))
    if strict and result.across():
        raise _strict_error(result, data)
    return result.summary()


def save_with_run(run_dir: str | Path, summary: dict) -> Path:
    """The run's copy of its data check (report.html shows it)."""
    return write_json(summary, Path(run_dir) / paths.DATA_CHECK)
