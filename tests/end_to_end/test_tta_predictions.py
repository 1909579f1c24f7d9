"""Test-time augmentation end to end, on the shared tiny run: `predict --tta N` writes the mean of
the views (computed here independently, the whole split in one batch), on one replica and on two;
`evaluate --tta` says so in its metrics."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from corolla.cli import main
from corolla.evaluation import predictions
from corolla.scoring import tta
from corolla.report import submission
from corolla.runs import paths
from helpers.processes import REPO, run_python


@pytest.fixture(scope="module")
def expected(tiny_run):
    """(model's run, test ids, the 3-view mean computed independently: every view of the whole
    test split as one batch, through the model)."""
    from corolla import runtime

    plan = runtime.detect()
    from corolla.evaluation import inference
    from corolla.data import pipeline

    run = tiny_run
    data = inference.open_run(run, plan=plan).layout
    split = data.split("test")
    ids = pipeline.metadata(split)["ids"]
    images = np.stack([e["image"].numpy() for e in pipeline.read(split, data.image_size,
                                                                 ordered=True)])
    images = images.astype(np.float32)
    model = inference.load_model(run, plan, len(data.class_names))
    views = [model.predict(tta.transform(images, v, tta.parameters(v, len(images))),
                           verbose=0) for v in range(3)]
    return run, ids, np.mean(views, axis=0), views[0]


def _check(run, out, ids, mean):
    saved = predictions.load(paths.predictions_file(run, "test"))
    assert saved.tta == 3 and list(saved.ids) == ids
    np.testing.assert_allclose(saved.probabilities, mean, rtol=1e-5, atol=1e-6)
    assert submission.check(out, ids, 4) == []
    assert list(submission.read(out).values()) == mean.argmax(axis=1).tolist()


@pytest.mark.slow
def test_predict_tta_writes_the_mean_of_the_views(expected, tmp_path, capsys):
    source, ids, mean, plain = expected
    run = shutil.copytree(source, tmp_path / "run")
    out = tmp_path / "sub.csv"
    # Global batch 3: 20 test images, a padded last batch.
    assert main(["predict", str(run), "--tta", "3", "--batch-size", "3", "--out", str(out)]) == 0
    _check(run, out, ids, mean)
    assert not np.allclose(mean, plain)  # the views changed something
    printed = capsys.readouterr().out
    assert "view 3 of 3: zoomed, shifted, rotated" in printed and "mean of 3 views" in printed


@pytest.mark.slow
def test_evaluate_tta_says_so_in_its_metrics(expected, tmp_path):
    import json

    run = shutil.copytree(expected[0], tmp_path / "run")
    assert main(["evaluate", str(run), "--tta", "2"]) == 0
    assert json.loads((run / paths.METRICS).read_text())["tta"] == 2
    assert predictions.load(paths.predictions_file(run, "val")).tta == 2


@pytest.mark.slow
def test_predict_tta_on_two_replicas_gives_the_same_mean(expected, tmp_path):
    """MirroredStrategy over 2 CPU devices, global batch 6: 20 images, a padded last batch."""
    source, ids, mean, _ = expected
    run = shutil.copytree(source, tmp_path / "run")
    out = tmp_path / "sub.csv"
    code = (
        "import tensorflow as tf\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "tf.config.set_logical_device_configuration(cpu, "
        "[tf.config.LogicalDeviceConfiguration()] * 2)\n"
        "from corolla import runtime\n"
        "plan = runtime.detect(strategy='mirrored', batch_size=3)\n"
        "print('PLAN', plan.replicas, plan.inference_batch, flush=True)\n"
        "from corolla.cli import main\n"
        f"raise SystemExit(main(['predict', {str(run)!r}, '--tta', '3', '--batch-size', '3', "
        f"'--strategy', 'mirrored', '--out', {str(out)!r}]))\n")
    done = run_python(code, env={"KERAS_BACKEND": "tensorflow"}, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "PLAN 2 6" in done.stdout, done.stdout
    _check(run, out, ids, mean)
