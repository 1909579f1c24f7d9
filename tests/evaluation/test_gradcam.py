"""Why it decided: Grad-CAM on the run's own model. On a model whose answer depends on a known
region of the image, the heatmap's peak lies in that region (the report and `corolla explain`:
end_to_end/test_explain.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corolla.errors import UserError
from corolla.evaluation import gradcam


SIZE, SQUARE = 32, 8


def _square_model():
    """Answers "a red square is there" (class 1) from a map of red brightness: a 1x1
    convolution that fires on red over 100, pooled to 8x8, averaged, then a Dense layer."""
    import keras

    inputs = keras.Input((SIZE, SIZE, 3))
    x = keras.layers.Conv2D(1, 1, activation="relu", name="red")(inputs)
    x = keras.layers.MaxPooling2D(4, name="cells")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = keras.layers.Dense(2, activation="softmax", name="probabilities")(x)
    model = keras.Model(inputs, outputs)
    model.get_layer("red").set_weights([np.array([1, -1, -1], np.float32).reshape(1, 1, 3, 1),
                                        np.array([-100.0], np.float32)])
    model.get_layer("probabilities").set_weights([np.array([[-0.5, 0.5]], np.float32),
                                                  np.array([1.0, -1.0], np.float32)])
    return model


def _images(n: int, seed: int = 0):
    """Dark noise with a bright red square at a random place: (images, square corners)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 60, (n, SIZE, SIZE, 3)).astype(np.float32)
    corners = rng.integers(0, SIZE - SQUARE + 1, (n, 2))
    for image, (r, c) in zip(images, corners):
        image[r:r + SQUARE, c:c + SQUARE] = (250, 20, 20)
    return images, corners


def test_the_heatmaps_peak_lies_in_the_region_the_answer_depends_on():
    model = _square_model()
    images, corners = _images(12)
    maps, probabilities, classes = gradcam.heatmaps(model, images)
    assert (classes == 1).all() and (probabilities[:, 1] > 0.5).all()
    assert maps.shape == (12, SIZE, SIZE) and maps.min() >= 0 and maps.max() <= 1
    for heat, (r, c) in zip(maps, corners):
        peak = np.unravel_index(heat.argmax(), heat.shape)
        # The map's cells are 4 px: the peak lies in the square, up to one cell's blur.
        assert r - 4 <= peak[0] < r + SQUARE + 4 and c - 4 <= peak[1] < c + SQUARE + 4
        assert heat[r:r + SQUARE, c:c + SQUARE].mean() > 2 * heat.mean()


def test_a_model_with_no_spatial_map_is_one_line():
    import keras

    inputs = keras.Input((SIZE, SIZE, 3))
    x = keras.layers.GlobalAveragePooling2D()(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(x))
    with pytest.raises(UserError, match="no spatial feature map"):
        gradcam.explainer(model)
