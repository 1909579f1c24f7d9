"""Decisions for macro F1 and their uncertainty: per-class offsets fitted on held-out
predictions raise macro F1 on other images where a class is under-predicted; every macro F1
gets a bootstrap interval over images, [1, 1] for a perfect classifier, wider on fewer
images (on runs: end_to_end/test_fitted_bias.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corolla.errors import UserError
from corolla.evaluation import bias
from corolla.scoring import metrics
from corolla.runs.paths import BIAS


def _under_predicted(n: int, seed: int, classes: int = 5):
    """(probabilities, labels): a fair model, but class 0 pushed down by e^2.5 in every row,
    so argmax rarely says class 0 though it is a fifth of the images."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    logits = rng.normal(size=(n, classes))
    logits[np.arange(n), labels] += 2.0
    logits[:, 0] -= 2.5
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True), labels


def test_fitted_offsets_raise_macro_f1_on_images_they_were_not_fitted_on():
    fit_p, fit_y = _under_predicted(1500, seed=1)
    new_p, new_y = _under_predicted(1500, seed=2)
    offsets = bias.fit(fit_p, fit_y)
    assert offsets[0] == offsets.max() and offsets[0] > 1  # the pushed-down class is lifted
    before = metrics.macro_f1(new_y, new_p.argmax(1))
    after = metrics.macro_f1(new_y, bias.decide(new_p, offsets))
    assert after > before + 0.05
    honest = bias.cross_fitted(fit_p, fit_y)
    assert honest["fitted"] > honest["argmax"] + 0.05 and honest["images"] == 1500


def test_offsets_change_nothing_where_argmax_is_already_best():
    labels = np.arange(40) % 4
    perfect = np.eye(4)[labels] * 0.9 + 0.025
    offsets = bias.fit(perfect, labels)
    assert (bias.decide(perfect, offsets) == labels).all()
    np.testing.assert_array_equal(bias.adjusted(perfect, np.zeros(4)).argmax(1), labels)


def test_the_interval_of_a_perfect_classifier_is_one_to_one():
    labels = np.random.default_rng(0).integers(0, 10, 500)
    assert metrics.macro_f1_interval(labels, labels) == (1.0, 1.0)


def test_the_interval_holds_the_figure_and_widens_as_the_split_shrinks():
    p, y = _under_predicted(4000, seed=3)
    predicted = p.argmax(1)
    widths = []
    for n in (4000, 1000, 250):
        low, high = metrics.macro_f1_interval(y[:n], predicted[:n])
        assert low <= metrics.macro_f1(y[:n], predicted[:n]) <= high
        widths.append(high - low)
    assert widths[0] < widths[1] < widths[2]
    assert metrics.macro_f1_interval(y, predicted) == metrics.macro_f1_interval(y, predicted)


CLASSES = ["daisy", "rose", "tulip"]


def _offsets(table: str) -> str:
    return f'{{"offsets": {table}, "fitted_on": "val"}}'


@pytest.mark.parametrize("text, says", [
    (_offsets('{"daisy": 0.5, "rose": NaN, "tulip": 0}'),
     "holds nan as the offset of class 'rose', not a finite number"),
    (_offsets('{"daisy": Infinity, "rose": 0, "tulip": 0}'),
     "holds inf as the offset of class 'daisy'"),
    (_offsets('{"daisy": -Infinity, "rose": 0, "tulip": 0}'), "holds -inf as the offset"),
    (_offsets('{"daisy": "1", "rose": 0, "tulip": 0}'), "holds '1' as the offset of class"),
    (_offsets('{"daisy": true, "rose": 0, "tulip": 0}'), "holds True as the offset"),
    (_offsets('{"daisy": null, "rose": 0, "tulip": 0}'), "holds None as the offset"),
    (_offsets('{"daisy": [1], "rose": 0, "tulip": 0}'), "holds [1] as the offset"),
    (_offsets('{"daisy": 0, "rose": 0}'),
     "holds no offset for class 'tulip' (1 missing, 0 not the run's)"),
    (_offsets('{"daisy": 0, "rose": 0, "tulip": 0, "lily": 1}'),
     "holds an offset for 'lily', which is not a class of the run (0 missing, 1 not the run's)"),
    (_offsets("[0, 0, 0]"), "holds no table of offsets by class"),
    ('{"daisy": 0, "rose": 0, "tulip": 0}', "holds no table of offsets by class"),
    ("[0, 0, 0]", "holds no table of offsets by class"),
    ('{"offsets": {"daisy"', "is damaged"),
])
def test_offsets_that_are_not_one_finite_number_a_class_are_one_line(tmp_path, text, says):
    """Python's json reads NaN: a NaN offset made every row of a submission the same class,
    and `predict --bias fitted` said it was checked."""
    (tmp_path / BIAS).write_text(text)
    with pytest.raises(UserError) as e:
        bias.load_offsets(tmp_path, CLASSES)
    message = str(e.value)
    assert says in message and "\n" not in message and str(tmp_path / BIAS) in message
    assert message.endswith(f"fit them again with `corolla evaluate {tmp_path} --fit-bias`")


def test_fitted_offsets_read_back_in_the_order_of_the_classes(tmp_path):
    (tmp_path / BIAS).write_text(_offsets('{"tulip": 3, "daisy": -0.5, "rose": 0.25}'))
    assert bias.load_offsets(tmp_path, CLASSES).tolist() == [-0.5, 0.25, 3.0]
