"""The optimizer a TrainConfig asks for: Adam, AdamW or SGD with momentum, with Keras' own
weight decay, EMA of the weights (`use_ema`) and gradient accumulation."""

from __future__ import annotations

from corolla.models import sublayers


def make_optimizer(train, schedule, model=None):
    """The optimizer of `train`, on `schedule`. With weight decay, `model`'s normalization
    scales and offsets and every bias are left undecayed (`no_decay`)."""
    import keras

    common = dict(learning_rate=schedule, use_ema=train.ema, ema_momentum=train.ema_momentum,
                  weight_decay=train.weight_decay or None,
                  gradient_accumulation_steps=(train.accumulation_steps
                                               if train.accumulation_steps > 1 else None))
    if train.optimizer == "sgd":
        optimizer = keras.optimizers.SGD(momentum=train.momentum, **common)
    elif train.optimizer == "adamw":
        optimizer = keras.optimizers.AdamW(**{**common, "weight_decay": train.weight_decay})
    else:
        optimizer = keras.optimizers.Adam(**common)
    if train.weight_decay and model is not None:
        optimizer.exclude_from_weight_decay(var_list=no_decay(model))
    return optimizer


def no_decay(model) -> list:
    """The variables weight decay must leave alone: the scales and offsets of normalization
    layers (decaying them shrinks the features they normalise, not the model's capacity) and
    biases (one number per unit: no overfitting to curb), as in BERT's and timm's recipes."""
    import keras

    norms = (keras.layers.BatchNormalization, keras.layers.LayerNormalization,
             keras.layers.GroupNormalization)
    layers = sublayers(model)
    return [v for layer in layers if isinstance(layer, norms) for v in layer.weights] + \
        [v for v in model.variables if v.name == "bias"]


def inner(optimizer):
    """The optimizer itself, inside the loss-scale wrapper mixed float16 puts around it."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def finalize_ema(model) -> None:
    """Puts the EMA of the weights into the model (what `fit` does when it ends), for a phase
    or a run that ends without a `fit` of its own (resumed after its last epoch). Idempotent:
    the average stays in the optimizer. A model never compiled (a linear head's refit) has
    none."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and inner(optimizer).use_ema and inner(optimizer).built:
        optimizer.finalize_variable_values(model.trainable_weights)


def epoch_learning_rate(optimizer) -> float:
    """The rate of the optimizer's last update (for a per-epoch schedule: the epoch's own rate;
    `optimizer.learning_rate` is already the next step's)."""
    import keras

    opt = inner(optimizer)
    schedule = opt._learning_rate
    if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        step = max(int(keras.ops.convert_to_numpy(opt._iterations)) - 1, 0)
        return float(keras.ops.convert_to_numpy(_compiled(schedule)(step)))
    return float(keras.ops.convert_to_numpy(opt.learning_rate))


def _compiled(schedule):
    """The schedule as one compiled function on JAX, made once per schedule. Called eagerly,
    the `ops.cond` of its warm-up is compiled anew by XLA at every call: 37 ms of every
    epoch's end on a CPU (54 ms with its dispatch), longer on a GPU, which waits for it."""
    import keras

    if keras.backend.backend() != "jax":
        return schedule
    compiled = getattr(schedule, "_corolla_compiled", None)
    if compiled is None:
        import jax

        compiled = schedule._corolla_compiled = jax.jit(schedule)
    return compiled
