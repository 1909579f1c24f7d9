"""`corolla check-submission`: a submission CSV checked against a data set's test split."""

from __future__ import annotations

from corolla.errors import UserError
from corolla.report import submission


def check_submission(file: str, data: str, log=print) -> None:
    """Header id,label, every test id once, labels in the class range; a UserError listing
    the problems otherwise."""
    from corolla.data import datasets, pipeline

    layout = datasets.open_data(data)
    test_ids = pipeline.metadata(layout.split("test"))["ids"]
    problems = submission.check(file, test_ids, len(layout.class_names))
    if problems:
        raise UserError(submission.problems_text(file, problems))
    log(f"{file}: OK, {submission.row_count(file)} rows: every test id of "
        f"{layout.size_dir} once, labels in [0, {len(layout.class_names)})")
