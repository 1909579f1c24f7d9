"""Writers that turn results into files people read: metrics.json and pictures."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and TPU VMs
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def write_json(data: dict, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def plot_confusion_matrix(matrix: np.ndarray, names: list[str], path: str | Path,
                          title: str = "Confusion matrix (rows: true class, normalised)") -> Path:
    n = len(names)
    size = min(4 + 0.35 * n, 40)
    fig, ax = plt.subplots(figsize=(size, size))
    image = ax.imshow(matrix, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(n), [s.strip() for s in names], rotation=90, fontsize=8)
    ax.set_yticks(range(n), [s.strip() for s in names], fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    if n <= 30:
        for i in range(n):
            for j in range(n):
                if matrix[i, j] >= 0.005:
                    ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if matrix[i, j] > 0.5 else "black")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return _save(fig, path)


def plot_history(history_csv: str | Path, path: str | Path) -> Path | None:
    """Loss and accuracy per epoch, train against validation, from Keras' CSVLogger file."""
    with Path(history_csv).open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    epochs = [int(r["epoch"]) + 1 for r in rows]
    panels = [k for k in ("loss", "accuracy") if k in rows[0]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, key in zip(axes[0], panels):
        for prefix, style in (("", "-o"), ("val_", "-s")):
            if prefix + key in rows[0]:
                ax.plot(epochs, [float(r[prefix + key]) for r in rows], style,
                        label=(prefix or "train_") + key)
        ax.set_xlabel("epoch")
        ax.set_title(key)
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(fig, path)


def plot_samples(images: np.ndarray, y_true, y_pred, names, path: str | Path,
                 columns: int = 6) -> Path:
    """A grid of images titled with the prediction, red where it is wrong."""
    n = len(images)
    rows = max(1, -(-n // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(2.2 * columns, 2.4 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, image, t, p in zip(axes.flat, images, y_true, y_pred):
        ax.imshow(np.clip(image, 0, 255).astype(np.uint8))
        ok = t == p
        title = names[p].strip() if ok else f"{names[p].strip()}\n(true: {names[t].strip()})"
        ax.set_title(title, fontsize=8, color="black" if ok else "red")
    return _save(fig, path)


def _save(fig, path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return Path(path)
