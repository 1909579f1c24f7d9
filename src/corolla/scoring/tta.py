"""Test-time augmentation: N views of every image, whose class probabilities are averaged.

View 0 is the image as it is, view 1 its horizontal flip, views 2, 3, ... a small zoom, shift
and rotation (the training augmentation's geometry at low strength), on the flipped image for
odd views. The views are vectorised functions on whole batches, applied inside `tf.data` with
TensorFlow ops only, so they run before any model, on either Keras backend.

Every image's parameters come from a table drawn once per view from a fixed seed and indexed
by the image's place in the split: view k of an image is the same whatever the batch size, the
number of replicas or the order tf.data runs its maps in, so a TTA prediction is deterministic.
(Keras' RandomZoom / RandomTranslation / RandomRotation draw from a seed generator advanced on
every call: a view would then depend on the batch the image lands in.) The warp is the op those
layers use on TensorFlow, ImageProjectiveTransformV3, with their default reflect fill.
"""

from __future__ import annotations

import math

import numpy as np

from corolla.errors import UserError

NO_TTA = 1  # views: the image itself, no test-time augmentation (every `tta=` default)
MAX_VIEWS = 32  # beyond this the mean no longer moves; more is a typo
SEED = 104  # fixed: the same views in every run, on every machine

# Low strength (the public notebooks train with zoom 1 +/- 0.1, shifts of 3%, rotations of 15
# degrees, times N(0, 1)): zoom in by up to 10%, shift by up to 5% of the side, rotate by up to
# 10 degrees, each uniform.
ZOOM = 0.1
SHIFT = 0.05
ROTATION = 10.0  # degrees


def check_views(views: int, flag: str = "--tta") -> int:
    """The number of views, or a UserError naming the flag."""
    if isinstance(views, bool) or not isinstance(views, (int, np.integer)) or \
            not 1 <= views <= MAX_VIEWS:
        raise UserError(f"{flag} must be a number of views from 1 (no augmentation) to "
                        f"{MAX_VIEWS}, got {views!r}")
    return int(views)


def flipped(view: int) -> bool:
    return view % 2 == 1


def view_name(view: int) -> str:
    if view == 0:
        return "the plain images"
    warp = view >= 2
    return " + ".join(["flipped"] * flipped(view) + ["zoomed, shifted, rotated"] * warp)


def parameters(view: int, count: int, seed: int = SEED) -> np.ndarray:
    """float32 [count, 4]: (zoom >= 1, shift x, shift y as fractions of the side, angle in
    radians) of each image of a split of `count` images; the identity for views 0 and 1."""
    if view < 2:
        return np.tile(np.array([1, 0, 0, 0], np.float32), (count, 1))
    rng = np.random.default_rng([seed, view])
    return np.stack([rng.uniform(1, 1 + ZOOM, count),
                     rng.uniform(-SHIFT, SHIFT, count), rng.uniform(-SHIFT, SHIFT, count),
                     rng.uniform(-1, 1, count) * math.radians(ROTATION)],
                    axis=1).astype(np.float32)


def transform(images, view: int, params):
    """[B, H, W, 3] in [0, 255] -> view `view` of each image (same shape and range); the
    plain and flipped views keep the dtype (uint8 from `pipeline.eval_dataset`), warped views
    are float32; `params`: [B, 4] rows of `parameters`."""
    import tensorflow as tf  # here: the command checks --tta before a backend is chosen

    images = tf.convert_to_tensor(images)
    if flipped(view):
        images = tf.reverse(images, axis=[2])
    if view < 2:
        return images
    images = tf.cast(images, tf.float32)
    from corolla.data.augment import affine_matrices

    params = tf.convert_to_tensor(params, tf.float32)
    zoom, dx, dy, angle = tf.unstack(params, axis=1)
    size = tf.cast(tf.shape(images)[1], tf.float32)  # square, as every image here
    zeros = tf.zeros_like(zoom)
    # Training's warp (no shear, the same zoom both ways; the flip was done above), as the
    # first 6 of the 8 numbers of a projective transform.
    matrices = affine_matrices(size, angle, zeros, zoom, zoom, dy * size, dx * size, 1.0)
    transforms = tf.concat([tf.reshape(matrices, [-1, 6]), tf.zeros([tf.shape(zoom)[0], 2])],
                           axis=1)
    warped = tf.raw_ops.ImageProjectiveTransformV3(
        images=images, transforms=transforms, output_shape=tf.shape(images)[1:3],
        fill_value=0.0, interpolation="BILINEAR", fill_mode="REFLECT")
    # Bilinear weights sum to 1, but float rounding may step a hair outside [0, 255].
    return tf.ensure_shape(tf.clip_by_value(warped, 0.0, 255.0), images.shape)


def apply_view(batches, view: int, count: int, batch: int, seed: int = SEED):
    """`batches` of images (every batch but the last exactly `batch` images, in the split's
    order, as `pipeline.eval_dataset` yields them) -> their view `view`. Images past `count`
    (the padding of the last batch) take the last image's parameters: their rows are dropped."""
    import tensorflow as tf

    if view == 0:
        return batches
    table = tf.constant(parameters(view, max(count, 1), seed))

    def one(index, images):
        rows = tf.minimum(index * batch + tf.range(tf.shape(images)[0], dtype=tf.int64),
                          max(count, 1) - 1)
        return transform(images, view, tf.gather(table, rows))

    return batches.enumerate().map(one, num_parallel_calls=tf.data.AUTOTUNE)
