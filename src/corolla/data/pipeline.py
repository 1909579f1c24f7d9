"""`tf.data` pipelines over a split: train (shuffled, repeated, augmented, full batches) and
eval/test (ordered, padded to full batches so every accelerator sees one shape).

Every record travels with its file's path and its index in the file, so that a record that
cannot be used is named in the error (see `records.decode_image`). With `skip_bad_records`,
the records that `check` found damaged are left out instead: a damaged tail ends its file, an
image that does not decode is dropped, except in the test split's predictions, where it is
predicted from a blank image so that every readable test id keeps its row in submission.csv.

Training records are batched before they are parsed: one `parse_example` per batch, the JPEGs
decoded in a loop inside it (a random crop decodes only its window), then the batch augmented in
one XLA kernel that reads and writes bytes (see `augment`): far less per-element overhead than a
map per record. `corolla bench data` measures it.
"""

from __future__ import annotations

import math
import os

import tensorflow as tf

from corolla.data import augment as augment_lib
from corolla.config import policies
from corolla.data import check, folds, records
from corolla.data.layout import Split

AUTOTUNE = tf.data.AUTOTUNE


def _shard_files(split: Split, shard: tuple[int, int]) -> tuple[list[str], bool]:
    """(this worker's files, whether records must still be sharded one by one).

    With at least as many files as workers each reads whole files of its own; with fewer, every
    worker reads all files in the same, deterministic order and keeps every n-th record (so
    the parts are disjoint and cover the split exactly)."""
    num, index = shard
    if num > 1 and len(split.paths) >= num:
        return split.paths[index::num], False
    return split.paths, num > 1


def _file_records(path: tf.Tensor, skip: bool) -> tf.data.Dataset:
    """(serialized record, file path, index in the file) of one file."""
    ds = tf.data.TFRecordDataset(path)
    if skip:  # a damaged tail ends the file (the check counted what it took)
        ds = ds.ignore_errors()
    return ds.enumerate().map(lambda index, record: (record, path, index))


def _bad(split: Split, skip: bool):
    """(path, index) -> whether the check found the record's image undecodable; None when there
    is nothing to skip (the pipeline then is the same as without skipping)."""
    if not skip:
        return None
    keys = [f"{d.path}#{index}" for d in check.damage_of(split) for index, _ in d.undecodable]
    if not keys:
        return None
    keys = tf.constant(keys)
    return lambda path, index: tf.reduce_any(tf.equal(
        tf.strings.join([path, "#", tf.strings.as_string(index)]), keys))


def _kept(split: Split):
    """(serialized record) -> whether the split holds it, for a split that holds only some of
    its files' records (a k-fold run's folds: `folds.FoldSplit`); None for a whole split."""
    return split.keeper() if isinstance(split, folds.FoldSplit) else None


def _count(split: Split, skip: bool) -> int:
    """Examples the pipeline yields: the file names' counts, less what is skipped."""
    return check.usable_count(split) if skip else split.count


def _stream(files: tf.data.Dataset, num_files: int, *, deterministic: bool,
            shard: tuple[int, int] | None, skip: bool, bad, kept=None) -> tf.data.Dataset:
    """(record, path, index) of `files`, interleaved, without the records `bad` (see `_bad`)
    and, given `kept` (see `_kept`), only those it keeps; `shard`: keep this worker's n-th
    records. Records are dropped before sharding, so that the workers' parts still cover the
    split."""
    # Unordered reading takes records from whichever file delivers first, which keeps a remote
    # bucket's latency out of the training step.
    ds = files.interleave(lambda path: _file_records(path, skip),
                          cycle_length=max(1, min(16, num_files)),
                          num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    if bad is not None:
        ds = ds.filter(lambda record, path, index: tf.logical_not(bad(path, index)))
    if kept is not None:
        ds = ds.filter(lambda record, path, index: kept(record))
    if shard is not None:
        ds = ds.shard(*shard)
    return ds


def record_stream(split: Split, *, ordered: bool, shard: tuple[int, int] = (1, 0),
                  auto_shard: bool = False, skip: bool = False,
                  drop_bad: bool = True) -> tf.data.Dataset:
    """(serialized record, file path, index in the file). `shard=(n, i)`: this worker's own part
    (see `_shard_files`). tf.distribute's own auto-sharding is off then: it cannot see the files
    through the seed counter that augmentation zips in. `auto_shard` leaves it to tf.distribute
    (DATA policy: every worker reads all, keeps its share of each batch).
    """
    check.note_read(split)
    paths, by_record = _shard_files(split, shard)
    # Sharding by record needs the same order on every worker, so it reads deterministically.
    ds = _stream(tf.data.Dataset.from_tensor_slices(paths), len(paths),
                 deterministic=ordered or by_record, shard=shard if by_record else None,
                 skip=skip, bad=_bad(split, skip) if drop_bad else None, kept=_kept(split))
    return _with_options(ds, ordered, auto_shard)


# The host's schedulable cores: tf.data's own CPU budget.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def untuned(ds: tf.data.Dataset) -> tf.data.Dataset:
    """`ds` without tf.data's autotuning, as every stream Corolla trains, validates or
    predicts on is (not the data check's scans of one file each, nor Keras' own over a frozen
    head's features in memory: the sleep below grows with an iterator's life, and theirs are
    short). With it, deleting an iterator that lived a while
    (fit's, as a phase ends; a validation pass's) could wait out its tuning thread's sleep,
    which grows to a minute (`benchmarks/input_teardown.py`): cancelling it wakes the
    thread before TensorFlow marks the cancellation done (CancellationManager runs its
    callbacks first), so the thread finds nothing cancelled and sleeps again. Without it, each
    AUTOTUNE parallelism is fixed at initial_parallelism (capped by TensorFlow's thread pool):
    every core, autotuning's own ceiling; prefetch buffers still grow (that tuner needs no
    thread)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    options.autotune.initial_parallelism = CORES
    return ds.with_options(options)


def _with_options(ds: tf.data.Dataset, ordered: bool, auto_shard: bool = False):
    options = tf.data.Options()
    options.deterministic = ordered
    policy = tf.data.experimental.AutoShardPolicy
    options.experimental_distribute.auto_shard_policy = policy.DATA if auto_shard else policy.OFF
    return untuned(ds.with_options(options))


def _parser(split: Split, image_size: int):
    return lambda record, path, index: records.parse(record, image_size, split.labelled,
                                                     (path, index), split.features,
                                                     split.stored_size)


def read(split: Split, image_size: int, *, ordered: bool, shard: tuple[int, int] = (1, 0),
         auto_shard: bool = False, skip_bad_records: bool = False) -> tf.data.Dataset:
    """Parsed records of a split (see `records.parse`); damaged ones are left out when
    skipping (in the test split too: `eval_dataset` is what keeps the test ids' places)."""
    return record_stream(split, ordered=ordered, shard=shard, auto_shard=auto_shard,
                         skip=skip_bad_records).map(_parser(split, image_size),
                                                    num_parallel_calls=AUTOTUNE,
                                                    deterministic=ordered)


def epoch_seed(seed, epoch) -> tf.Tensor:
    """One int64 per (seed, epoch): each epoch's file order, shuffle and augmentation derive
    from it, so a resumed run draws epoch k exactly as an uninterrupted one would."""
    return tf.cast(seed, tf.int64) * 1_000_003 + tf.cast(epoch, tf.int64)


# The share of this host's memory `data.cache` may fill: the recipes that ask for it (`cpu`)
# are for data sets of a few thousand photos, and a user's 100,000 at 176 px would take 9 GB.
CACHE_SHARE = 0.25


def decoded_bytes(count: int, image_size: int) -> int:
    """The memory `count` decoded images of `image_size` px take (uint8 RGB)."""
    return count * image_size * image_size * 3


def memory_budget() -> float:
    """The bytes a run's caches may fill: CACHE_SHARE of this host's memory (infinite where
    the host does not say: not POSIX, trust the recipe)."""
    try:
        return CACHE_SHARE * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return float("inf")


def cache_fits(count: int, image_size: int) -> tuple[bool, float, float]:
    """Whether `count` decoded images of `image_size` px fit in CACHE_SHARE of this host's
    memory (`memory_budget`); with their GB and the budget's (0 where the host does not say)."""
    need = decoded_bytes(count, image_size) / 1e9
    budget = memory_budget() / 1e9
    if budget == float("inf"):
        return True, need, 0.0
    return need <= budget, need, budget


def train_dataset(split: Split, image_size: int, global_batch: int, *, epoch_examples: int,
                  first_epoch: int = 0, seed: int = 42, augment=True,
                  cache: bool = False, shuffle_buffer: int = 2048, ordered: bool = False,
                  shard: tuple[int, int] = (1, 0), skip_bad_records: bool = False,
                  num_classes: int = 0, class_weights=None) -> tf.data.Dataset:
    """(image [B,S,S,3], label) batches, forever, starting at epoch `first_epoch`. Images are
    uint8, cast to float32 by the model's Input on the accelerator (4x less host work and
    host-to-device traffic), or float32 in [0, 255] when the augmentation blends pixels
    (randaugment, mixup, cutmix: `augment.blends`). Labels are int32 [B], or one-hot float32
    [B, num_classes] when `num_classes` is given (mixup and cutmix need them).

    Every epoch is drawn afresh from (seed, epoch): this worker's files in a shuffled order, the
    records shuffled, each batch augmented with its own stateless seed (`augment`: names or a
    policy, see `policies`; True/False = default/none), and exactly `epoch_examples` examples
    taken (the examples this process consumes in one epoch; the stream repeats within the epoch
    when that is more than its part of the split). So epoch k is the same whether the run
    started at 0 or was resumed at k. `ordered=True` makes the stream reproducible. `shard`:
    (shards, this process's shard): a process reads and decodes only its part of the split.
    Damaged records are never drawn when skipping. `class_weights` ([num_classes] floats, see
    `corolla.data.class_weights`; needs `num_classes`): batches of (image, label, sample weight),
    each example weighted by its one-hot label's mix of the classes' weights (mixup: by both).
    """
    names = policies.resolve(augment)
    _check_one_hot(names, class_weights, num_classes)
    skip = skip_bad_records
    count = _count(split, skip)
    check.one_global_batch(split.name, count, global_batch)
    check.note_read(split)
    paths, by_record = _shard_files(split, shard)
    bad = _bad(split, skip)  # here: one_epoch runs while tf.data traces it
    kept = _kept(split)  # here too: its table is a resource the traced function captures
    decoded = _decoded_once(split, image_size, shard, skip) if cache else None
    # A batch's augmentation is seeded by (epoch seed, batch index): batches must not straddle
    # epochs, so an epoch is cut into sub-batches when it is not a whole number of batches.
    batch = math.gcd(epoch_examples, global_batch)
    # A buffer past the split's size shuffles no better, and TensorFlow reserves it whole.
    shuffle_buffer = max(1, min(shuffle_buffer, count))

    def one_epoch(epoch):
        es = epoch_seed(seed, epoch)
        if decoded is not None:
            ds = decoded.shuffle(shuffle_buffer, seed=es, reshuffle_each_iteration=True)
        else:  # the serialized records shuffled (before decoding: a cheap buffer)
            ds = _stream(_shuffled(paths, es), len(paths), deterministic=ordered or by_record,
                         shard=shard if by_record else None, skip=skip, bad=bad, kept=kept)
            ds = ds.shuffle(shuffle_buffer, seed=es, reshuffle_each_iteration=True)
        ds = ds.repeat().take(epoch_examples).batch(batch, drop_remainder=True)
        counter = tf.data.Dataset.counter()
        return tf.data.Dataset.zip((ds, counter)).map(
            lambda e, i: prepare(e, tf.stack([es, i])), num_parallel_calls=AUTOTUNE,
            deterministic=ordered)

    prepare = _batch_preparer(split, image_size, names, cached=decoded is not None,
                              num_classes=num_classes, class_weights=class_weights)
    epochs = tf.data.Dataset.counter(start=first_epoch)
    ds = epochs.flat_map(one_epoch)
    if batch != global_batch:
        ds = ds.rebatch(global_batch, drop_remainder=True)
    return _with_options(ds.prefetch(AUTOTUNE), ordered)


def _check_one_hot(names: list[str], class_weights, num_classes: int) -> None:
    if (any(n in augment_lib.NEED_ONE_HOT for n in names) or class_weights is not None) \
            and not num_classes:
        raise ValueError("mixup, cutmix and class weights need one-hot labels: pass num_classes")


def _decoded_once(split: Split, image_size: int, shard: tuple[int, int],
                  skip: bool) -> tf.data.Dataset:
    """This worker's (image, label) pairs of the split, decoded once in a fixed order and
    cached in memory before the first epoch (see `_fill`)."""
    return _fill(record_stream(split, ordered=True, shard=shard, skip=skip).map(
        _parser(split, image_size), num_parallel_calls=AUTOTUNE).map(
        lambda e: (e["image"], e["label"])).cache())


def _shuffled(paths: list[str], seed) -> tf.data.Dataset:
    """The files in an epoch's order: the same seed on every worker, so that sharding by
    record still sees one common order."""
    return tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths), seed=seed)


def _batch_preparer(split: Split, image_size: int, names: list[str], *, cached: bool,
                    num_classes: int, class_weights):
    """The function that turns one batch of the training stream (decoded images and labels
    when `cached`, else serialized records) and its seed into the model's batch: decoded,
    cropped, labels one-hot where `num_classes`, augmented by `names`, weighted by
    `class_weights`."""
    weights = None if class_weights is None else tf.constant(class_weights, tf.float32)

    def prepare(batch, batch_seed):
        crop_seeds, aug_seed = tf.unstack(tf.random.experimental.stateless_split(batch_seed, 2))
        if cached:
            images, labels = batch
            if "crop" in names:
                images = _per_image(lambda x: augment_lib.random_crop(x[0], x[1]),
                                    (images, _seeds(crop_seeds, tf.shape(images)[0])))
        else:
            images, labels = decode_batch(*batch, image_size, crop="crop" in names,
                                          seed=crop_seeds, features=split.features,
                                          stored_size=split.stored_size)
        if num_classes:
            labels = tf.one_hot(labels, num_classes, dtype=tf.float32)
        images, labels = augment_lib.apply(names, images, labels, aug_seed)
        if weights is None:
            return images, labels
        return images, labels, tf.linalg.matvec(labels, weights)

    return prepare

def _seeds(seed: tf.Tensor, n) -> tf.Tensor:
    return tf.random.experimental.stateless_split(seed, n)


def _per_image(fn, elems) -> tf.Tensor:
    return tf.map_fn(fn, elems, fn_output_signature=tf.uint8, parallel_iterations=4)


def decode_batch(serialized: tf.Tensor, paths: tf.Tensor, indices: tf.Tensor, image_size: int,
                 crop: bool = False, seed: tf.Tensor | None = None,
                 features: records.Features = records.COMPETITION, stored_size: int = 0):
    """A batch of labelled records (with their files and indices, for the errors) -> (uint8
    [B,S,S,3], int32 [B]); with `crop`, each image a random crop of its JPEG (`seed`: [2]).
    `stored_size`: the records' image size, when not S (see `records.decode_image`)."""
    example = records.parse_features(serialized, True, features)
    labels = tf.cast(example["class"], tf.int32)
    n = tf.shape(serialized)[0]
    seeds = _seeds(seed, n) if crop else tf.zeros([n, 2], tf.int64)

    def one(x):
        jpeg, path, index, example_id, s = x
        named = records.record_named(path, index, example_id)
        image = records.decode_image(jpeg, image_size, named,
                                     decode=(lambda j: augment_lib.decode_crop(j, image_size, s))
                                     if crop else None, stored_size=stored_size)
        return image

    images = _per_image(one, (example["image"], paths, indices, example["id"], seeds))
    return tf.ensure_shape(images, [None, image_size, image_size, 3]), labels


def _fill(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Runs one full pass so that the in-memory cache is complete: tf.data discards a cache
    whose first pass stopped early, and an epoch stops as soon as it has its examples."""
    ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
    return ds


def eval_dataset(split: Split, image_size: int, global_batch: int, pad: bool = True,
                 skip_bad_records: bool = False, cache: bool = False) -> tf.data.Dataset:
    """Images only (uint8, as training's: the model casts them on the accelerator, and a
    quarter of float32's bytes cross to it), in file order, batched, one per id of `metadata`
    (same `skip_bad_records`). With `pad`, the last batch is filled with blank images so every
    batch is full; callers keep the first `split.count` predictions (the count of the split
    `check.check_split` returned, when skipping). A test image that does not decode is a blank
    image too (see the module). `cache`: the decoded batches are kept in memory by the first
    whole pass, and later passes decode nothing."""
    skip = skip_bad_records
    parse = _parser(split, image_size)
    blank = tf.zeros([image_size, image_size, 3], tf.uint8)
    bad = None if split.labelled else _bad(split, skip)

    def image(record, path, index):
        decoded = lambda: parse(record, path, index)["image"]  # noqa: E731
        return decoded() if bad is None else tf.cond(bad(path, index), lambda: blank, decoded)

    ds = record_stream(split, ordered=True, skip=skip, drop_bad=split.labelled).map(
        image, num_parallel_calls=AUTOTUNE)
    if pad:
        extra = -_count(split, skip) % global_batch
        ds = ds.concatenate(tf.data.Dataset.from_tensors(blank).repeat(extra))
    ds = ds.batch(global_batch, drop_remainder=pad)
    return (ds.cache() if cache else ds).prefetch(AUTOTUNE)


def metadata(split: Split, skip_bad_records: bool = False) -> dict[str, list]:
    """Ids (str) and, for labelled splits, labels, in the order `eval_dataset` yields images
    (given the same `skip_bad_records`)."""
    ds = record_stream(split, ordered=True, skip=skip_bad_records, drop_bad=split.labelled).map(
        lambda record, path, index: records.parse_meta(record, split.labelled, split.features),
        num_parallel_calls=AUTOTUNE)
    ids, labels = [], []
    for batch in ds.batch(4096):
        ids.extend(x.decode() for x in batch["id"].numpy())
        if split.labelled:
            labels.extend(int(x) for x in batch["label"].numpy())
    return {"ids": ids, "labels": labels}
