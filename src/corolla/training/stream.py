"""The training data stream of a run: each epoch drawn as itself from any first epoch (a
resumed run's stream continues where an uninterrupted one would be), at a phase's image size,
with the run's augmentation, caching and class weights."""

from __future__ import annotations

from corolla import config as config_lib
from corolla.data import class_weights as class_weights_lib
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.runtime import Plan


def class_weights(config: config_lib.RunConfig, layout: layout_lib.Layout):
    """The loss weight of each class (`train.class_weight`), or None; "balanced" reads the
    training split's labels once."""
    setting = config.train.class_weight
    labels = pipeline.metadata(layout.split("train"), config.data.skip_bad_records)["labels"] \
        if setting == "balanced" else None
    return class_weights_lib.resolve(setting, labels, layout.class_names)


class TrainingStream:
    """The training split of `layout` as the run's data settings (`config.data`, train.seed,
    train.deterministic) feed it."""

    def __init__(self, config: config_lib.RunConfig, layout: layout_lib.Layout, plan: Plan,
                 log):
        self.config, self.layout, self.plan, self.log = config, layout, plan, log
        self.class_weights = class_weights(config, layout)
        self.said_no_cache = False

    def at(self, first_epoch: int, size: int, steps: int):
        """The stream from `first_epoch` at `size` px, epochs of `steps` steps: one per `fit`
        (each iterates its dataset from the start), epoch k drawn as k. Each process reads,
        decodes and consumes only its own share of every global batch (`Plan.process_batch`)."""
        config, plan, t = self.config, self.plan, self.config.train
        split = self.layout.split("train")
        cache = config.data.cache
        if cache:  # each process keeps its own share of the split
            cache, need, budget = pipeline.cache_fits(split.count // plan.num_processes, size)
            if not cache and not self.said_no_cache:  # once: later phases are larger
                self.log(f"data.cache: the training images decoded at {size} px would take "
                         f"{need:.1f} GB, over {pipeline.CACHE_SHARE:.0%} of this host's "
                         f"memory ({budget:.1f} GB): decoded every epoch instead")
                self.said_no_cache = True
        return pipeline.train_dataset(
            split, size, plan.input_batch, epoch_examples=steps * plan.process_batch,
            first_epoch=first_epoch, seed=t.seed, augment=config.data.augment,
            cache=cache, shuffle_buffer=config.data.shuffle_buffer,
            ordered=t.deterministic, shard=plan.input_shard,
            skip_bad_records=config.data.skip_bad_records,
            num_classes=len(self.layout.class_names), class_weights=self.class_weights)
