"""Outputs that belong nowhere but where they are asked for: a folder merely holding photos is no
data set; class folders are."""

import pytest

from corolla.errors import UserError
from corolla.runs import paths
from helpers.images import pictures


def test_a_folder_that_merely_holds_photos_is_no_data_set(tmp_path):
    """A home folder with a screenshot in it, and Pictures/ and Desktop/ beside each other, do
    not make every output below them refused; a class folder (or a new class beside class
    folders) does."""
    from corolla.runs import outputs

    home = tmp_path / "home"
    pictures(home, ["screenshot"])
    pictures(home / "Pictures")
    pictures(home / "Desktop")
    (home / "work").mkdir()
    run = tmp_path / "runs" / "s1"
    for target in (home / "work" / "scores", home / "scores", tmp_path / "scores"):
        outputs.refuse_foreign(target, run, images=True)  # no refusal
    for name in ("eval-a", "eval-b"):  # evaluations side by side: their pictures are no class
        pictures(tmp_path / "results" / name)
        (tmp_path / "results" / name / paths.METRICS).write_text("{}")
    outputs.refuse_foreign(tmp_path / "results" / "eval-c", run, images=True)
    outputs.refuse_foreign(home / "Pictures" / "scores", run, images=True)
    data = tmp_path / "flowers"  # class folders only: a data set
    pictures(data / "daisy")
    pictures(data / "tulip")
    for target in (data / "daisy" / "scores", data / "scores", data / "daisy"):
        with pytest.raises(UserError, match=f"is inside {data}.*, which holds a data set's"):
            outputs.refuse_foreign(target, run, images=True)
