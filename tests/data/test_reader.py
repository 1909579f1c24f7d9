"""The reader (competition layout, record format) and the tf.data pipelines."""

import hashlib

import numpy as np
import pytest
import tensorflow as tf

from corolla.data import layout, pipeline, records
from corolla.data.classes import COMPETITION_CLASSES
from corolla.errors import UserError


def test_competition_classes_are_kept_exactly():
    assert len(COMPETITION_CLASSES) == 104
    assert COMPETITION_CLASSES[48] == "daisy" and COMPETITION_CLASSES[102] == "common tulip"
    assert COMPETITION_CLASSES[87] == "cyclamen " and COMPETITION_CLASSES[90] == "hippeastrum "


def test_layout_is_found_with_counts_from_file_names(tiny_petals):
    data = layout.open_layout(str(tiny_petals))
    assert data.image_size == 32 and data.available_sizes == (32,)
    assert len(data.class_names) == 4  # from the data set's classes.txt
    train = data.split("train")
    assert [f.path.rsplit("/", 1)[-1] for f in train.files] == ["00-32x32-32.tfrec",
                                                               "01-32x32-32.tfrec"]
    assert (train.count, data.split("val").count, data.split("test").count) == (64, 32, 20)
    assert not data.split("test").labelled
    # The size folder itself is accepted too.
    assert layout.open_layout(data.size_dir).split("val").count == 32


def test_records_parse_to_fixed_shapes(tiny_petals):
    data = layout.open_layout(str(tiny_petals))
    example = next(iter(pipeline.read(data.split("train"), 32, ordered=True)))
    assert example["image"].shape == (32, 32, 3) and example["image"].dtype == tf.uint8
    assert 0 <= int(example["label"]) < 4 and len(example["id"].numpy()) == 9
    test_example = next(iter(pipeline.read(data.split("test"), 32, ordered=True)))
    assert set(test_example) == {"image", "id"}


def test_serialize_round_trip():
    jpeg = tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8)).numpy()
    parsed = records.parse(records.serialize(jpeg, "0123abcde", 7), 8, labelled=True)
    assert int(parsed["label"]) == 7 and parsed["id"].numpy() == b"0123abcde"
    assert records.shard_name(3, 192, 680) == "03-192x192-680.tfrec"


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "does not exist"),
    (lambda p: p, "no tfrecords-jpeg-SxS folder"),
])
def test_bad_data_paths_are_user_errors(tmp_path, make, message):
    with pytest.raises(UserError, match=message):
        layout.open_layout(str(make(tmp_path)))


def test_missing_split_and_missing_size_are_user_errors(tmp_path, tiny_petals):
    (tmp_path / "tfrecords-jpeg-64x64" / "train").mkdir(parents=True)
    with pytest.raises(UserError, match="no .tfrec files in .*train"):
        layout.open_layout(str(tmp_path)).split("train")
    with pytest.raises(UserError,
                       match="image size 224 is not present .*found 32.*--image-size 32"):
        layout.open_layout(str(tiny_petals), image_size=224)


def test_size_nearest_the_models_default_is_chosen():
    sizes = {192: "a", 224: "b", 512: "c"}
    assert layout.choose_size(sizes, 0, 224) == 224
    assert layout.choose_size(sizes, 0, 64) == 192
    assert layout.choose_size(sizes, 512, 64) == 512


def test_train_pipeline_batches_are_full_float_and_reproducible(tiny_petals):
    split = layout.open_layout(str(tiny_petals)).split("train")

    def first_batches(n):
        ds = pipeline.train_dataset(split, 32, 8, epoch_examples=64, seed=3, ordered=True)
        return [(x.numpy(), y.numpy()) for x, y in ds.take(n)]

    batches = first_batches(10)  # more than one epoch: the stream repeats
    for images, labels in batches:
        # uint8: cast on the accelerator
        assert images.shape == (8, 32, 32, 3) and images.dtype == np.uint8
        assert images.min() >= 0 and images.max() <= 255 and labels.shape == (8,)
    again = first_batches(10)
    for (a, la), (b, lb) in zip(batches, again):
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_allclose(a, b)


def test_train_pipeline_refuses_a_batch_larger_than_the_split(tiny_petals):
    split = layout.open_layout(str(tiny_petals)).split("train")
    with pytest.raises(UserError, match="64 examples, fewer than one global batch \\(128\\)"):
        pipeline.train_dataset(split, 32, 128, epoch_examples=128)


def test_eval_pipeline_pads_to_full_batches_in_metadata_order(tiny_petals):
    split = layout.open_layout(str(tiny_petals)).split("val")
    batches = list(pipeline.eval_dataset(split, 32, 12))
    assert [b.shape[0] for b in batches] == [12, 12, 12]  # 32 images + 4 blanks
    assert float(tf.reduce_max(batches[-1][-4:])) == 0.0
    meta = pipeline.metadata(split)
    ordered = list(pipeline.read(split, 32, ordered=True))
    assert meta["ids"] == [e["id"].numpy().decode() for e in ordered]
    assert meta["labels"] == [int(e["label"]) for e in ordered]


def test_every_stream_corolla_iterates_runs_without_tf_data_autotuning(tiny_petals):
    # With autotuning, deleting a long-lived iterator (fit's, as a phase ends) could wait out
    # its tuning thread's sleep, up to a minute (`pipeline.untuned`); its ceiling, every core,
    # is the fixed parallelism instead.
    from corolla.training import features

    data = layout.open_layout(str(tiny_petals))
    train, val = data.split("train"), data.split("val")
    streams = {
        "train": pipeline.train_dataset(train, 32, 8, epoch_examples=64, seed=3),
        "train, cached": pipeline.train_dataset(train, 32, 8, epoch_examples=64, cache=True),
        "eval": pipeline.eval_dataset(val, 32, 12),
        "read": pipeline.read(val, 32, ordered=True),
        "frozen features": features.dataset(np.zeros((16, 4), np.float32), np.zeros(16, int),
                                            4, 8, 2, 0, 1, 0),
    }
    for name, ds in streams.items():
        tuning = ds.options().autotune
        assert tuning.enabled is False, name
        assert tuning.initial_parallelism == pipeline.CORES >= 1, name


def test_flowers5_layout(flowers5):
    data = layout.open_layout(str(flowers5))
    assert data.image_size == 192 and len(data.class_names) == 104
    assert [data.split(s).count for s in ("train", "val", "test")] == [2717, 583, 583]
    labels = set(pipeline.metadata(data.split("val"))["labels"])
    assert labels == {48, 49, 53, 73, 102}


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("split_name, workers", [("train", 2), ("test", 3)])
def test_workers_read_disjoint_parts_that_cover_the_split(tiny_petals, split_name, workers,
                                                          ordered):
    """By file when there are enough files (train: 2 files, 2 workers), by record otherwise
    (test: 2 files, 3 workers); exact also when reading is unordered."""
    split = layout.open_layout(str(tiny_petals)).split(split_name)
    parts = [[e["id"].numpy() for e in pipeline.read(split, 32, ordered=ordered,
                                                     shard=(workers, i))]
             for i in range(workers)]
    seen = [x for part in parts for x in part]
    assert len(seen) == len(set(seen)) == split.count
    assert all(parts)


def _image_keys(batches):
    return [hashlib.sha1(image.tobytes()).hexdigest() for images, _ in batches
            for image in images.numpy()]


@pytest.mark.parametrize("workers", [2, 3])
def test_one_training_epoch_of_the_workers_is_disjoint_and_covers_the_split(tiny_petals,
                                                                            workers):
    """The training stream (unordered, shuffled) of each worker for one epoch of exactly its
    part: no image twice, none missing (2 workers: by file; 3 workers, 2 files: by record)."""
    split = layout.open_layout(str(tiny_petals)).split("train")
    keys = []
    for index in range(workers):
        local = len(range(index, split.count, workers))  # 32 per file: both ways give this
        ds = pipeline.train_dataset(split, 32, 1, epoch_examples=local, seed=5, augment=False,
                                    ordered=False, shard=(workers, index))
        keys += _image_keys(ds.take(local))
    assert len(keys) == len(set(keys)) == split.count


def test_a_resumed_stream_draws_each_epoch_as_the_uninterrupted_one(tiny_petals):
    """Epoch k's order and augmentation come from (seed, k): starting at epoch 2 gives what an
    uninterrupted stream gives from its epoch 2, and epochs differ from one another."""
    split = layout.open_layout(str(tiny_petals)).split("train")

    def stream(first_epoch, batches):
        return list(pipeline.train_dataset(split, 32, 8, epoch_examples=64, seed=3,
                                           first_epoch=first_epoch, ordered=True).take(batches))

    whole, resumed = stream(0, 24), stream(2, 8)
    assert _image_keys(whole[16:]) == _image_keys(resumed)
    assert _image_keys(whole[:8]) != _image_keys(whole[8:16])
    labels = [sorted(y for _, ys in whole[e * 8:(e + 1) * 8] for y in ys.numpy().tolist())
              for e in range(3)]
    assert labels[0] == labels[1] == labels[2]  # each epoch is one whole pass


def test_a_cached_stream_is_decoded_once_and_shuffled_per_epoch(tiny_petals):
    split = layout.open_layout(str(tiny_petals)).split("train")
    ds = pipeline.train_dataset(split, 32, 8, epoch_examples=64, seed=3, cache=True,
                                augment=False, ordered=True)
    epochs = [_image_keys(ds.skip(8 * e).take(8)) for e in range(2)]
    assert sorted(epochs[0]) == sorted(epochs[1]) and epochs[0] != epochs[1]


@pytest.mark.parametrize("size", [16, 24])  # 32 / 2: the decoder scales; 24: decode, resize
def test_images_are_scaled_to_the_input_size_as_they_are_decoded(tiny_petals, size):
    split = layout.open_layout(str(tiny_petals)).split("val")
    full = [e["image"].numpy() for e in pipeline.read(split, 32, ordered=True)]
    scaled = [e["image"].numpy() for e in pipeline.read(split, size, ordered=True)]
    assert len(scaled) == len(full) and scaled[0].shape == (size, size, 3)
    assert scaled[0].dtype == np.uint8
    # The same pictures, smaller: each nearest to its own area resize, and close to it (a
    # 32 px JPEG scaled in the DCT is not exactly an area resize).
    references = tf.image.resize(np.stack(full), [size, size], antialias=True).numpy()
    distance = np.abs(references[None] - np.stack(scaled)[:, None].astype(np.float32)).mean(
        axis=(2, 3, 4))
    np.testing.assert_array_equal(distance.argmin(axis=1), np.arange(len(full)))
    assert distance.diagonal().mean() < 10
    train = pipeline.train_dataset(split, size, 8, epoch_examples=16, ordered=True)
    eval_ = pipeline.eval_dataset(split, size, 8)
    for ds in (train, eval_):
        images = next(iter(ds))
        images = images[0] if isinstance(images, tuple) else images
        assert images.shape == (8, size, size, 3)
    crop = pipeline.train_dataset(split, size, 8, epoch_examples=16, augment=["crop"])
    assert next(iter(crop))[0].shape == (8, size, size, 3)


@pytest.mark.parametrize("size", [16, 24])
def test_a_wrong_stored_size_is_still_found_when_scaling(size):
    for encode in (tf.io.encode_jpeg, tf.io.encode_png):
        image = encode(tf.zeros([16, 16, 3], tf.uint8))  # in a 32x32 folder
        with pytest.raises(tf.errors.InvalidArgumentError, match="is not 32x32"):
            records.decode_image(image, size, stored_size=32)


def test_a_wrong_stored_size_is_found_when_cropping():
    """The crop's own size says nothing of the stored image's: the JPEG's header is checked,
    eagerly and in a graph (as tf.data runs it)."""
    from corolla.data import augment

    seed = tf.constant([1, 2], tf.int64)
    decode = tf.function(lambda jpeg: records.decode_image(
        jpeg, 16, decode=lambda j: augment.decode_crop(j, 16, seed), stored_size=32))
    for run in (decode.python_function, decode):
        right = tf.io.encode_jpeg(tf.zeros([32, 32, 3], tf.uint8))
        assert run(right).shape == (16, 16, 3)
        with pytest.raises(tf.errors.InvalidArgumentError, match="is not 32x32"):
            run(tf.io.encode_jpeg(tf.zeros([48, 48, 3], tf.uint8)))  # in a 32x32 folder


def test_png_records_are_scaled_too():
    """decode_jpeg reads PNG as well, but only JPEG scales in the decoder: PNG is resized."""
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3)).astype(np.uint8)
    for size in (16, 24):
        out = records.decode_image(tf.io.encode_png(image), size, stored_size=32).numpy()
        expected = tf.image.resize(image, [size, size], antialias=True).numpy()
        assert out.shape == (size, size, 3) and np.abs(out - expected).max() <= 0.5
