"""One worker of a MultiWorkerMirroredStrategy Keras run (used by
tests/runtime/test_multiworker_keras.py).

Usage: python mwms_worker.py OUT_DIR [--no-patch] [--callbacks]
           [--validation] [--reference] [--steps-per-execution N] [--epochs N]

The cluster comes from TF_CONFIG (absent -> a one-worker MWMS run).
Writes OUT_DIR/weights_<task>.npz, OUT_DIR/predict_<task>.npy and
OUT_DIR/result_<task>.json.  With --reference, task 0 afterwards also trains
the same model (same initial weights, same global batches) without any
distribution strategy, in-process, and writes OUT_DIR/reference.{npz,json}
and OUT_DIR/reference_predict.npy.
"""

import argparse
import importlib.util
import json
import os
import sys
import time

_T0 = time.monotonic()

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["KERAS_BACKEND"] = "tensorflow"

GLOBAL_BATCH = 8
NUM_EXAMPLES = 64
_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_MODULE = os.path.join(_REPO, "src", "corolla", "runtime", "multiworker.py")


def _load_fix_module():
    # Load the module by path so this test does not depend on the rest of the
    # corolla package (the module itself imports nothing from corolla).
    spec = importlib.util.spec_from_file_location("corolla_mwms_fix", _MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _data():
    import numpy as np

    rng = np.random.RandomState(0)
    x = rng.rand(NUM_EXAMPLES, 16, 16, 3).astype("float32")
    y = rng.randint(0, 3, size=(NUM_EXAMPLES,)).astype("int64")
    return x, y


def _dataset(x, y=None):
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices(x if y is None else (x, y))
    ds = ds.batch(GLOBAL_BATCH)  # global batch; MWMS splits it per replica
    options = tf.data.Options()
    # In-memory data has no files to shard: shard by element.
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return ds.with_options(options)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--no-patch", action="store_true")
    parser.add_argument("--callbacks", action="store_true")
    parser.add_argument("--validation", action="store_true")
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--steps-per-execution", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {}).get("index", 0)

    if not args.no_patch:
        fix = _load_fix_module()
        assert fix.apply_keras_multiworker_fixes()
        assert fix.apply_keras_multiworker_fixes()  # idempotent
        # Reloading the module must not wrap the wrappers again.
        assert _load_fix_module().apply_keras_multiworker_fixes()
        from keras.src.backend.tensorflow import trainer as tf_trainer

        for fn in (
            tf_trainer.TensorFlowTrainer._maybe_symbolic_build,
            tf_trainer.reduce_per_replica,
        ):
            assert not hasattr(fn.__wrapped__, "__wrapped__")

    import numpy as np
    import tensorflow as tf
    import keras

    keras.config.disable_traceback_filtering()
    timings = {"imported": time.monotonic() - _T0}
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    timings["strategy"] = time.monotonic() - _T0
    x, y = _data()

    def build_model():
        keras.utils.set_random_seed(1)
        model = keras.Sequential(
            [
                keras.Input((16, 16, 3)),
                keras.layers.Conv2D(4, 3, activation="relu"),
                keras.layers.GlobalAveragePooling2D(),
                keras.layers.Dense(3, activation="softmax"),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(1e-2),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
            steps_per_execution=args.steps_per_execution,
        )
        return model

    with strategy.scope():
        model = build_model()
    initial_weights = model.get_weights()

    callbacks = []
    if args.callbacks:
        # Keras 3 callbacks are not multi-worker aware: one path per worker.
        wdir = os.path.join(args.out_dir, "worker_%d" % task)
        os.makedirs(wdir, exist_ok=True)
        callbacks = [
            keras.callbacks.ModelCheckpoint(
                os.path.join(wdir, "ckpt.weights.h5"), save_weights_only=True
            ),
            keras.callbacks.BackupAndRestore(os.path.join(wdir, "backup")),
            keras.callbacks.CSVLogger(os.path.join(wdir, "log.csv")),
        ]

    history = model.fit(
        _dataset(x, y),
        epochs=args.epochs,
        verbose=2 if task == 0 else 0,
        callbacks=callbacks,
        validation_data=_dataset(x, y) if args.validation else None,
    )
    timings["fit"] = time.monotonic() - _T0
    evaluation = model.evaluate(_dataset(x, y), verbose=0, return_dict=True)
    timings["evaluate"] = time.monotonic() - _T0
    predictions = model.predict(_dataset(x), verbose=0)
    timings["predict"] = time.monotonic() - _T0

    np.savez(
        os.path.join(args.out_dir, "weights_%d.npz" % task),
        *model.get_weights(),
    )
    np.save(os.path.join(args.out_dir, "predict_%d.npy" % task), predictions)
    with open(os.path.join(args.out_dir, "result_%d.json" % task), "w") as f:
        json.dump(
            {
                "task": task,
                "num_replicas": strategy.num_replicas_in_sync,
                "history": history.history,
                "evaluate": evaluation,
                "predict_shape": list(predictions.shape),
                "timings_s": timings,
            },
            f,
        )
    print("worker %d done: %s" % (task, evaluation), flush=True)

    if args.reference and task == 0:
        # No strategy scope -> default (non-distributed) strategy.
        ref = build_model()
        ref.set_weights(initial_weights)
        ref_history = ref.fit(_dataset(x, y), epochs=args.epochs, verbose=0)
        ref_eval = ref.evaluate(_dataset(x, y), verbose=0, return_dict=True)
        ref_pred = ref.predict(_dataset(x), verbose=0)
        np.savez(
            os.path.join(args.out_dir, "reference.npz"), *ref.get_weights()
        )
        np.save(os.path.join(args.out_dir, "reference_predict.npy"), ref_pred)
        with open(os.path.join(args.out_dir, "reference.json"), "w") as f:
            json.dump(
                {"history": ref_history.history, "evaluate": ref_eval}, f
            )
        print("reference done: %s" % (ref_eval,), flush=True)


if __name__ == "__main__":
    sys.exit(main())
