"""What a run does at every epoch's end, which a fast accelerator waits for: the
backup's file (training.backup: the model's and its optimizer's variables as one .npz,
which a resumed run loads exactly; an earlier version's Keras `.weights.h5` still resumes; a
file of another model is one line), and the learning rate history.csv and TensorBoard log."""

import keras
import numpy as np
import pytest

from corolla.errors import UserError
from corolla.runs import paths
from corolla.training import backup, checkpoint


def _trained(seed, width=5):
    """A model and its Adam after two steps (moments and step count no longer at their start)."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(width),
                              keras.layers.BatchNormalization(), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.Adam(use_ema=True), loss="mse")
    x = np.random.default_rng(seed).normal(size=(8, 4)).astype("float32")
    model.fit(x, np.ones((8, 3), "float32"), epochs=2, batch_size=8, verbose=0)
    return model


def _values(model):
    return [keras.ops.convert_to_numpy(v) for v in backup.backup_variables(model)]


def _fresh(width=5):
    return _trained(99, width)  # other values everywhere, as a new process has


@pytest.mark.parametrize("name", ["epoch-0001.npz", "epoch-0001.weights.h5"])
def test_a_backup_restores_the_model_and_its_optimizer_exactly(tmp_path, name):
    """Both files a backup folder can hold: Corolla's own, and an earlier version's Keras
    save_weights file (a run interrupted before the upgrade resumes after it)."""
    source = _trained(1)
    state = backup.BackupState(epochs_done=2, weights=name)
    (tmp_path / paths.BACKUP).mkdir()
    if name.endswith(".h5"):
        source.save_weights(tmp_path / paths.BACKUP / name)
    else:
        backup.save_backup(source, tmp_path / paths.BACKUP / name)
    target = _fresh()
    before = _values(target)
    assert any(not np.array_equal(a, b) for a, b in zip(before, _values(source)))
    checkpoint.Checkpoint(tmp_path / paths.BACKUP, state).restore(target)
    restored, expected = _values(target), _values(source)
    # the weights, BatchNorm's moving statistics, Adam's step, moments and EMA
    assert len(restored) == len(expected) > 10
    for a, b in zip(restored, expected):
        np.testing.assert_array_equal(a, b)


def test_the_backup_holds_every_variable_once_in_a_fixed_order(tmp_path):
    model = _trained(2)
    backup.save_backup(model, tmp_path / "b.npz")
    with np.load(tmp_path / "b.npz") as saved:
        arrays = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    variables = backup.backup_variables(model)
    assert len({id(v) for v in variables}) == len(variables) == len(arrays)
    assert int(arrays[len(model.weights)]) == 2  # the optimizer's step count comes first
    for variable, array in zip(variables, arrays):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), array)


def test_a_backup_of_another_model_is_one_line(tmp_path):
    backup.save_backup(_trained(3, width=6), tmp_path / "epoch-0000.npz")
    with pytest.raises(UserError, match=r"epoch-0000.npz holds \d+ arrays that do not fit the "
                                        r"run's model and optimizer .*move the backup folder"):
        backup.load_backup(_fresh(), tmp_path / "epoch-0000.npz")


def test_the_epochs_learning_rate_costs_no_compile_an_epoch_on_jax():
    """history.csv's learning_rate comes from the schedule at the epoch's last step. On JAX,
    calling the schedule eagerly compiled its warm-up's `cond` again at every epoch's end (37 ms
    of XLA on a CPU): it is compiled once per schedule, and gives the schedule's own values."""
    from helpers.processes import REPO, run_python

    code = """
import logging, keras
from corolla.training import schedule as s
from corolla.training.optimizer import epoch_learning_rate
assert keras.backend.backend() == "jax"
opt = keras.optimizers.Adam(s.learning_rate_schedule(1e-3, 100, 10))
opt.build([keras.Variable([1.0])])
compiles = []
class Count(logging.Handler):
    def emit(self, record):
        compiles.append(record.getMessage()) if "Compiling" in record.getMessage() else None
for name in ("jax._src.interpreters.pxla", "jax._src.dispatch"):
    logging.getLogger(name).addHandler(Count())
import jax
jax.config.update("jax_log_compiles", True)
rates = []
for step in (1, 5, 11, 60):
    opt.iterations.assign(step)
    before = len(compiles)
    rates.append(epoch_learning_rate(opt))
    print("COMPILES", len(compiles) - before)
    expected = float(opt._learning_rate(step - 1))
    assert abs(rates[-1] - expected) <= 1e-6 * expected, (rates[-1], expected)  # float32
print("RATES", rates)
"""
    done = run_python(code, env={"KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    counts = [int(line.split()[1]) for line in done.stdout.splitlines()
              if line.startswith("COMPILES")]
    rates = eval(next(line for line in done.stdout.splitlines() if line.startswith("RATES"))[6:])
    assert counts[0] >= 1 and counts[1:] == [0, 0, 0], done.stdout
    assert rates[0] < rates[1] < rates[2] and rates[3] < rates[2]  # warm-up, then decay


def test_tensorboard_logs_the_epochs_own_learning_rate(tmp_path):
    """As history.csv does (Keras' own logs the next step's, at the cost above on JAX)."""
    from corolla.training import schedule
    from corolla.training.callbacks import EpochTensorBoard
    from corolla.training.optimizer import epoch_learning_rate

    assert "_collect_learning_rate" in vars(keras.callbacks.TensorBoard)  # what it overrides
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.Adam(schedule.learning_rate_schedule(1e-3, 40, 20)),
                  loss="mse")
    model.fit(np.zeros((8, 4)), np.zeros((8, 3)), batch_size=2, epochs=1, verbose=0)
    board = EpochTensorBoard(log_dir=str(tmp_path))
    board.set_model(model)
    logged = board._collect_learning_rate({})["learning_rate"]
    assert logged == epoch_learning_rate(model.optimizer)
    assert abs(logged - float(model.optimizer._learning_rate(3))) < 1e-9  # its 4th step's
    assert logged < float(model.optimizer.learning_rate)  # (warming up: the next is higher)
