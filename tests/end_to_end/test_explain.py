"""Why it decided, on a trained run: `corolla evaluate` adds the Grad-CAM heatmaps to the report,
and `corolla explain` writes one picture per photo."""

from __future__ import annotations

from PIL import Image

from corolla.cli import main
from corolla.runs import paths


def test_evaluate_writes_explanations_into_the_report(tiny_run_copy):
    """The shared tiny run (small_cnn: a nested backbone), evaluated again on a copy."""
    run = tiny_run_copy
    assert main(["evaluate", str(run)]) == 0
    picture = run / paths.EXPLANATIONS
    assert picture.is_file() and Image.open(picture).size[0] > 300
    assert "Why it decided (Grad-CAM)" in (run / paths.REPORT).read_text()


def test_explain_writes_one_picture_per_photo_and_keeps_them(tiny_run, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    Image.new("RGB", (50, 40), (200, 30, 90)).save(photos / "a.jpg")
    Image.new("L", (20, 20), 128).save(photos / "b.png")
    out = tmp_path / "why"
    assert main(["explain", str(tiny_run), str(photos), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".corolla-explain", "a.png", "b.png"]
    assert "%" in capsys.readouterr().out  # each photo's top classes, said
    assert main(["explain", str(tiny_run), str(photos / "a.jpg"), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


def test_explain_of_nothing_readable_is_an_error(tiny_run, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "fake.jpg").write_bytes(b"not a jpeg")
    assert main(["explain", str(tiny_run), str(photos), "--out", str(tmp_path / "why")]) == 2
    captured = capsys.readouterr()
    assert "fake.jpg" in captured.out and captured.err.strip() == (
        "corolla: error: none of the 1 image(s) given could be read (listed above); nothing "
        "was explained")
