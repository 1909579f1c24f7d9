"""`tf.data` pipelines over a split: train (shuffled, repeated, augmented, full batches) and
eval/test (ordered, padded to full batches so every accelerator sees one shape)."""

from __future__ import annotations

import tensorflow as tf

from corolla.data import augment as augment_lib
from corolla.data import records
from corolla.data.layout import Split
from corolla.errors import UserError

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


def _interleave(files: tf.data.Dataset, num_files: int, deterministic: bool) -> tf.data.Dataset:
    # Unordered reading takes records from whichever file delivers first, which keeps a remote
    # bucket's latency out of the training step.
    return files.interleave(tf.data.TFRecordDataset, cycle_length=max(1, min(16, num_files)),
                            num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def _records(split: Split, *, ordered: bool, shard: tuple[int, int] = (1, 0),
             auto_shard: bool = False) -> tf.data.Dataset:
    """Serialized records. `shard=(n, i)`: this worker's own part (see `_shard_files`).
    tf.distribute's own auto-sharding is off then: it cannot see the files through the seed
    counter that augmentation zips in. `auto_shard` leaves it to tf.distribute (DATA policy:
    every worker reads all, keeps its share of each batch).
    """
    paths, by_record = _shard_files(split, shard)
    # Sharding by record needs the same order on every worker, so it reads deterministically.
    ds = _interleave(tf.data.Dataset.from_tensor_slices(paths), len(paths),
                     deterministic=ordered or by_record)
    if by_record:
        ds = ds.shard(*shard)
    return _with_options(ds, ordered, auto_shard)


def _with_options(ds: tf.data.Dataset, ordered: bool, auto_shard: bool = False):
    options = tf.data.Options()
    options.deterministic = ordered
    policy = tf.data.experimental.AutoShardPolicy
    options.experimental_distribute.auto_shard_policy = policy.DATA if auto_shard else policy.OFF
    return ds.with_options(options)


def read(split: Split, image_size: int, *, ordered: bool, shard: tuple[int, int] = (1, 0),
         auto_shard: bool = False) -> tf.data.Dataset:
    """Parsed records of a split (see `records.parse`)."""
    return _records(split, ordered=ordered, shard=shard, auto_shard=auto_shard).map(
        lambda r: records.parse(r, image_size, split.labelled),
        num_parallel_calls=AUTOTUNE, deterministic=ordered)


def epoch_seed(seed, epoch) -> tf.Tensor:
    """One int64 per (seed, epoch): each epoch's file order, shuffle and augmentation derive
    from it, so a resumed run draws epoch k exactly as an uninterrupted one would."""
    return tf.cast(seed, tf.int64) * 1_000_003 + tf.cast(epoch, tf.int64)


def train_dataset(split: Split, image_size: int, global_batch: int, *, epoch_examples: int,
                  first_epoch: int = 0, seed: int = 42, augment: bool = True,
                  cache: bool = False, shuffle_buffer: int = 2048, ordered: bool = False,
                  shard: tuple[int, int] = (1, 0)) -> tf.data.Dataset:
    """(image float32 [B,S,S,3] in [0,255], label int32 [B]) batches, forever, starting at
    epoch `first_epoch`.

    Every epoch is drawn afresh from (seed, epoch): this worker's files in a shuffled order, the
    records shuffled, each image augmented with its own stateless seed, and exactly
    `epoch_examples` examples taken (the examples this process consumes in one epoch; the
    stream repeats within the epoch when that is more than its part of the split). So epoch k
    is the same whether the run started at 0 or was resumed at k. `ordered=True` makes the
    stream reproducible (every process of a JAX job must read the same one: Keras takes each
    process's part of each global batch).
    """
    if split.count < global_batch:
        raise UserError(f"the {split.name} split has {split.count} examples, fewer than one "
                        f"global batch ({global_batch}); use a smaller --batch-size")
    paths, by_record = _shard_files(split, shard)
    parse = lambda r: records.parse(r, image_size, split.labelled)  # noqa: E731
    decoded = None
    if cache:  # decoded once, in a fixed order, before the first epoch (see `_fill`)
        decoded = _fill(_records(split, ordered=True, shard=shard).map(
            parse, num_parallel_calls=AUTOTUNE).cache())

    def one_epoch(epoch):
        es = epoch_seed(seed, epoch)
        if decoded is not None:
            ds = decoded.shuffle(shuffle_buffer, seed=es, reshuffle_each_iteration=True)
        else:
            # Shuffling the serialized records (before decoding) keeps the buffer cheap.
            # The same seed on every worker: sharding by record still sees one common order.
            files = tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths), seed=es)
            ds = _interleave(files, len(paths), deterministic=ordered or by_record)
            if by_record:
                ds = ds.shard(*shard)
            ds = ds.shuffle(shuffle_buffer, seed=es, reshuffle_each_iteration=True).map(
                parse, num_parallel_calls=AUTOTUNE, deterministic=ordered)
        ds = ds.repeat().take(epoch_examples)
        counter = tf.data.Dataset.counter()
        return tf.data.Dataset.zip((ds, counter)).map(
            lambda e, i: prepare(e, tf.stack([es, i])), num_parallel_calls=AUTOTUNE,
            deterministic=ordered)

    def prepare(example, example_seed):
        image = tf.cast(example["image"], tf.float32)
        if augment:
            image = augment_lib.augment(image, example_seed)
        return image, example["label"]

    epochs = tf.data.Dataset.counter(start=first_epoch)
    ds = epochs.flat_map(one_epoch)
    ds = ds.batch(global_batch, drop_remainder=True).prefetch(AUTOTUNE)
    return _with_options(ds, ordered)


def _fill(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Runs one full pass so that the in-memory cache is complete: tf.data discards a cache
    whose first pass stopped early, and an epoch stops as soon as it has its examples."""
    ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
    return ds


def eval_dataset(split: Split, image_size: int, global_batch: int,
                 pad: bool = True) -> tf.data.Dataset:
    """Images only, in file order, batched. With `pad`, the last batch is filled with blank images
    so every batch is full; callers keep the first `split.count` predictions."""
    ds = read(split, image_size, ordered=True).map(lambda e: tf.cast(e["image"], tf.float32),
                                                   num_parallel_calls=AUTOTUNE)
    if pad:
        extra = -split.count % global_batch
        blank = tf.zeros([image_size, image_size, 3], tf.float32)
        ds = ds.concatenate(tf.data.Dataset.from_tensors(blank).repeat(extra))
    return ds.batch(global_batch, drop_remainder=pad).prefetch(AUTOTUNE)


def validation_dataset(split: Split, image_size: int, global_batch: int,
                       full_batches: bool, workers: int = 1) -> tuple[tf.data.Dataset, int]:
    """(image, label) batches for monitoring during `fit`, and the number of steps to run.

    With several processes every one must run the same number of steps (one that runs out first
    leaves the others waiting in a collective): full batches, repeated, `count // global_batch`
    steps. The run's metrics.json does not depend on this: it comes from the chief's exact pass
    over the whole split.
    """
    multi = workers > 1
    full_batches = full_batches or multi
    ds = read(split, image_size, ordered=True, auto_shard=multi).map(
        lambda e: (tf.cast(e["image"], tf.float32), e["label"]), num_parallel_calls=AUTOTUNE)
    if multi:
        ds = ds.repeat()
    steps = (max(1, split.count // global_batch) if full_batches
             else -(-split.count // global_batch))
    return ds.batch(global_batch, drop_remainder=full_batches).prefetch(AUTOTUNE), steps


def metadata(split: Split) -> dict[str, list]:
    """Ids (str) and, for labelled splits, labels, in the order `eval_dataset` yields images."""
    ds = _records(split, ordered=True).map(lambda r: records.parse_meta(r, split.labelled),
                                           num_parallel_calls=AUTOTUNE)
    ids, labels = [], []
    for batch in ds.batch(4096):
        ids.extend(x.decode() for x in batch["id"].numpy())
        if split.labelled:
            labels.extend(int(x) for x in batch["label"].numpy())
    return {"ids": ids, "labels": labels}
