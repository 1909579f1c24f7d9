"""The seeds and op determinism a run asks for (train.seed, train.deterministic), set before
its model is built.

Keras and TensorFlow are imported in the function: the backend is chosen first."""

from __future__ import annotations

from corolla import config as config_lib
from corolla.runtime import Plan


def set_determinism(config: config_lib.RunConfig, plan: Plan) -> None:
    """Seeds Python, NumPy and the backend with train.seed; on TensorFlow, turns op
    determinism on or off as train.deterministic says."""
    import keras

    keras.utils.set_random_seed(config.train.seed)
    if plan.backend == "tensorflow":
        import tensorflow as tf

        # Process-wide: a deterministic run before this one (the Python API) must not leave it
        # on, which would also make Keras drop the plan's XLA without a word.
        if config.train.deterministic:
            tf.config.experimental.enable_op_determinism()
        else:  # not exported by TensorFlow, but its counterpart (tests use it the same way)
            from tensorflow.python.framework import config as tf_config

            tf_config.disable_op_determinism()
