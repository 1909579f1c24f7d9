"""Training-time augmentation on whole batches, inside `tf.data`, by name (see `policies`).

`apply(names, images, labels, seed)` takes a batch of decoded images (uint8 [B,S,S,3]) and gives
uint8 (flip, affine, colour: rounded and saturated in their one kernel; the model's float32 Input
casts on the accelerator), or float32 in [0, 255] when randaugment, mixup or cutmix blend pixels
(`BLENDING`); `crop` happens earlier, while decoding
(`decode_crop`: only the crop's window of the JPEG is decoded). Every draw derives from `seed`
(int64 [2]): the same seed gives the same batch, which makes an epoch's augmentation a function
of (seed, epoch) (see `pipeline.train_dataset`).

On a CPU host the pipeline's augmentation competes with JPEG decoding for the same cores, so
what it costs per image is what the model waits. A cast of the batch to float32 alone costs
about as much as decoding; so the batch stays in bytes, and flip, affine and colour run as one
fused XLA kernel on them (colour in int16 fixed point: XLA's conversions of bytes to floats
are what cost), one read and one write of the batch. Keras' RandomFlip and RandomColorJitter
make several unfused passes over float32, and its RandomRotation / RandomShear / RandomZoom /
RandomTranslation four passes where the notebooks' transform is one bilinear resampling. So
flip, affine and colour are hand-written; mixup, cutmix and randaugment are Keras' own layers,
driven by stateless seeds (`_Seeds`). (`corolla bench data` and `python
benchmarks/augment_cost.py` measure it; figures: docs/benchmarks.md#figures-behind-the-defaults.)
"""

from __future__ import annotations

import functools
import math

import tensorflow as tf

from corolla.data import records
from corolla.config.policies import NAMES, NEED_ONE_HOT  # noqa: F401  (re-exported)

# Random resized crop: the fraction of the image's area kept, and the crop's aspect range.
CROP_AREA = (0.35, 1.0)
CROP_ASPECT = (3 / 4, 4 / 3)
# The notebooks' transform: standard deviations of rotation and shear (degrees), zoom, shift
# (fraction of the image size: the notebooks' 16 px at 512... scaled to any size).
ROTATION, SHEAR, ZOOM, SHIFT = 15.0, 5.0, 0.1, 16.0 / 512
# Colour jitter: brightness (of 255), contrast and per-channel gain ranges.
BRIGHTNESS, CONTRAST, CHANNEL_GAIN = 0.1, (0.85, 1.15), (0.93, 1.07)


def _uniform(shape, seed, low=0.0, high=1.0):
    return tf.random.stateless_uniform(shape, seed, low, high)


# ---------------------------------------------------------------------------------------- crop

def crop_window(image_shape: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """[y, x, height, width] of a random crop of an image of `image_shape` ([H, W, C])."""
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        image_shape, tf.zeros([1, 0, 4]), seed, min_object_covered=0.0,
        aspect_ratio_range=CROP_ASPECT, area_range=CROP_AREA, max_attempts=10,
        use_image_if_no_bounding_boxes=True)
    return tf.stack([begin[0], begin[1], size[0], size[1]])


def decode_crop(jpeg: tf.Tensor, image_size: int, seed: tf.Tensor) -> tf.Tensor:
    """JPEG bytes -> uint8 [S, S, 3]: a random crop, decoded alone (rows below it and columns
    beside it are never decoded), resized to S."""
    window = crop_window(tf.image.extract_jpeg_shape(jpeg), seed)
    return records.resize(tf.image.decode_and_crop_jpeg(jpeg, window, channels=3), image_size)


def random_crop(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """The same crop of an image already decoded (uint8 [S, S, 3], e.g. from the cache)."""
    w = crop_window(tf.shape(image), seed)
    return records.resize(tf.image.crop_to_bounding_box(image, w[0], w[1], w[2], w[3]),
                          image.shape[0])


# ------------------------------------------------------------------ flip, affine, colour (XLA)

def affine_matrices(size, rotation, shear, zoom_y, zoom_x, shift_y, shift_x,
                    flip) -> tf.Tensor:
    """[n, 2, 3] from per-image [n] parameters: each output pixel (x, y, 1) -> where to read it
    in an S x S input. The notebooks' transform about the centre: rotation and shear (radians),
    zoom (> 1 enlarges), shift (pixels), with a flip (-1 mirrors, 1 not) folded in. Training's
    random warp and test-time augmentation's views (`corolla.scoring.tta`) are both built
    here."""
    cos, sin = tf.cos(rotation), tf.sin(rotation)
    # Inverse map: undo zoom (divide), then shear and rotation, as the notebooks' matrix does.
    a = (cos / zoom_x) * flip
    b = (sin + cos * tf.tan(shear)) / zoom_y
    d = (-sin / zoom_x) * flip
    e = (cos - sin * tf.tan(shear)) / zoom_y
    c = (size - 1) / 2
    return tf.reshape(tf.stack([a, b, c - a * c - b * c + shift_x,
                                d, e, c - d * c - e * c + shift_y], 1), [-1, 2, 3])


def _affine_matrices(n: tf.Tensor, size: int, seed: tf.Tensor, flip: tf.Tensor) -> tf.Tensor:
    """`affine_matrices` drawn at random, as the notebooks draw them (normal, see ROTATION...)."""
    s = tf.random.experimental.stateless_split(seed, 6)
    deg = math.pi / 180
    return affine_matrices(size, ROTATION * deg * tf.random.stateless_normal([n], s[0]),
                           SHEAR * deg * tf.random.stateless_normal([n], s[1]),
                           1.0 + ZOOM * tf.random.stateless_normal([n], s[2]),
                           1.0 + ZOOM * tf.random.stateless_normal([n], s[3]),
                           SHIFT * size * tf.random.stateless_normal([n], s[4]),
                           SHIFT * size * tf.random.stateless_normal([n], s[5]), flip)


def _resample(images: tf.Tensor, m: tf.Tensor) -> tf.Tensor:
    """Bilinear sampling of uint8 [B,S,S,3] at m @ (x, y, 1) per output pixel -> float32; edge
    pixels repeat outside the image (as the notebooks' clipped indices do). In fixed point:
    positions in 1/65536 px, weights in 1/256, sums in int32, so the result (a multiple of
    1/65536, exact in float32) is the same to the bit under XLA and TensorFlow's kernels, which
    round float arithmetic differently (fused multiply-adds)."""
    n, size = tf.shape(images)[0], images.shape[1]
    one = 1 << 16
    ys, xs = tf.meshgrid(tf.range(size), tf.range(size), indexing="ij")
    q = tf.cast(tf.round(m * one), tf.int32)[:, :, :, None, None]
    top = (size - 1) * one
    sx = tf.clip_by_value(q[:, 0, 0] * xs + q[:, 0, 1] * ys + q[:, 0, 2], 0, top)
    sy = tf.clip_by_value(q[:, 1, 0] * xs + q[:, 1, 1] * ys + q[:, 1, 2], 0, top)
    x0, y0 = tf.bitwise.right_shift(sx, 16), tf.bitwise.right_shift(sy, 16)
    # The fraction in 1/256 (rounded down), beside each channel.
    ax = tf.bitwise.right_shift(tf.bitwise.bitwise_and(sx, one - 1), 8)[..., None]
    ay = tf.bitwise.right_shift(tf.bitwise.bitwise_and(sy, one - 1), 8)[..., None]
    x1, y1 = tf.minimum(x0 + 1, size - 1), tf.minimum(y0 + 1, size - 1)
    flat = tf.reshape(images, [-1, 3])
    base = (tf.range(n) * size * size)[:, None, None]

    def at(y, x):
        return tf.cast(tf.gather(flat, base + y * size + x), tf.int32)

    upper = at(y0, x0) * (256 - ax) + at(y0, x1) * ax  # at most 255 * 256
    lower = at(y1, x0) * (256 - ax) + at(y1, x1) * ax
    return tf.cast(upper * (256 - ay) + lower * ay, tf.float32) / one  # below 2**24: exact


def _colour_params(n: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Per image and channel, int16 [n,1,1,3] gain and offset in 1/64ths: out = (x * gain +
    offset) / 64. Contrast about mid-grey, a slight per-channel gain (white balance, which also
    moves saturation) and brightness, folded into one multiply-add per value. (The per-image
    mean and grey that a textbook contrast/saturation needs would take XLA a reduction over
    each image before that multiply-add: more passes over the batch.) Sixty-fourths:
    fine enough for a random jitter, and 255 * gain + offset stays inside int16."""
    s = tf.random.experimental.stateless_split(seed, 3)
    contrast = _uniform([n, 1, 1, 1], s[0], *CONTRAST)
    gain = contrast * _uniform([n, 1, 1, 3], s[1], *CHANNEL_GAIN)
    brightness = _uniform([n, 1, 1, 1], s[2], -BRIGHTNESS * 255, BRIGHTNESS * 255)
    offset = 127.5 * (1 - gain) + brightness
    return (tf.cast(tf.round(gain * 64), tf.int16), tf.cast(tf.round(offset * 64), tf.int16))


def _colour(images: tf.Tensor, gain: tf.Tensor, offset: tf.Tensor,
            to_uint8: bool = False) -> tf.Tensor:
    """The colour jitter of `_colour_params`. Bytes in and out (`to_uint8`) stay in integers:
    (x * gain + offset + 32) >> 6 is x * gain + offset rounded half up, saturated to bytes.
    That is the float version rounded exactly, for a part of its cost: XLA's float conversions
    of bytes are what cost (figures: docs/benchmarks.md#figures-behind-the-defaults)."""
    if to_uint8 and images.dtype == tf.uint8:
        out = tf.bitwise.right_shift(tf.cast(images, tf.int16) * gain + (offset + 32), 6)
        return tf.cast(tf.clip_by_value(out, 0, 255), tf.uint8)
    # Otherwise in int32 fixed point too (1/2**22: pixels from `_resample` are multiples of
    # 1/65536), so that XLA and TensorFlow's kernels give the same bits.
    if images.dtype == tf.uint8:
        v = tf.bitwise.left_shift(tf.cast(images, tf.int32), 16)
    else:
        v = tf.cast(images * 65536, tf.int32)
    out = tf.clip_by_value(v * tf.cast(gain, tf.int32)
                           + tf.bitwise.left_shift(tf.cast(offset, tf.int32), 16), 0, 255 << 22)
    if to_uint8:
        return tf.cast(tf.bitwise.right_shift(out + (1 << 21), 22), tf.uint8)
    return tf.cast(out, tf.float32) / (1 << 22)


def _draws(images, seed, flip: bool, affine: bool, colour: bool):
    """The batch's random parameters: flips [n] (-1 mirrors), affine matrices [n,2,3], colour
    gain and offset [n,1,1,3]. Drawn by TensorFlow's own kernels, outside the XLA kernel: XLA's
    stateless random ops give other numbers for the same seed (even with alg="philox"), and
    both paths of `_fused` must give the same batch."""
    n, size = tf.shape(images)[0], images.shape[1]
    s = tf.random.experimental.stateless_split(seed, 3)
    flips = tf.where(_uniform([n], s[0]) < 0.5, -1.0, 1.0) if flip else tf.ones([n])
    m = _affine_matrices(n, size, s[1], flips) if affine else tf.zeros([n, 2, 3])
    gain, offset = _colour_params(n, s[2]) if colour else \
        (tf.zeros([n, 1, 1, 3], tf.int16), tf.zeros([n, 1, 1, 3], tf.int16))
    return flips, m, gain, offset


def _pixels(images, flips, m, gain, offset, flip: bool, affine: bool, colour: bool,
            to_uint8: bool):
    """The pixel work of `_fused`, from its drawn parameters (`_draws`)."""
    if affine:
        out = _resample(images, m)
    else:
        out = images  # flipped as bytes: no arithmetic until colour needs it
        if flip:
            out = tf.where(flips[:, None, None, None] < 0, tf.reverse(out, [2]), out)
        if not (colour or to_uint8):
            out = tf.cast(out, tf.float32)
    if colour:
        out = _colour(out, gain, offset, to_uint8)
    if to_uint8 and out.dtype != tf.uint8:
        out = tf.cast(tf.clip_by_value(tf.round(out), 0.0, 255.0), tf.uint8)
    return out


# One XLA kernel, so the batch is read once and written once. No reduce_retracing: relaxed
# signatures lose the static image size (None x None after a second size in one process) that
# the resampling is built from.
_pixels_xla = tf.function(_pixels, jit_compile=True)
# The same ops run by TensorFlow's own kernels, where the host has no XLA: TPU builds of
# TensorFlow ship no XLA:CPU ("could not find registered transfer manager for platform Host",
# tensorflow/tensorflow#58934, #61976), and tf.data runs on the host.
_pixels_plain = tf.function(_pixels)


@functools.cache
def host_xla() -> bool:
    """Whether XLA runs on this host inside tf.data: probed once per process, on one pixel, the
    way the pipeline runs the kernel (in a dataset's map)."""
    def probe(images):
        one = tf.ones([1])
        return _pixels_xla(images, one, tf.zeros([1, 2, 3]), tf.ones([1, 1, 1, 3], tf.int16),
                           tf.zeros([1, 1, 1, 3], tf.int16), True, False, True, True)

    with tf.init_scope():  # eagerly, even when first asked while a dataset's map is traced
        try:
            tf.data.Dataset.from_tensors(tf.zeros([1, 1, 1, 3], tf.uint8)).map(probe) \
                .get_single_element()
        except tf.errors.OpError:
            return False
    return True


def _fused(images, seed, flip: bool, affine: bool, colour: bool, to_uint8: bool):
    """uint8 [B,S,S,3] -> flipped / transformed / recoloured; uint8 out (rounded, saturated)
    with `to_uint8`, else float32. The pixels in one XLA kernel where the host has XLA
    (`host_xla`), else by TensorFlow's kernels: the same bytes either way."""
    pixels = _pixels_xla if host_xla() else _pixels_plain
    return pixels(images, *_draws(images, seed, flip, affine, colour), flip, affine, colour,
                  to_uint8)


# ------------------------------------------------------------------------- Keras' own layers

BLENDING = ("randaugment", "mixup", "cutmix")  # in the order they are applied; float32 out

class _Seeds:
    """A `keras.random.SeedGenerator` that draws nothing from a variable: each seed a layer asks
    for is the batch's seed folded with the draw's rank in the traced function. Keras' layers
    otherwise draw from a stateful variable, whose order under a parallel `Dataset.map` is not
    fixed (and which a resumed run would not restore)."""

    _cls = None

    @classmethod
    def make(cls):
        import keras

        if cls._cls is None:
            class Seeds(keras.random.SeedGenerator):
                def __init__(self):  # no variable: nothing of Keras' state is used
                    self.name, self.seed, self.count = "corolla_seeds", None, 0

                def next(self, ordered=True):
                    self.count += 1
                    return tf.random.experimental.stateless_fold_in(self.seed, self.count)
            cls._cls = Seeds
        return cls._cls()


def _keras_layer(name: str):
    import keras

    if name == "mixup":
        layer = keras.layers.MixUp(alpha=0.2)
    elif name == "cutmix":
        layer = keras.layers.CutMix(factor=1.0)
    else:
        layer = keras.layers.RandAugment(value_range=(0, 255), num_ops=2, factor=0.5)
    seeds = _Seeds.make()
    for each in [layer, *(getattr(layer, n) for n in getattr(layer, "_AUGMENT_LAYERS", ()))]:
        # Keras asks `_get_seed_generator(backend)`: `generator` when its backend is
        # TensorFlow, the per-backend copy when it is JAX (inside tf.data it runs on TF).
        each.generator = seeds
        each._backend_generators = {"tensorflow": seeds}
    return layer, seeds


_LAYERS: dict[str, tuple] = {}


def _keras(name: str, images, labels, seed):
    if name not in _LAYERS:
        _LAYERS[name] = _keras_layer(name)
    layer, seeds = _LAYERS[name]
    seeds.seed, seeds.count = tf.cast(seed, tf.int64), 0  # traced once per pipeline: stateless
    if name == "randaugment":
        return layer(images, training=True), labels
    out = layer({"images": images, "labels": labels}, training=True)
    return out["images"], out["labels"]


# ------------------------------------------------------------------------------------ apply

def blends(names) -> bool:
    """Whether `names` blend pixels (randaugment, mixup, cutmix), so that the batch must leave
    as float32; the others give uint8 (see `apply`)."""
    return bool(set(names) & set(BLENDING))


def apply(names, images: tf.Tensor, labels: tf.Tensor, seed: tf.Tensor):
    """(uint8 [B,S,S,3], labels) -> (images, labels) with the batch-level augmentations of
    `names` (crop is done while decoding). The images stay uint8 (flip, affine and colour are
    rounded and saturated back to bytes in their one kernel) unless `names` blend pixels
    (`blends`): then float32 in [0, 255]. Labels must be one-hot float32 [B, C] for mixup and
    cutmix, which mix them."""
    names = set(names)
    if not names - {"crop"}:
        return images, labels
    to_float = blends(names)
    s = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 4)
    if names & {"flip", "affine", "color"} or to_float:
        images = _fused(images, s[0], "flip" in names, "affine" in names, "color" in names,
                        not to_float)
    if not to_float:
        return images, labels
    for i, name in enumerate(BLENDING):
        if name in names:
            if name in NEED_ONE_HOT and labels.shape.rank != 2:
                raise ValueError(f"{name} needs one-hot labels [batch, classes]")
            images, labels = _keras(name, images, labels, s[1 + i])
    return tf.ensure_shape(tf.clip_by_value(images, 0.0, 255.0), images.shape), labels
