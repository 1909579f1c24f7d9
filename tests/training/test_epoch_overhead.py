"""What an epoch costs beyond its training steps (figures from
benchmarks/overhead.py): validation batches cross to the device as uint8, the EMA swap around
validation stays on the device on JAX, a val split that fits in memory is decoded once, the
best epoch keeps weights alone (see test_training_options for the run it becomes), and Keras'
JAX trainer gets no steps per execution it would only loop over in Python
(runtime/test_decide.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corolla.data import datasets, pipeline
from helpers.processes import run_python


def test_validation_batches_are_uint8_and_predict_as_float32_would(tiny_petals):
    import keras

    from corolla import models

    split = datasets.open_data(str(tiny_petals), 0, 32).split("val")
    batches = pipeline.eval_dataset(split, 32, 8)
    assert batches.element_spec.dtype.name == "uint8"
    images = np.concatenate([b.numpy() for b in batches])
    assert images.dtype == np.uint8 and len(images) == 32 and images.max() > 0
    model = models.create_model("small_cnn", 4, 32, "none")
    as_uint8 = model.predict(batches, verbose=0)
    as_float = model.predict(images.astype(np.float32), batch_size=8, verbose=0)
    np.testing.assert_array_equal(as_uint8, as_float)
    keras.backend.clear_session()


SWAP = """
import os, sys
import numpy as np, keras
import keras.src.ops

from corolla.training.callbacks import SwapEMA, ema_weights

model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
model.compile(keras.optimizers.Adam(0.1, use_ema=True, ema_momentum=0.5), "mse")
for _ in range(3):  # (not fit: its end puts the EMA into the model)
    model.train_on_batch(np.ones((8, 3)), np.ones((8, 2)))
raw = [np.array(v) for v in model.trainable_weights]
ema = [np.array(v) for v in model.optimizer._model_variables_moving_average]
assert not all(np.array_equal(r, e) for r, e in zip(raw, ema))

def no_host(*args, **kwargs):
    raise AssertionError("a weight went through host memory")

keras.src.ops.convert_to_numpy = no_host  # what Keras' own swap calls on JAX
swap = SwapEMA()
swap.set_model(model)
with ema_weights(swap):
    inside = [np.array(v) for v in model.trainable_weights]
    averages = [np.array(v) for v in model.optimizer._model_variables_moving_average]
after = [np.array(v) for v in model.trainable_weights]
assert all(np.array_equal(a, b) for a, b in zip(inside, ema)), "EMA weights not swapped in"
assert all(np.array_equal(a, b) for a, b in zip(averages, raw)), "raw weights not kept"
assert all(np.array_equal(a, b) for a, b in zip(after, raw)), "raw weights not back"
print("SWAPPED", keras.backend.backend())
"""


@pytest.mark.slow
def test_the_ema_swap_stays_on_the_device_and_swaps_back(monkeypatch, capsys):
    """Inside `ema_weights` the model holds the EMA, the optimizer the raw weights; after it,
    the raw weights again, bit for bit; and no weight is copied to host memory (Keras' own swap
    converts every one to NumPy on JAX), on both backends: JAX in a fresh interpreter (a
    backend is fixed per process), TensorFlow in this one (its backend already)."""
    done = run_python(SWAP, env={"KERAS_BACKEND": "jax"}, timeout=180)
    assert "SWAPPED jax" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    import keras.src.ops

    monkeypatch.setattr(keras.src.ops, "convert_to_numpy", keras.src.ops.convert_to_numpy)
    exec(SWAP, {})  # (SWAP replaces convert_to_numpy: the monkeypatch puts it back)
    assert "SWAPPED tensorflow" in capsys.readouterr().out


def test_a_val_split_that_fits_in_memory_is_decoded_once(tiny_petals, tmp_path, monkeypatch):
    """Training's val split (`split_batches`) keeps its decoded batches after the first whole
    pass: the next passes give the same images with its files gone. Over the memory budget
    it reads its files every pass."""
    import shutil

    from corolla.scoring import batched

    def first_pass_then_delete(budget):
        data = shutil.copytree(tiny_petals, tmp_path / f"data-{budget}")
        monkeypatch.setattr(batched, "CACHE_BYTES", budget)
        split = datasets.open_data(str(data), 0, 32).split("val")
        batches = batched.split_batches(split, 32)(8)
        first = np.concatenate([b.numpy() for b in batches])
        shutil.rmtree(data)
        return first, batches

    first, batches = first_pass_then_delete(batched.CACHE_BYTES)
    assert len(first) == 32
    np.testing.assert_array_equal(np.concatenate([b.numpy() for b in batches]), first)
    _, uncached = first_pass_then_delete(32 * 32 * 32 * 3 - 1)  # one byte short
    with pytest.raises(Exception, match="No such file|NotFound"):
        next(iter(uncached))
