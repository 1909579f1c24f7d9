"""Test-time augmentation: the views (`corolla.evaluation.tta`) and `corolla predict --tta N`,
whose probabilities must be the mean of the single views' (computed here independently, the
whole split in one batch), on one device and on two replicas with a padded last batch."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from helpers.processes import REPO, run_python

from corolla.cli import main
from corolla.errors import UserError
from corolla.evaluation import predictions, tta
from corolla.report import scored
from corolla.report import submission


def _images(n: int = 5, size: int = 24, seed: int = 0) -> np.ndarray:
    """Smooth, asymmetric images (a horizontal ramp plus a bump): a flip or a small warp
    changes them measurably, a large one a lot."""
    y, x = np.mgrid[0:size, 0:size] / (size - 1)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        cx, cy = rng.uniform(0.2, 0.8, 2)
        bump = np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / 0.05)
        out.append(np.stack([255 * x, 255 * bump, 128 + 100 * (y - 0.5)], axis=-1))
    return np.asarray(out, np.float32)


def test_view_zero_is_the_image_and_view_one_its_exact_flip():
    x = _images()
    np.testing.assert_array_equal(tta.transform(x, 0, tta.parameters(0, 5)).numpy(), x)
    np.testing.assert_array_equal(tta.transform(x, 1, tta.parameters(1, 5)).numpy(),
                                  x[:, :, ::-1])


@pytest.mark.parametrize("view", [2, 3, 31])
def test_augmented_views_are_deterministic_small_and_keep_shape_dtype_and_range(view):
    x = _images()
    first = tta.transform(x, view, tta.parameters(view, 5)).numpy()
    again = tta.transform(x, view, tta.parameters(view, 5)).numpy()
    np.testing.assert_array_equal(first, again)  # same seed, same output
    assert first.shape == x.shape and first.dtype == np.float32
    assert 0 <= first.min() and first.max() <= 255
    base = x[:, :, ::-1] if view % 2 else x  # odd views warp the flip
    other = x if view % 2 else x[:, :, ::-1]
    change = np.abs(first - base).mean(axis=(1, 2, 3))
    assert (change > 0.5).all()  # every image is warped...
    assert (change < 0.4 * np.abs(other - base).mean(axis=(1, 2, 3))).all()  # ...gently
    assert not np.array_equal(tta.parameters(view, 5), tta.parameters(view + 1, 5))


def test_an_images_view_does_not_depend_on_its_batch():
    """Parameters follow the image's place in the split: batch 3 with a padded last batch, and
    the whole split in one batch, give every image the same view."""
    import tensorflow as tf

    x = _images(7)
    padded = np.concatenate([x, np.zeros_like(x[:2])])  # 9 = 3 batches of 3

    def views(images, batch):
        ds = tf.data.Dataset.from_tensor_slices(images).batch(batch)
        return np.concatenate([b.numpy() for b in tta.apply(ds, 3, 7, batch)])[:7]

    np.testing.assert_array_equal(views(padded, 3), views(x, 7))
    np.testing.assert_array_equal(views(x, 7), tta.transform(x, 3, tta.parameters(3, 7)))


def test_a_number_of_views_out_of_range_is_one_line(capsys):
    for bad in ("0", "33", "-1"):
        assert main(["predict", "runs/none", "--tta", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--tta must be a number of views from 1" in err, err
    with pytest.raises(UserError, match="from 1 .* to 32, got 40"):
        tta.check(40)


def test_saved_predictions_record_their_views_and_old_files_read_as_one(tmp_path):
    path = scored.save_predictions(predictions.path_in(tmp_path, "test"), ["a", "b"], None,
                                   np.eye(2), ["x", "y"], tta=3)
    assert predictions.load(path).tta == 3
    old = tmp_path / "old.npz"  # written before the field existed
    np.savez(old, ids=np.array(["a", "b"]), labels=np.array([-1, -1]),
             probabilities=np.eye(2, dtype=np.float32), class_names=np.array(["x", "y"]))
    assert predictions.load(old).tta == 1


# End to end, on a fold of the shared tiny k-fold run (a small trained model).

@pytest.fixture(scope="module")
def expected(tiny_kfold):
    """(model's run, test ids, the 3-view mean computed independently: every view of the whole
    test split as one batch, through the model)."""
    from corolla import runtime

    plan = runtime.detect()
    from corolla.evaluation import inference
    from corolla.data import pipeline

    run = tiny_kfold / "fold-1"
    _, _, data = inference.open_run(run)
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
    saved = predictions.load(run / "predictions" / "test.npz")
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
    assert json.loads((run / "metrics.json").read_text())["tta"] == 2
    assert predictions.load(run / "predictions" / "val.npz").tta == 2


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
