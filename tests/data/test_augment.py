"""Augmentation by name: every augmentation on a batch, eagerly and inside Dataset.map (shape,
dtype, range, seeded determinism, mixed labels summing to 1), policies and old configs, val never
augmented."""

import numpy as np
import pytest
import tensorflow as tf

from corolla import config
from corolla.config import policies
from corolla.data import augment, layout, pipeline
from corolla.errors import UserError


B, S, C = 8, 32, 4


def _batch():
    rng = np.random.default_rng(0)
    images = tf.constant(rng.integers(0, 256, (B, S, S, 3)), tf.uint8)
    labels = tf.one_hot(rng.integers(0, C, B), C)
    return images, labels


def _seed(n):
    return tf.constant([n, 7], tf.int64)


BATCH_NAMES = [n for n in policies.NAMES if n != "crop"]


@pytest.mark.parametrize("name", BATCH_NAMES)
def test_each_augmentation_eagerly_and_in_dataset_map(name):
    images, labels = _batch()
    out, mixed = augment.apply([name], images, labels, _seed(1))
    again, _ = augment.apply([name], images, labels, _seed(1))
    other, _ = augment.apply([name], images, labels, _seed(2))
    # bytes out unless the augmentation blends pixels (the model casts on the accelerator)
    assert out.shape == (B, S, S, 3)
    assert out.dtype == (tf.float32 if name in augment.BLENDING else tf.uint8)
    assert 0 <= float(tf.reduce_min(out)) and float(tf.reduce_max(out)) <= 255
    np.testing.assert_array_equal(out, again)  # same seed, same batch
    assert not np.array_equal(out, other)  # another seed, another batch
    assert not np.array_equal(out, tf.cast(images, tf.float32))  # it did something
    np.testing.assert_allclose(tf.reduce_sum(mixed, 1), 1.0, rtol=1e-5)
    if name in policies.NEED_ONE_HOT:
        assert not np.array_equal(mixed, labels)  # labels mixed with the images
    ds = tf.data.Dataset.from_tensors((images, labels)).map(
        lambda x, y: augment.apply([name], x, y, _seed(1)))
    in_map, map_labels = next(iter(ds))
    np.testing.assert_allclose(in_map, out, atol=1e-3)  # the same, traced inside tf.data
    np.testing.assert_allclose(map_labels, mixed, atol=1e-6)


def test_flip_and_colour_in_bytes_match_the_float_kernel_rounded():
    images, _ = _batch()
    as_bytes = augment._fused(images, _seed(1), True, True, True, True)
    as_float = augment._fused(images, _seed(1), True, True, True, False)
    assert as_bytes.dtype == tf.uint8
    diff = np.abs(as_bytes.numpy().astype(np.float32) - as_float.numpy())
    assert diff.max() <= 0.5 + 1e-3  # rounded and saturated, nothing else


@pytest.fixture
def no_host_xla(monkeypatch):
    """As on a TPU build of TensorFlow, which has no XLA:CPU: the fallback kernel."""
    monkeypatch.setattr(augment, "host_xla", lambda: False)


KERNELS = [(flip, affine, colour, to_uint8) for flip in (False, True)
           for affine in (False, True) for colour in (False, True) for to_uint8 in (False, True)
           if flip or affine or colour]


def test_without_xla_on_the_host_the_kernel_gives_the_same_bytes(no_host_xla):
    """Every combination of the fused kernel, XLA against TensorFlow's own kernels, eagerly and
    in a dataset's map (as the pipeline runs it): the same bytes, so a run does not depend on
    whether its host has XLA."""
    images, _ = _batch()
    for args in KERNELS:
        fallback = augment._fused(images, _seed(1), *args).numpy()
        in_map = tf.data.Dataset.from_tensors(images).map(
            lambda x, args=args: augment._fused(x, _seed(1), *args)).get_single_element()
        xla = augment._pixels_xla(images, *augment._draws(images, _seed(1), *args[:3]), *args)
        assert xla.dtype == fallback.dtype == (tf.uint8 if args[3] else tf.float32), args
        assert np.array_equal(xla.numpy(), fallback), args
        assert np.array_equal(in_map.numpy(), fallback), args
    identity = tf.tile(tf.constant([[[1.0, 0, 0], [0, 1, 0]]]), [B, 1, 1])
    assert np.array_equal(augment._resample(images, identity), tf.cast(images, tf.float32))


def test_a_host_without_xla_is_found_once_by_probing(monkeypatch):
    """host_xla() runs the XLA kernel once in a dataset's map; a TensorFlow whose XLA:CPU is
    missing fails there (as TPU builds do: tensorflow/tensorflow#58934), faked here by a kernel
    that fails the same way."""
    assert augment.host_xla()  # this machine's TensorFlow has XLA:CPU

    @tf.function
    def missing(*args):
        tf.debugging.assert_equal(0, 1, message="could not find registered transfer manager "
                                  "for platform Host -- check target linkage")
        return args[0]

    monkeypatch.setattr(augment, "_pixels_xla", missing)
    augment.host_xla.cache_clear()
    try:
        assert not augment.host_xla()
        images, _ = _batch()
        out, _ = augment.apply(["flip", "color"], images, None, _seed(1))  # no XLA in it
        assert out.dtype == tf.uint8
    finally:
        augment.host_xla.cache_clear()


def test_crop_decodes_a_random_window_resized_to_the_image_size():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (S, S, 3)).astype(np.uint8)
    jpeg = tf.io.encode_jpeg(image)
    crops = [augment.decode_crop(jpeg, S, _seed(n)) for n in (1, 1, 2)]
    assert crops[0].shape == (S, S, 3) and crops[0].dtype == tf.uint8
    np.testing.assert_array_equal(crops[0], crops[1])
    assert not np.array_equal(crops[0], crops[2])
    cached = augment.random_crop(tf.constant(image), _seed(1))  # from a decoded image
    assert cached.shape == (S, S, 3) and cached.dtype == tf.uint8


def test_policies_names_and_old_configs():
    assert config.RunConfig().data.augment == list(policies.POLICIES["default"])
    assert policies.resolve(True) == list(policies.POLICIES["default"])
    assert policies.resolve("false") == policies.resolve("none") == policies.resolve([]) == []
    assert policies.resolve(["color", "flip"]) == ["flip", "color"]  # application order
    assert policies.resolve("mixup,crop") == ["crop", "mixup"]
    assert config.with_settings(config.RunConfig(), {"data.augment": "strong"}).data.augment == \
        list(policies.POLICIES["strong"])
    with pytest.raises(UserError, match=r"^--augment: unknown augmentation 'zoom'; names are "
                       r"crop, flip, affine, color, randaugment, mixup, cutmix, policies none, "
                       r"default, strong$"):
        policies.resolve(["flip", "zoom"], "--augment")


def test_old_config_with_augment_true_loads(tmp_path):
    path = tmp_path / "old.toml"
    path.write_text("[data]\naugment = false\n")
    assert config.load_config(path).data.augment == []
    path.write_text('[data]\naugment = ["flip", "affine"]\n')
    c = config.load_config(path)
    config.save_config(c, tmp_path / "saved.toml")
    assert config.load_config(tmp_path / "saved.toml").data.augment == ["flip", "affine"]


def test_training_batches_are_augmented_deterministically_and_val_never(tiny_petals):
    lay = layout.open_layout(str(tiny_petals))
    train = lay.split("train")

    def first(seed, names):
        ds = pipeline.train_dataset(train, S, B, epoch_examples=16, seed=seed, augment=names,
                                    ordered=True, num_classes=C)
        return [np.asarray(x) for x in next(iter(ds))]

    plain = first(3, [])
    strong = first(3, "strong")
    assert strong[0].shape == (B, S, S, 3) and strong[0].dtype == np.float32  # cutmix blends
    assert plain[0].dtype == first(3, "default")[0].dtype == np.uint8
    assert strong[1].shape == (B, C) and strong[1].dtype == np.float32
    np.testing.assert_allclose(strong[1].sum(1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(strong[0], first(3, "strong")[0])
    assert not np.array_equal(strong[0], first(4, "strong")[0])
    assert not np.array_equal(strong[0], plain[0])
    # val (validation after each epoch, evaluation): the same images, un-augmented, in file
    # order, whatever augmentation is configured
    x = next(iter(pipeline.eval_dataset(lay.split("val"), S, B)))
    expected = next(iter(pipeline.read(lay.split("val"), S, ordered=True).batch(B)))
    np.testing.assert_array_equal(x, tf.cast(expected["image"], tf.float32))


def test_batches_of_several_image_sizes_in_one_process():
    # A relaxed tf.function signature once lost the static size after a few sizes (None x None),
    # and the colour step could not be built: every size must keep working.
    for size in (16, 24, 32, 40):
        images = tf.zeros([2, size, size, 3], tf.uint8)
        out, _ = augment.apply(["flip", "color"], images, tf.zeros([2, C]), _seed(size))
        assert out.shape == (2, size, size, 3) and out.dtype == tf.uint8
