"""The lines that say what a run trains (its recipe, model, hardware and phases) before its
first epoch, and how long it took against its time budget after its last."""

from __future__ import annotations

from corolla import config as config_lib
from corolla.runtime import Plan
from corolla.training.phases import epochs_text
from corolla.training.preparing import Prepared


def log_training(ready: Prepared, plan: Plan, log) -> None:
    config = ready.config
    t, size = config.train, config.model.input_size
    log_recipe(config, log)
    data_size = ready.layout.image_size
    scaled = f" (scaled from the data's {data_size})" if size != data_size else ""
    log(f"training {config.model.name} at {size}x{size}{scaled} on {plan.strategy_name} "
        f"({plan.replicas} replica(s), global batch {plan.global_batch}): "
        f"{t.epochs} epochs x {ready.steps} steps")
    if ready.progressive:
        log("progressive resizing: " + ", ".join(f"{p.size} px in {epochs_text(p)}"
                                                 for p in ready.phases))
    elif t.start_size:
        log(f"no progressive resizing: train.start_size {t.start_size} is not below the input "
            f"size {size}, or {t.epochs} epoch(s) leave no room for a ramp")


def log_recipe(config: config_lib.RunConfig, log) -> None:
    t = config.train
    log(f"recipe {t.recipe}: {t.optimizer}, {t.schedule} schedule, peak learning rate "
        f"{t.learning_rate:g}"
        + (f", weight decay {t.weight_decay:g}" if t.weight_decay else "")
        + (f", dropout {config.model.dropout:g}" if config.model.dropout else "")
        + (f", EMA {t.ema_momentum:g}" if t.ema else "")
        + (f", label smoothing {t.label_smoothing:g}" if t.label_smoothing else "")
        + (f", {t.accumulation_steps} batches per update" if t.accumulation_steps > 1 else "")
        + (f", class weight {t.class_weight}" if t.class_weight != "none" else ""))


def log_time_spent(t: config_lib.TrainConfig, spent: float, log) -> None:
    """With a time budget: the training's `spent` seconds, against it."""
    if t.time_budget:
        log(f"time {t.time_budget}: trained in {spent / 60:.1f} min "
            f"({spent / config_lib.duration_seconds(t.time_budget):.0%} of the budget)")
