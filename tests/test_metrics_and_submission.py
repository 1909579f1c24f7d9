import numpy as np
import pytest

from corolla import metrics, submission


def test_macro_scores_average_over_the_classes_present_only():
    names = [f"c{i}" for i in range(104)]
    y_true = [48, 48, 49, 49, 73, 73]
    y_pred = [48, 48, 49, 73, 73, 5]  # class 5 is absent from the labels
    m = metrics.classification_metrics(y_true, y_pred, names)
    assert m["num_classes_present"] == 3 and m["num_examples"] == 6
    assert m["accuracy"] == pytest.approx(4 / 6)
    # per class: 48 P=1 R=1 F1=1; 49 P=1 R=.5 F1=2/3; 73 P=.5 R=.5 F1=.5
    assert m["precision_macro"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert m["recall_macro"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert m["f1_macro"] == pytest.approx((1 + 2 / 3 + 0.5) / 3)
    assert m["f1_per_class"] == pytest.approx({"c48": 1.0, "c49": 2 / 3, "c73": 0.5})


def test_confusion_matrix_is_row_normalised():
    matrix, labels = metrics.confusion([0, 0, 1, 1], [0, 1, 1, 1])
    assert labels == [0, 1]
    np.testing.assert_allclose(matrix, [[0.5, 0.5], [0.0, 1.0]])


def test_submission_has_header_and_one_row_per_id(tmp_path):
    path = submission.write(["a1", "b2", "c3"], np.array([3, 0, 103]), tmp_path / "s.csv")
    assert path.read_text().splitlines() == ["id,label", "a1,3", "b2,0", "c3,103"]
    assert submission.read(path) == {"a1": 3, "b2": 0, "c3": 103}


def test_submission_refuses_duplicate_ids_and_mismatched_lengths(tmp_path):
    with pytest.raises(ValueError, match="1 duplicate ids"):
        submission.write(["a", "a"], [1, 2], tmp_path / "s.csv")
    with pytest.raises(ValueError, match="2 ids but 1 labels"):
        submission.write(["a", "b"], [1], tmp_path / "s.csv")
    assert not (tmp_path / "s.csv").exists()
