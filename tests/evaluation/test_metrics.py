"""The one macro F1 (the competition's: over the union of true and predicted labels, as
scikit-learn's default) and the confusion matrix."""

import numpy as np
import pytest

from corolla.scoring import metrics


def test_macro_scores_are_the_competitions_union_of_true_and_predicted_labels():
    names = [f"c{i}" for i in range(104)]
    y_true = [48, 48, 49, 49, 73, 73]
    y_pred = [48, 48, 49, 73, 73, 5]  # class 5 is absent from the labels: it must cost
    m = metrics.classification_metrics(y_true, y_pred, names)
    assert m["num_classes_present"] == 3 and m["num_classes_scored"] == 4
    assert m["num_examples"] == 6 and m["accuracy"] == pytest.approx(4 / 6)
    # Per class, by hand: 48 P=1 R=1 F1=1; 49 P=1 R=1/2 F1=2/3; 73 P=1/2 R=1/2 F1=1/2;
    # 5 (predicted once, never true) P=0 R=0 F1=0. Kaggle averages over all four:
    assert m["precision_macro"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert m["recall_macro"] == pytest.approx((1 + 0.5 + 0.5 + 0) / 4)
    assert m["f1_macro"] == pytest.approx((1 + 2 / 3 + 0.5 + 0) / 4)  # 0.5417
    # The old figure (classes present only) is kept under a name that says so.
    assert m["f1_macro_present"] == pytest.approx((1 + 2 / 3 + 0.5) / 3)  # 0.7222
    assert m["f1_per_class"] == pytest.approx({"c5": 0.0, "c48": 1.0, "c49": 2 / 3, "c73": 0.5})
    assert [(r["name"], r["support"]) for r in m["per_class"]] == [
        ("c5", 0), ("c48", 2), ("c49", 2), ("c73", 2)]


def test_macro_scores_agree_with_scikit_learn_defaults_on_random_predictions():
    from sklearn.metrics import f1_score, precision_score, recall_score

    rng = np.random.default_rng(0)
    y_true, y_pred = rng.integers(0, 30, 200), rng.integers(0, 40, 200)
    m = metrics.classification_metrics(y_true, y_pred, [str(i) for i in range(40)])
    kw = dict(average="macro", zero_division=0)
    assert m["f1_macro"] == pytest.approx(f1_score(y_true, y_pred, **kw))
    assert m["precision_macro"] == pytest.approx(precision_score(y_true, y_pred, **kw))
    assert m["recall_macro"] == pytest.approx(recall_score(y_true, y_pred, **kw))
    assert m["f1_macro"] < m["f1_macro_present"]  # 10 classes only ever predicted cost here


def test_confusion_matrix_is_row_normalised():
    matrix, labels = metrics.confusion_table([0, 0, 1, 1], [0, 1, 1, 1])
    assert labels == [0, 1]
    np.testing.assert_allclose(matrix, [[0.5, 0.5], [0.0, 1.0]])
