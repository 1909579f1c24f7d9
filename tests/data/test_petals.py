"""Tests for the synthetic petals generator behind the offline ``corolla demo``."""

from __future__ import annotations

import numpy as np
import pytest

from corolla.data.synthetic.petals import CLASS_NAMES, draw_flower, generate


def test_class_names_are_unique_and_plenty():
    assert len(CLASS_NAMES) >= 10
    assert len(set(CLASS_NAMES)) == len(CLASS_NAMES)
    assert all(isinstance(name, str) and name for name in CLASS_NAMES)


@pytest.mark.parametrize("size", [16, 32])
def test_shapes_and_dtypes(size):
    images, labels = generate(12, image_size=size, seed=3)
    assert images.shape == (12, size, size, 3)
    assert images.dtype == np.uint8
    assert labels.shape == (12,)
    assert labels.dtype == np.int64
    assert images.std() > 10  # not a blank canvas


def test_draw_flower_returns_one_rgb_image():
    image = draw_flower(np.random.default_rng(0), 0, 24)
    assert image.shape == (24, 24, 3)
    assert image.dtype == np.uint8
    assert image.flags.c_contiguous


def test_deterministic_for_same_arguments():
    a_images, a_labels = generate(20, image_size=16, seed=7)
    b_images, b_labels = generate(20, image_size=16, seed=7)
    np.testing.assert_array_equal(a_images, b_images)
    np.testing.assert_array_equal(a_labels, b_labels)


def test_different_seed_gives_different_images():
    a_images, _ = generate(20, image_size=16, seed=0)
    b_images, _ = generate(20, image_size=16, seed=1)
    assert not np.array_equal(a_images, b_images)


def test_labels_balanced_and_in_range():
    n = 2 * len(CLASS_NAMES) + 3
    _, labels = generate(n, image_size=16, seed=0)
    counts = np.bincount(labels, minlength=len(CLASS_NAMES))
    assert labels.min() >= 0 and labels.max() < len(CLASS_NAMES)
    assert counts.max() - counts.min() <= 1
    assert not np.array_equal(labels, np.sort(labels))  # shuffled, not in blocks


def test_fewer_classes():
    _, labels = generate(30, image_size=16, seed=0, num_classes=3)
    np.testing.assert_array_equal(np.bincount(labels), [10, 10, 10])


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"n": 10, "num_classes": len(CLASS_NAMES) + 1}, str(len(CLASS_NAMES) + 1)),
        ({"n": 10, "num_classes": 1}, "1"),
        ({"n": 10, "image_size": 15}, "15"),
        ({"n": 0}, "0"),
        ({"n": -4}, "-4"),
        ({"n": 2.5}, "2.5"),
    ],
)
def test_invalid_arguments_name_the_value(kwargs, bad):
    n = kwargs.pop("n")
    with pytest.raises(ValueError, match=rf"got {bad}\b"):
        generate(n, **kwargs)


def test_draw_flower_rejects_unknown_label():
    with pytest.raises(ValueError, match=rf"got {len(CLASS_NAMES)}\b"):
        draw_flower(np.random.default_rng(0), len(CLASS_NAMES), 32)


def test_classes_look_different():
    """Per-class mean images differ: each class draws its own flower, not noise."""
    images, labels = generate(50, image_size=32, seed=0, num_classes=5)
    means = np.stack([images[labels == c].mean(axis=0) for c in range(5)])
    for i in range(5):
        for j in range(i + 1, 5):
            assert np.abs(means[i] - means[j]).mean() > 3.0, (CLASS_NAMES[i], CLASS_NAMES[j])
