"""Run in a fresh interpreter: split this machine's CPU into N devices, let Corolla detect the
plan, and either train a small fixed model for a few steps on one device and on all N (printing
each one's plan, losses and weights as JSON: {"one": ..., "all": ...}) or run `corolla train` on
a data set.

    python replicas.py BACKEND N equivalence
    python replicas.py BACKEND N train DATA RUNS_DIR [GLOBAL_BATCH [CONFIG_OVERRIDES_JSON]]
"""

import json
import os
import sys

backend, devices, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.environ["KERAS_BACKEND"] = backend
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
if backend == "jax":
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
else:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * devices)

import numpy as np  # noqa: E402

from corolla import runtime  # noqa: E402

GLOBAL_BATCH = int(sys.argv[6]) if mode == "train" and len(sys.argv) > 6 else 16


def described(plan) -> dict:
    return {"strategy": plan.strategy_name, "replicas": plan.replicas,
            "global_batch": plan.global_batch, "batch_per_replica": plan.batch_per_replica}


def fit_fixed_model(plan) -> dict:
    """Three epochs of a small fixed model on fixed data in `plan`'s scope: its losses and
    final weights (the same seed, data and order whatever the plan)."""
    import keras
    import tensorflow as tf

    from corolla.training import compile_model

    # No BatchNormalization: its statistics are per replica by design, which is not what this
    # checks (that the strategy splits the batch and sums the gradients exactly).
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (GLOBAL_BATCH * 4, 16, 16, 3)).astype("float32")
    y = np.eye(3, dtype="float32")[rng.integers(0, 3, GLOBAL_BATCH * 4)]  # one-hot, as fit's
    with plan.scope():
        model = keras.Sequential([
            keras.Input((16, 16, 3)), keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(8, 3, activation="relu"), keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(3, activation="softmax")])
        compile_model(model, plan, 1e-2)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH, drop_remainder=True)
    history = model.fit(ds, epochs=3, shuffle=False, verbose=0)
    return {**described(plan), "losses": [float(v) for v in history.history["loss"]],
            "weights": [np.asarray(w).tolist() for w in model.get_weights()]}


if mode == "equivalence":
    # One process for both (each fresh interpreter imports TensorFlow again): the one-device
    # plan first ("default": no strategy or distribution), then the plan over all N devices.
    one = fit_fixed_model(runtime.detect(backend=backend, strategy="default",
                                         global_batch_size=GLOBAL_BATCH))
    out = {"one": one, "all": fit_fixed_model(runtime.detect(backend=backend,
                                                             global_batch_size=GLOBAL_BATCH))}
else:
    from corolla import config
    from corolla.flows.run import train_evaluate_predict

    plan = runtime.detect(backend=backend, global_batch_size=GLOBAL_BATCH)
    out = described(plan)
    # Two epochs with progressive resizing: the first at 16 px, the second at the data's 32.
    cfg = config.load_config(overrides={"data.path": sys.argv[4], "output.runs_dir": sys.argv[5],
                                        "output.name": "run", "train.epochs": 2,
                                        "train.start_size": 16,
                                        "train.global_batch_size": GLOBAL_BATCH,
                                        **(json.loads(sys.argv[7]) if len(sys.argv) > 7 else {})})
    run_dir, metrics = train_evaluate_predict(cfg, plan, log=lambda *a: None)
    out["run_dir"], out["f1_macro"] = str(run_dir), metrics["f1_macro"]
print("RESULT " + json.dumps(out))
