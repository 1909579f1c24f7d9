"""The Keras callbacks a run trains with, Corolla's own: the val macro F1 after every epoch
(`ValMacroF1`, on the EMA weights when the optimizer keeps them: `SwapEMA`, `ema_weights`),
TensorBoard's logs by epoch (`EpochTensorBoard`), the progress bar (`RunProgress`), the epochs
told to a tracker (`TrackEpochs`). (The stop before an epoch that would end past a time budget
is the time plan's: `timing.stop.StopInTime`.)"""

from __future__ import annotations

import contextlib

import keras
import numpy as np
import tensorflow as tf

from corolla.scoring.batched import predict_probabilities, split_batches
from corolla.scoring.metrics import macro_f1
from corolla.training.optimizer import epoch_learning_rate

VAL_F1 = "val_f1_macro"


class SwapEMA(keras.callbacks.SwapEMAWeights):
    """Keras' swap of the weights and their EMA, on the device and exact on both backends.
    Keras' own copies every weight to host memory and back for each swap on JAX
    (`convert_to_numpy`), and on TensorFlow swaps by arithmetic (a += b; b = a - b; a -= b),
    whose rounding leaves the raw weights a little off after every validation. Here a copy on
    the device is held instead (a JAX array is immutable: holding it is the copy)."""

    def _backend_swap_variables(self, optimizer):
        for var, average in zip(optimizer._trainable_variables,
                                optimizer._model_variables_moving_average):
            current = var.value
            var.assign(average.value)
            average.assign(current)

    def _tf_swap_variables(self, optimizer):
        for var, average in zip(optimizer._trainable_variables,
                                optimizer._model_variables_moving_average):
            current = tf.identity(var.value)  # (mirrored copies are equal: any one will do)
            var.assign(average.value)
            average.assign(current)


@contextlib.contextmanager
def ema_weights(swap: keras.callbacks.SwapEMAWeights | None):
    """The model holds its EMA weights inside the block (`SwapEMA`, as Keras' own swap does
    around validation); `swap` None: the weights as they are."""
    if swap is None:
        yield
        return
    swap.on_test_begin()
    try:
        yield
    finally:
        swap.on_test_end()


class ValMacroF1(keras.callbacks.Callback):
    """Puts val macro F1 (scikit-learn's default, as Kaggle scores), val accuracy and val loss
    (the compiled loss) into the epoch's logs, from one prediction pass over the whole val split
    (padded batches, padding dropped: see `scoring.batched.predict_probabilities`), not an
    average of per-batch figures. It is the run's only validation pass (`fit` gets no
    validation_data: that would decode and predict the same images a second time). Every
    process runs the pass on its own devices over the whole split: with the same weights
    everywhere they agree on the figures, so the best epoch and early stopping need no
    collective."""

    def __init__(self, split, image_size: int, labels, plan, swap=None,
                 skip_bad_records: bool = False):
        super().__init__()
        self.split, self.image_size, self.labels = split, image_size, np.asarray(labels)
        self.plan, self.swap, self.skip = plan, swap, skip_bad_records
        self.batches = split_batches(split, image_size, skip_bad_records)  # built once
        # (head, the val split's features): set while the backbone is frozen and its features
        # are cached (training.features), so validation costs the head's pass alone.
        self.cached = None

    def on_epoch_end(self, epoch, logs=None):
        with ema_weights(self.swap):
            if self.cached is not None:
                head, features = self.cached
                probabilities = head.predict(features, batch_size=self.plan.inference_batch,
                                             verbose=0)
            else:
                probabilities = predict_probabilities(self.model, self.split, self.image_size,
                                                      self.plan, self.skip,
                                                      batches=self.batches)
        if logs is not None:
            predicted = probabilities.argmax(axis=1)
            one_hot = np.eye(probabilities.shape[1], dtype=np.float32)[self.labels]
            logs["val_loss"] = float(keras.ops.convert_to_numpy(
                self.model.loss(one_hot, probabilities)))
            logs["val_accuracy"] = float(np.mean(predicted == self.labels))
            logs[VAL_F1] = macro_f1(self.labels, predicted)


class EpochTensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard, whose learning rate is history.csv's: the epoch's own
    (`optimizer.epoch_learning_rate`). Keras' reads `optimizer.learning_rate`, the next step's,
    by calling the schedule eagerly, which on JAX compiles its warm-up's `cond` anew at every
    epoch's end (time a fast accelerator waits for)."""

    def _collect_learning_rate(self, logs):
        logs["learning_rate"] = epoch_learning_rate(self.model.optimizer)
        return logs


class RunProgress(keras.callbacks.ProgbarLogger):
    """Keras' progress bar and epoch lines, counting the run's epochs (`Epoch 15/32`) instead
    of each `fit`'s (a run of several phases calls `fit` once per phase, each with
    `epochs` = the phase's last epoch: `Epoch 8/9`, and no line at all for a phase ending at
    epoch 1). The same numbers as history.csv's `epoch` column and the plots' axis."""

    def __init__(self, total_epochs: int):
        super().__init__()
        self.total_epochs = total_epochs

    def set_params(self, params):
        super().set_params(params)
        self.epochs = self.total_epochs


class TrackEpochs(keras.callbacks.Callback):
    """Sends each epoch to the run's experiment tracker (`runs.tracking`) once it is committed:
    placed after the checkpoint, it sends the row the checkpoint has just saved (history.csv's:
    the epoch's learning rate and seconds too), with any committed row the tracker lacks (an
    epoch a kill came between its backup and this)."""

    def __init__(self, tracker, checkpoint):
        super().__init__()
        self.tracker, self.checkpoint = tracker, checkpoint

    def on_epoch_end(self, epoch, logs=None):
        self.tracker.log_epochs(self.checkpoint.state.history)
