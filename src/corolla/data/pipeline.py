"""`tf.data` pipelines over a split: train (shuffled, repeated, augmented, full batches) and
eval/test (ordered, padded to full batches so every accelerator sees one shape)."""

from __future__ import annotations

import tensorflow as tf

from corolla.data import augment as augment_lib
from corolla.data import records
from corolla.data.layout import Split
from corolla.errors import UserError

AUTOTUNE = tf.data.AUTOTUNE


def _records(split: Split, *, ordered: bool, shard: tuple[int, int] = (1, 0),
             auto_shard: bool = False) -> tf.data.Dataset:
    """Serialized records. Unordered reading interleaves the shards as they arrive, which keeps a
    remote bucket's latency out of the training step.

    `shard=(n, i)`: this worker reads its own 1/n of the files (of the records, when there are
    fewer files than workers). tf.distribute's own auto-sharding is off then: it cannot see the
    files through the seed counter that augmentation zips in. `auto_shard` leaves it to
    tf.distribute (DATA policy: every worker reads all, keeps its share of each batch).
    """
    num, index = shard
    files = tf.data.Dataset.from_tensor_slices(split.paths)
    by_file = num > 1 and len(split.paths) >= num
    if by_file:
        files = files.shard(num, index)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=min(16, len(split.paths)),
                          num_parallel_calls=AUTOTUNE, deterministic=ordered)
    if num > 1 and not by_file:
        ds = ds.shard(num, index)
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


def train_dataset(split: Split, image_size: int, global_batch: int, *, seed: int = 42,
                  augment: bool = True, cache: bool = False, shuffle_buffer: int = 2048,
                  ordered: bool = False, shard: tuple[int, int] = (1, 0)) -> tf.data.Dataset:
    """(image float32 [B,S,S,3] in [0,255], label int32 [B]) batches, forever.

    `ordered=True` makes the stream reproducible (every process of a JAX job must read the same
    one: Keras takes each process's part of each global batch).
    """
    if split.count < global_batch:
        raise UserError(f"the {split.name} split has {split.count} examples, fewer than one "
                        f"global batch ({global_batch}); use a smaller --batch-size")
    ds = read(split, image_size, ordered=ordered, shard=shard).map(
        lambda e: (e["image"], e["label"]))
    if cache:
        ds = ds.cache()
    ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    # Per-example seeds come from a counter so that augmentation is reproducible too.
    counter = tf.data.Dataset.counter().map(lambda i: tf.stack([tf.cast(seed, tf.int64), i]))
    ds = tf.data.Dataset.zip((ds, counter))

    def prepare(example, example_seed):
        image, label = example
        image = tf.cast(image, tf.float32)
        if augment:
            image = augment_lib.augment(image, example_seed)
        return image, label

    ds = ds.map(prepare, num_parallel_calls=AUTOTUNE, deterministic=ordered)
    return ds.batch(global_batch, drop_remainder=True).prefetch(AUTOTUNE)


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
