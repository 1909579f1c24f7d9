"""`corolla train --data FOLDER`: the folder converted once into the cache, at the size the run
reads; a run (and a k-fold run) keeps its split when its source folder changes."""

from __future__ import annotations

import os
import shutil

import pytest

from corolla.cli import main
from corolla.data import datasets
from corolla.runs import paths
from helpers.images import PHOTO_CLASSES as CLASSES


def test_train_on_a_folder_converts_once_into_the_cache(photos, tmp_path, monkeypatch,
                                                        capsys, train_tiny):
    root = shutil.copytree(photos[0], tmp_path / "photos")  # a copy this test may change
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    run = train_tiny(tmp_path / "runs", "--image-size", "16", "--batch-size", "4", data=root,
                     name="f")
    printed = capsys.readouterr().out
    # Converted by the training step; the evaluation after it reads the cache, said once.
    assert printed.count("data: converting") == 1
    assert printed.count("unchanged since its conversion") == 1
    # No test split: said of the folder the user named (not the cache), with what to do.
    assert f"no test split in {root}: no submission.csv written; predict new photos with " \
        f"`corolla predict {run} PHOTOS`" in printed
    config = (run / paths.CONFIG).read_text()
    cached = list((tmp_path / "cache" / "converted").iterdir())
    assert len(cached) == 1
    assert f'path = "{root}"' in config and f'converted = "{cached[0]}"' in config
    assert (run / paths.CLASSES).read_text().splitlines() == list(CLASSES)
    assert (run / paths.METRICS).is_file()
    # The same files: the cache is reused. A file touched: converted again.
    assert datasets.open_data(str(root), 16, log=print).root == str(cached[0])
    assert "converting" not in capsys.readouterr().out
    os.utime(root / "aster" / "00.jpg", ns=(1, 1))
    again = datasets.open_data(str(root), 16, log=print)
    assert "converting" in capsys.readouterr().out and again.root != str(cached[0])


@pytest.mark.slow
def test_a_run_keeps_its_split_when_its_source_folder_changes(photos, tmp_path, monkeypatch,
                                                              capsys, train_tiny):
    """A photo added after training must not re-split the folder under a run: evaluate reads
    the conversion the run recorded (and says the source changed), resume trains on it; with
    that conversion gone, a changed source is refused and the run's files are kept."""
    import json
    import shutil

    from corolla import config as config_lib
    from corolla import runtime, training
    from corolla.evaluation import predictions

    root = shutil.copytree(photos[0], tmp_path / "photos")  # a copy this test may change
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    run = train_tiny(tmp_path / "runs", "--image-size", "16", "--batch-size", "4", data=root,
                     name="f")
    val = predictions.load(paths.predictions_file(run, "val"))
    recorded = config_lib.load_config(run / paths.CONFIG).data.converted
    capsys.readouterr()

    shutil.copyfile(root / "aster" / "00.jpg", root / "aster" / "99.jpg")  # one photo more
    assert main(["evaluate", str(run)]) == 0
    printed = capsys.readouterr().out
    assert f"data: {root} changed since this run was trained; the run keeps its own split: " \
           f"reading its conversion {recorded}" in printed
    assert "converting" not in printed
    again = predictions.load(paths.predictions_file(run, "val"))
    assert again.ids == val.ids and again.labels.tolist() == val.labels.tolist()
    assert [p.name for p in (tmp_path / "cache" / "converted").iterdir()] == \
        [os.path.basename(recorded)]  # nothing converted again
    # A resumed run reads the same conversion (its next epochs train on its own split).
    cfg = config_lib.load_config(run / paths.CONFIG)
    _, data = training.resolve(cfg, runtime.detect_for(cfg), resume=True)
    assert data.root == recorded and data.source == str(root)

    # The conversion gone and the source changed: one line, and the run's record untouched.
    metrics = (run / paths.METRICS).read_text()
    shutil.rmtree(recorded)
    assert main(["evaluate", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is gone and" in err and "changed since the run was " \
        "trained" in err
    assert (run / paths.METRICS).read_text() == metrics
    # The source as it was: converted again into the same folder, the same split.
    (root / "aster" / "99.jpg").unlink()
    assert main(["evaluate", str(run)]) == 0
    assert predictions.load(paths.predictions_file(run, "val")).ids == val.ids
    assert json.loads((run / paths.METRICS).read_text())["num_examples"] == len(val.ids)


@pytest.mark.slow
@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_a_kfold_run_on_a_folder_keeps_its_folds_when_the_folder_changes(photos, tmp_path,
                                                                         monkeypatch, capsys,
                                                                         train_tiny):
    """The same for k-fold: the parent records the conversion, every fold reads it, and a fold
    evaluated after a photo was added scores its own held-out fold."""
    import shutil

    from corolla import config as config_lib
    from corolla.evaluation import predictions

    root = shutil.copytree(photos[0], tmp_path / "photos")
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    parent = train_tiny(tmp_path / "runs", "--image-size", "16", "--folds", "2",
                        "--steps-per-epoch", "1", "--batch-size", "4", data=root, name="k")
    recorded = config_lib.load_config(parent / paths.CONFIG).data.converted
    assert recorded and config_lib.load_config(parent / "fold-2" / paths.CONFIG).data.converted == \
        recorded
    held_out = predictions.load(paths.predictions_file(parent / "fold-1", "val"))
    capsys.readouterr()
    shutil.copyfile(root / "crocus" / "00.jpg", root / "crocus" / "99.jpg")
    assert main(["evaluate", str(parent / "fold-1")]) == 0
    assert "the run keeps its own split" in capsys.readouterr().out
    assert predictions.load(paths.predictions_file(parent / "fold-1", "val")).ids == held_out.ids
