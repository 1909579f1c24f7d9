"""The learning-rate range test (`training.range_test`), on a problem whose good rate is known:
softmax regression on standardized, overlapping Gaussian classes, trained by plain SGD. The
good constant rate is found independently, by full-batch gradient descent in NumPy over a grid
of rates; the range test (the function the CLI runs) must suggest a rate within 10x of it."""

from __future__ import annotations

import numpy as np
import pytest

from corolla.config.range_test import RangeSettings
from corolla.training import range_test

N, FEATURES, CLASSES = 512, 8, 3
BATCH, SGD_STEPS = 32, 100  # the range test's batch and its number of steps (the default)


@pytest.fixture(scope="module")
def problem():
    """(x standardized [N, FEATURES], one-hot labels): three overlapping Gaussian classes."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(CLASSES, FEATURES)) * 0.7
    labels = rng.integers(0, CLASSES, N)
    x = centres[labels] + rng.normal(size=(N, FEATURES))
    x = ((x - x.mean(0)) / x.std(0)).astype("float32")
    return x, np.eye(CLASSES, dtype="float32")[labels]


def _sgd_loss(x, y, rate: float, seed: int) -> float:
    """Cross-entropy on all of `x` after SGD_STEPS steps of plain SGD at the constant `rate`
    from zero weights, on batches of BATCH drawn with `seed` (NumPy: independent of Keras and
    of the range test)."""
    rng = np.random.default_rng(seed)
    w, b = np.zeros((x.shape[1], y.shape[1])), np.zeros(y.shape[1])

    def probabilities(xs):
        z = xs @ w + b
        z = z - z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    for _ in range(SGD_STEPS):
        i = rng.integers(0, len(x), BATCH)
        p = probabilities(x[i])
        if not np.isfinite(p).all():
            return np.inf
        g = (p - y[i]) / BATCH
        w, b = w - rate * x[i].T @ g, b - rate * g.sum(0)
    p = probabilities(x)
    return float(-np.mean(np.log(np.sum(p * y, 1) + 1e-12)))


def good_rate(x, y) -> tuple[float, np.ndarray]:
    """The known answer: of a grid of constant rates, trained as the range test trains (plain
    SGD, batches of BATCH, as many steps), those whose loss (the mean of 3 draws of batches) is
    within 1% of the grid's best; their geometric middle (the best is a plateau: one rate of it
    by chance would not be an answer)."""
    grid = np.geomspace(1e-3, 1e3, 25)
    losses = np.array([np.mean([_sgd_loss(x, y, r, seed) for seed in range(3)]) for r in grid])
    plateau = grid[losses <= np.nanmin(losses) * 1.01]
    return float(np.exp(np.log(plateau).mean())), plateau


def _linear_test(x, y, settings):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((x.shape[1],)),
                              keras.layers.Dense(y.shape[1], activation="softmax")])
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0).repeat().batch(
        BATCH)
    before = [v.numpy().copy() for v in model.variables]

    def compile_with(schedule):
        model.compile(optimizer=keras.optimizers.SGD(schedule),  # no momentum
                      loss="categorical_crossentropy")

    lines = []
    found = range_test.range_test(model, data, compile_with, settings, log=lines.append)
    return found, model, before, lines


def test_the_suggestion_is_within_10x_of_the_best_constant_rate_of_a_linear_model(problem):
    x, y = problem
    rate, plateau = good_rate(x, y)
    assert 0.03 < rate < 3 and len(plateau) < 6  # a known answer, not a flat curve
    found, _, _, lines = _linear_test(x, y, RangeSettings())  # the defaults: 1e-7 to 10, 100
    assert found.settings.rule == "steepest" and found.suggestion is not None
    print(f"suggested {found.suggestion:.3g}, grid's good rate {rate:.3g} "
          f"(plateau {plateau.min():.2g}-{plateau.max():.2g})")
    assert rate / 10 <= found.suggestion <= rate * 10
    assert len(lines) == 10 and "lr-find: step 10/100" in lines[0]  # a line every tenth


def test_the_test_stops_where_the_loss_diverges_puts_the_weights_back_and_draws_it(
        problem, tmp_path):
    from corolla.files import write_json
    from corolla.report import plots

    x, y = problem
    settings = RangeSettings(start=1e-4, end=1e4, steps=100)  # far past where SGD diverges
    found, model, before, _ = _linear_test(x, y, settings)
    assert found.stopped == "diverged" and 20 < len(found.rates) < settings.steps
    assert found.smoothed[-1] > 4 * min(found.smoothed[:-1]) or \
        not np.isfinite(found.smoothed[-1])
    assert np.all(np.diff(found.rates) > 0)
    np.testing.assert_allclose(found.rates, range_test.rates(settings)[:len(found.rates)])
    for variable, value in zip(model.variables, before):  # the test trained nothing
        np.testing.assert_array_equal(variable.numpy(), value)
    record = found.to_dict()
    write_json(record, tmp_path / "lr_find.json")  # JSON-clean: a diverged loss is null
    picture = plots.plot_lr_find(record, tmp_path / "lr_find.png")
    data = picture.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert record["steps_run"] == len(record["rates"]) == len(record["losses"])


def test_the_rules_read_the_curve_and_a_curve_that_never_falls_suggests_nothing():
    settings = RangeSettings(1e-6, 1, 60)
    rates = range_test.rates(settings)
    log_rates = np.log10(rates)
    # A smooth fall centred at 1e-3, then a climb from 1e-1: steepest at 1e-3.
    curve = 2 - 1.5 / (1 + np.exp(-(log_rates + 3) * 3)) + np.maximum(log_rates + 1, 0) ** 2
    rate, index = range_test.suggest(rates, range_test.smooth(curve, beta=0), "steepest", 60)
    assert 10 ** -3.3 < rate < 10 ** -2.7 and rates[index] == rate
    low, _ = range_test.suggest(rates, list(curve), "minimum", 60)
    assert low == pytest.approx(rates[int(np.argmin(curve[10:-1])) + 10] / 10)
    assert range_test.suggest(rates, [1.0] * 60, "steepest", 60) == (None, None)
    assert range_test.suggest(rates, list(np.linspace(1, 2, 60)), "minimum", 60) == (None, None)
    assert range_test.smooth([2.0, 4.0], beta=0.5) == [
        2.0, pytest.approx((0.5 * 1 + 0.5 * 4) / 0.75)]
