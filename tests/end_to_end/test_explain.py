"""Why it decided, on a trained run: `corolla evaluate` adds the Grad-CAM heatmaps to the report,
and `corolla explain` writes one picture per photo."""

from __future__ import annotations

import shutil

import pytest
from PIL import Image

from corolla.cli import main


@pytest.fixture(scope="module")
def fold(tiny_kfold, tmp_path_factory):
    """A copy of a small trained run (small_cnn: a nested backbone), to write into."""
    copy = tmp_path_factory.mktemp("gradcam") / "fold-1"
    shutil.copytree(tiny_kfold / "fold-1", copy)
    return copy


def test_evaluate_writes_explanations_into_the_report(fold):
    assert main(["evaluate", str(fold)]) == 0
    picture = fold / "explanations.png"
    assert picture.is_file() and Image.open(picture).size[0] > 300
    assert "Why it decided (Grad-CAM)" in (fold / "report.html").read_text()


def test_explain_writes_one_picture_per_photo_and_keeps_them(fold, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    Image.new("RGB", (50, 40), (200, 30, 90)).save(photos / "a.jpg")
    Image.new("L", (20, 20), 128).save(photos / "b.png")
    out = tmp_path / "why"
    assert main(["explain", str(fold), str(photos), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".corolla-explain", "a.png", "b.png"]
    assert "%" in capsys.readouterr().out  # each photo's top classes, said
    assert main(["explain", str(fold), str(photos / "a.jpg"), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


def test_explain_of_nothing_readable_is_an_error(fold, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "fake.jpg").write_bytes(b"not a jpeg")
    assert main(["explain", str(fold), str(photos), "--out", str(tmp_path / "why")]) == 2
    captured = capsys.readouterr()
    assert "fake.jpg" in captured.out and captured.err.strip() == (
        "corolla: error: none of the 1 image(s) given could be read (listed above); nothing "
        "was explained")
