"""Test-time augmentation: the views (`corolla.scoring.tta`): exact for views 0 and 1, small
and deterministic for the others, independent of the batch; the number of views checked; saved
predictions record their views (`predict --tta N` on a run: end_to_end/test_tta_predictions.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corolla.cli import main
from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.scoring import tta
from corolla.report import scored


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
        return np.concatenate([b.numpy() for b in tta.apply_view(ds, 3, 7, batch)])[:7]

    np.testing.assert_array_equal(views(padded, 3), views(x, 7))
    np.testing.assert_array_equal(views(x, 7), tta.transform(x, 3, tta.parameters(3, 7)))


def test_a_number_of_views_out_of_range_is_one_line(capsys):
    for bad in ("0", "33", "-1"):
        assert main(["predict", "runs/none", "--tta", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--tta must be a number of views from 1" in err, err
    with pytest.raises(UserError, match="from 1 .* to 32, got 40"):
        tta.check_views(40)


def test_saved_predictions_record_their_views_and_old_files_read_as_one(tmp_path):
    path = scored.save_predictions(predictions.path_in(tmp_path, "test"), ["a", "b"], None,
                                   np.eye(2), ["x", "y"], tta=3)
    assert predictions.load(path).tta == 3
    old = tmp_path / "old.npz"  # written before the field existed
    np.savez(old, ids=np.array(["a", "b"]), labels=np.array([-1, -1]),
             probabilities=np.eye(2, dtype=np.float32), class_names=np.array(["x", "y"]))
    assert predictions.load(old).tta == 1
