"""The pictures and the terminal table: each picture is a valid, non-blank PNG of a plausible
size; a 104-class matrix shows the most confused classes; the table lines up."""

import json

import numpy as np
import pytest

from corolla.scoring import metrics
from corolla.report import plots
from corolla.runs import paths


def _check_png(path, min_side=200):
    import matplotlib.image

    pixels = matplotlib.image.imread(path)  # fails on anything that is not a whole PNG
    assert min(pixels.shape[:2]) >= min_side
    assert pixels[..., :3].std() > 0.02  # not blank
    assert not list(path.parent.glob(".*partial*"))


def test_confusion_matrix_of_104_classes_keeps_the_most_confused(tmp_path):
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, 104, 2000)
    y_pred = y_true.copy()
    y_pred[:200] = (y_true[:200] + 1) % 104  # class k mistaken for k + 1, for some
    y_pred[y_true == 7] = 90  # class 7 always mistaken for 90: both must be kept
    matrix, labels = metrics.confusion_table(y_true, y_pred)
    keep = plots.most_confused(matrix)
    assert len(keep) == plots.MAX_MATRIX_CLASSES and keep == sorted(keep)
    assert {labels.index(7), labels.index(90)} <= set(keep)
    names = [f"flower {i}" for i in range(104)]
    _check_png(plots.plot_confusion_matrix(matrix, [names[i] for i in labels],
                                           tmp_path / "cm.png"))


def test_training_curves_show_loss_accuracy_and_learning_rate(tmp_path):
    history = tmp_path / paths.HISTORY
    history.write_text("epoch,accuracy,learning_rate,loss,val_accuracy,val_loss\n"
                       "0,0.5,0.003,1.6,0.4,1.7\n1,0.7,0.002,1.1,0.6,1.2\n")
    path = plots.plot_history(history, tmp_path / "curves.png")
    _check_png(path)


@pytest.mark.parametrize("epochs", [[0], [0, 1], [3, 4, 5], list(range(40))])
def test_epoch_ticks_are_whole_epochs_even_for_one_epoch(epochs):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot(epochs, [1.0] * len(epochs))
    plots.epoch_axis(ax, epochs)
    ticks = [t for t in ax.get_xticks() if epochs[0] - 0.5 <= t <= epochs[-1] + 0.5]
    plt.close(fig)
    assert ticks and all(float(t).is_integer() for t in ticks)
    assert set(ticks) <= set(epochs) and (len(epochs) > 20 or ticks == epochs)


def test_sample_and_mistake_grids_are_pictures(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.uniform(0, 255, (7, 32, 32, 3)).astype(np.float32)
    names = ["daisy", "rose", "cyclamen "]
    y_true, y_pred = np.array([0, 1, 2, 0, 1, 2, 0]), np.array([0, 2, 2, 1, 1, 2, 0])
    _check_png(plots.plot_samples(images, y_true, y_pred, names, tmp_path / "s.png"))
    _check_png(plots.plot_samples(images[:2], y_true[:2], y_pred[:2], names, tmp_path / "m.png",
                                  title="Most confident mistakes",
                                  confidence=np.array([0.9, 0.8])), min_side=150)


def test_a_picture_grid_lays_out_no_ticks_and_draws_what_hidden_axes_draw(tmp_path,
                                                                          monkeypatch):
    import matplotlib.axis
    import matplotlib.image
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(2)
    images = rng.uniform(0, 255, (5, 32, 32, 3)).astype(np.uint8)

    def draw(fig, axes, path):
        for k, ax in enumerate(axes.flat[:len(images)]):
            ax.imshow(images[k])
            ax.set_title(f"rose {k}\n(true: daisy)", fontsize=8, color="red")
        fig.suptitle("grid", fontsize=10)
        return matplotlib.image.imread(plots.save_figure(fig, path))

    # The same grid with its axes turned off only: what the pictures looked like before.
    fig, axes = plt.subplots(2, 3, figsize=(6.6, 5.4), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    before = draw(fig, axes, tmp_path / "off.png")
    # The grid's own: not one tick laid out (hidden ticks were the most of a grid's drawing
    # time), to the same pixels.
    laid_out = []
    update = matplotlib.axis.Axis._update_ticks
    monkeypatch.setattr(matplotlib.axis.Axis, "_update_ticks",
                        lambda self: laid_out.append(self) or update(self))
    after = draw(*plots.image_grid(2, 3, (6.6, 5.4)), tmp_path / "grid.png")
    assert laid_out == []
    assert after.shape == before.shape and np.array_equal(after, before)


def test_per_class_table_lines_up():
    m = metrics.classification_metrics([0, 0, 1, 2], [0, 1, 1, 2], ["daisy", "rose", "tulip "])
    lines = plots.per_class_table(m["per_class"])
    assert lines[0].split() == ["class", "support", "precision", "recall", "F1"]
    assert lines[1].split() == ["daisy", "2", "1.0000", "0.5000", "0.6667"]
    assert len({len(line) for line in lines}) == 1  # aligned columns


def _row(name, f1, support=10):
    return {"label": 0, "name": name, "support": support, "precision": f1, "recall": f1,
            "f1": f1}


def test_a_per_class_table_of_many_classes_is_summarised_by_its_worst():
    """The competition's 104 classes: one line of counts, then the ten lowest F1, lowest first
    (ties: the larger support first); 20 classes are still listed whole."""
    low = [_row("rare", 0.5, 3), _row("zero", 0.0, 4), _row("common", 0.5, 9)]
    low += [_row(f"weak {k}", 0.6 + k / 100) for k in range(9)]
    per_class = [_row(f"class {k}", 1.0) for k in range(92)] + low
    lines = plots.per_class_table(per_class)
    assert lines[0] == ("104 classes: F1 median 1.0000, 92 at 1, 1 at 0; the 10 lowest below "
                        "(every class in metrics.json and report.html)")
    assert lines[1].split() == ["class", "support", "precision", "recall", "F1"]
    assert [line.split()[0] for line in lines[2:5]] == ["zero", "common", "rare"]
    assert [" ".join(line.split()[:2]) for line in lines[5:]] == \
        [f"weak {k}" for k in range(7)]
    assert len({len(line) for line in lines[1:]}) == 1  # aligned columns
    twenty = plots.per_class_table(per_class[-20:])
    assert len(twenty) == 21 and twenty[0].split()[0] == "class"


@pytest.mark.parametrize("wrong, expected", [([], []), ([1, 3], [3, 1])])
def test_most_confident_mistakes_come_first(wrong, expected):
    from corolla.evaluation.labelled import Evaluation, most_confident_mistakes

    y_true = np.zeros(4, int)
    y_pred = y_true.copy()
    y_pred[wrong] = 1
    probabilities = np.array([[0.9, 0.1], [0.3, 0.7], [0.8, 0.2], [0.05, 0.95]])
    evaluation = Evaluation({}, ["a", "b", "c", "d"], y_true, y_pred, probabilities)
    assert most_confident_mistakes(evaluation, 5).tolist() == expected


def test_the_hardware_found_lists_what_was_found_not_empty_fields(tmp_path):
    """The report's hardware table read `tpu None` on every machine without a TPU."""
    from corolla.report import html

    (tmp_path / paths.PLAN).write_text(json.dumps({"sessions": [{
        "started": "2026-11-26 06:00:00", "plan": {"accelerator": "cpu", "hardware": {
            "tpu": None, "tpu_cores": 0, "gpus": 0, "cpu_devices": 2, "jax_platform": "cpu",
            "device_name": ""}}}]}))
    section = html._plan(html.Sources(tmp_path, "run", {}, tmp_path))
    found = section.split("Hardware found")[1]
    assert '<td class="txt">cpu_devices</td><td class="txt">2</td>' in found
    assert "None" not in found and "tpu" not in found and "device_name" not in found
