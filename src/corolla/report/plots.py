"""Writers that turn results into files people read: metrics.json and pictures.

Every file is written atomically (`corolla.files`): a reader, or a run stopped half-way, sees the
old file or the new one, never half of one; a write the system refuses ends in one line there.
A folder Corolla may not write into is the user's to fix, and is found before the work."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and TPU VMs
import textwrap

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator

from corolla.config.schema import MAX_EPOCHS
from corolla.files import atomic_path, read_history  # noqa: E402

MAX_MATRIX_CLASSES = 30  # beyond this, names and cells are unreadable: the most confused only


def most_confused(matrix: np.ndarray, limit: int = MAX_MATRIX_CLASSES) -> list[int]:
    """Indices (into `matrix`) of the `limit` classes most involved in mistakes (wrong shares
    in their row and column), in their original order."""
    if len(matrix) <= limit:
        return list(range(len(matrix)))
    wrong = matrix - np.diag(np.diag(matrix))
    return sorted(np.argsort(-(wrong.sum(axis=0) + wrong.sum(axis=1)), kind="stable")[:limit])


def plot_confusion_matrix(matrix: np.ndarray, names: list[str], path: str | Path,
                          title: str = "Confusion matrix (rows: true class, normalised)") -> Path:
    """Row-normalised; with more than MAX_MATRIX_CLASSES classes, only the most confused ones
    (said in the title), so that every name and cell stays readable."""
    total = len(names)
    keep = most_confused(matrix)
    if len(keep) < total:
        matrix, names = matrix[np.ix_(keep, keep)], [names[i] for i in keep]
        title = f"{title}\nthe {len(keep)} most confused of {total} classes"
    n = len(names)
    size = min(4 + 0.35 * n, 16)
    fig, ax = plt.subplots(figsize=(size, size))
    image = ax.imshow(matrix, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(n), [s.strip() for s in names], rotation=90, fontsize=8)
    ax.set_yticks(range(n), [s.strip() for s in names], fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    for i in range(n):
        for j in range(n):
            if matrix[i, j] >= 0.005:
                ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if matrix[i, j] > 0.5 else "black")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return save_figure(fig, path)


def epoch_axis(ax, epochs: list[int]) -> None:
    """Whole-epoch ticks numbered as in history.csv: every epoch's own on short runs (a single
    epoch too, where matplotlib would put fractional ones around it)."""
    ax.set_xlabel("epoch (from 1, as in the log and history.csv)")
    if len(epochs) <= 20:
        ax.set_xticks(epochs)
        ax.set_xlim(epochs[0] - 0.5, epochs[-1] + 0.5)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_history(history_csv: str | Path, path: str | Path) -> Path | None:
    """Loss, accuracy (train against validation, and val macro F1 where recorded) and the
    learning rate per epoch, from the run's history.csv; the epochs are numbered as in that
    file, on whole-number ticks."""
    rows = read_history(history_csv, MAX_EPOCHS)
    if not rows:
        return None
    epochs = [r["epoch"] for r in rows]
    panels = [k for k in ("loss", "accuracy", "learning_rate") if k in rows[0]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, key in zip(axes[0], panels):
        for prefix, style in (("", "-o"), ("val_", "-s")):
            if prefix + key in rows[0]:
                ax.plot(epochs, [float(r[prefix + key]) for r in rows], style,
                        label=(f"{'val' if prefix else 'train'} {key}"
                               if key != "learning_rate" else "at the end of the epoch"))
        if key == "accuracy" and "val_f1_macro" in rows[0]:  # the competition's metric
            ax.plot(epochs, [float(r["val_f1_macro"]) for r in rows], "-^",
                    label="val macro F1")
        epoch_axis(ax, epochs)
        ax.set_title(key.replace("_", " "))
        ax.grid(alpha=0.3)
        ax.legend()
    return save_figure(fig, path)


def image_grid(rows: int, columns: int, figsize: tuple[float, float]):
    """(figure, 2-D array of axes) for a grid of pictures: every axes bare, the unused ones
    blank. `axis("off")` alone still makes matplotlib lay out the hidden axes' ticks at every
    draw (to place each title above them): hidden too, a grid draws faster, to the same
    pixels (`python benchmarks/report_pictures.py`; figures: docs/benchmarks.md#the-test-suite)."""
    fig, axes = plt.subplots(rows, columns, figsize=figsize, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
        ax.xaxis.set_visible(False)
        ax.yaxis.set_visible(False)
    return fig, axes


def plot_samples(images: np.ndarray, y_true, y_pred, names, path: str | Path,
                 columns: int = 6, title: str = "Sample predictions",
                 confidence=None) -> Path:
    """A grid of images titled with the prediction (and the true class where it is wrong, in
    red, as the figure's own title says); `confidence`: the predicted probability, shown too."""
    n = len(images)
    rows = max(1, -(-n // columns))
    fig, axes = image_grid(rows, columns, (2.2 * columns, 2.4 * rows + 0.6))
    for k, (ax, image, t, p) in enumerate(zip(axes.flat, images, y_true, y_pred)):
        ax.imshow(np.clip(image, 0, 255).astype(np.uint8))
        ok = t == p
        label = names[p].strip() + (f" {confidence[k]:.0%}" if confidence is not None else "")
        ax.set_title(label if ok else f"{label}\n(true: {names[t].strip()})", fontsize=8,
                     color="black" if ok else "red")
    fig.suptitle(f"{title}: predicted class; in red, a wrong prediction (true class below)",
                 fontsize=10)
    return save_figure(fig, path)


def plot_explanations(images: np.ndarray, heatmaps: np.ndarray, titles: list[str],
                      path: str | Path, columns: int = 6, title: str = "Grad-CAM",
                      wrong=None) -> Path:
    """Each image beside the same image under its heatmap (`evaluation.gradcam`: red where the
    evidence for the explained class lies); `wrong[k]`: title k in red."""
    n = len(images)
    pairs = max(1, min(columns // 2, n))
    rows = max(1, -(-n // pairs))
    heading = textwrap.fill(f"{title}: each image, then where the evidence for the explained "
                            f"class lies (red: most)", width=int(2.2 * 2 * pairs * 9))
    fig, axes = plt.subplots(rows, 2 * pairs, figsize=(2.2 * 2 * pairs,
                                                       2.4 * rows + 0.25 * heading.count("\n")
                                                       + 0.6), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for k, (image, heat, text) in enumerate(zip(images, heatmaps, titles)):
        plain, overlay = axes.flat[2 * k], axes.flat[2 * k + 1]
        picture = np.clip(image, 0, 255).astype(np.uint8)
        plain.imshow(picture)
        plain.set_title(textwrap.fill(text, 30), fontsize=8,
                        color="red" if wrong is not None and wrong[k] else "black")
        overlay.imshow(picture)
        overlay.imshow(heat, cmap="jet", alpha=0.45, vmin=0, vmax=1)
    fig.suptitle(heading, fontsize=10)
    return save_figure(fig, path)


# A log keeps a table of up to this many classes whole; of more (the competition's 104), the
# worst few: a hundred lines would bury the log's other lines, and metrics.json and
# report.html hold every class.
TABLE_CLASSES = 20
WORST_CLASSES = 10


def per_class_table(per_class: list[dict], most: int = TABLE_CLASSES,
                    worst: int = WORST_CLASSES) -> list[str]:
    """metrics.json's per-class rows as aligned text lines for the terminal. Of more than
    `most` classes, a line that counts them, then the `worst` rows by F1 (ties: the larger
    support first), lowest first."""
    if len(per_class) <= most:
        return _table(per_class)
    f1 = np.array([r["f1"] for r in per_class])
    rows = sorted(per_class, key=lambda r: (r["f1"], -r["support"]))[:worst]
    summary = (f"{len(per_class)} classes: F1 median {np.median(f1):.4f}, "
               f"{int((f1 == 1).sum())} at 1, {int((f1 == 0).sum())} at 0; the {len(rows)} "
               f"lowest below (every class in metrics.json and report.html)")
    return [summary] + _table(rows)


def _table(per_class: list[dict]) -> list[str]:
    width = max([len("class")] + [len(r["name"].strip()) for r in per_class])
    lines = [f"{'class':<{width}}  support  precision  recall      F1"]
    lines += [f"{r['name'].strip():<{width}}  {r['support']:>7d}  {r['precision']:>9.4f}  "
              f"{r['recall']:>6.4f}  {r['f1']:>6.4f}" for r in per_class]
    return lines


def save_figure(fig, path) -> Path:
    """Saves under a temporary name, then renames: a failed save leaves the previous picture.
    The format is given, not guessed from the temporary name."""
    path = Path(path)
    try:
        fig.tight_layout()
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=90)
    finally:
        plt.close(fig)  # a failed save must not leak the figure either
    return path


def plot_lr_find(found: dict, path: str | Path) -> Path:
    """The range test (`training.range_test`'s record, as lr_find.json holds it): the loss of each
    step and its smoothed curve against the rate on a log axis, the suggested rate marked.
    The loss axis stops a little above where the smoothed loss began: the divergence's tail
    would flatten the part people read. The smoothed curve lags the steps' (an average of the
    last ~50): the rule reads it, as fastai's and Lightning's do."""
    rates = np.asarray(found["rates"], dtype=float)
    losses = np.asarray([np.nan if v is None else v for v in found["losses"]], dtype=float)
    smoothed = np.asarray([np.nan if v is None else v for v in found["smoothed"]], dtype=float)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(rates, losses, color="0.7", lw=0.8, label="loss of each step")
    ax.plot(rates, smoothed, color="C0", lw=2, label="smoothed loss (EMA 0.98)")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel("training loss")
    finite = smoothed[np.isfinite(smoothed)]
    if finite.size:  # from the steps' lowest (bar a few outliers) to a little above the start
        steps = losses[np.isfinite(losses)]
        low = min(finite.min(), np.percentile(steps, 2) if steps.size else finite.min())
        top = max(finite[0], finite.min())
        top += 0.25 * (top - low) + 1e-6
        ax.set_ylim(low - 0.05 * (top - low) - 1e-6, top)
    if found.get("suggestion"):
        rate = found["suggestion"]
        ax.axvline(rate, color="C3", ls="--", lw=1.2)
        at = found.get("index")
        if at is not None and np.isfinite(smoothed[at]):
            ax.plot([rates[at]], [smoothed[at]], "o", color="C3", ms=8)
        ax.plot([], [], color="C3", ls="--", label=f"suggested {rate:.3g} ({found['rule_text']})")
    stopped = ("stopped: the loss diverged" if found.get("stopped") == "diverged"
               else "all steps run")
    ax.set_title(f"Learning-rate range test: {found['steps_run']} steps from "
                 f"{found['start']:g} to {found['end']:g}, {stopped}", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower left", fontsize=9)
    return save_figure(fig, path)
