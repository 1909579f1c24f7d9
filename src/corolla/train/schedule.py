"""Learning-rate schedules (per step, from Keras' own)."""

from __future__ import annotations


def learning_rate_schedule(peak: float, total_steps: int, warmup_steps: int):
    """Linear ramp-up from peak/10 to `peak`, then cosine decay to 1% of it at `total_steps`:
    the tutorial's ramp-up / sustain / decay, per step instead of per epoch."""
    import keras

    warmup_steps = min(warmup_steps, max(total_steps - 1, 0))
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=peak / 10 if warmup_steps else peak,
        decay_steps=max(total_steps - warmup_steps, 1), alpha=0.01,
        warmup_target=peak if warmup_steps else None, warmup_steps=warmup_steps)
