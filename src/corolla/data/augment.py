"""Training-time augmentation: small pure functions on one image, usable eagerly and inside
`Dataset.map`. Images are float32 in [0, 255] (the models rescale them themselves)."""

from __future__ import annotations

import tensorflow as tf


def random_flip(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    return tf.image.stateless_random_flip_left_right(image, seed)


def random_zoom_crop(image: tf.Tensor, seed: tf.Tensor, max_zoom: float = 1.2) -> tf.Tensor:
    """Zooms in by up to `max_zoom` and crops back to the input size at a random place."""
    size = tf.shape(image)[0]
    zoom = tf.random.stateless_uniform([], seed, 1.0, max_zoom)
    zoomed = tf.cast(tf.cast(size, tf.float32) * zoom, tf.int32)
    image = tf.image.resize(image, [zoomed, zoomed])
    crop = tf.image.stateless_random_crop(image, [size, size, 3], seed + 1)
    return crop


def random_colour(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    image = tf.image.stateless_random_brightness(image, 0.1 * 255, seed)
    image = tf.image.stateless_random_contrast(image, 0.85, 1.15, seed + 2)
    image = tf.image.stateless_random_saturation(image, 0.85, 1.15, seed + 3)
    return tf.clip_by_value(image, 0.0, 255.0)


def augment(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """float32 [S, S, 3] in [0, 255] -> the same, randomly flipped, zoomed and recoloured.
    `seed` is a shape-[2] int tensor: the same seed gives the same result (reproducible runs)."""
    seeds = tf.random.experimental.stateless_split(seed, 3)
    image = random_flip(image, seeds[0])
    image = random_zoom_crop(image, seeds[1])
    image = random_colour(image, seeds[2])
    return tf.ensure_shape(image, image.shape)
