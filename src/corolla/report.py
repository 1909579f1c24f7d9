"""Writers that turn results into files people read: metrics.json and pictures.

Every file is written atomically (`corolla.files`): a reader, or a run stopped half-way, sees the
old file or the new one, never half of one; a write the system refuses ends in one line there.
A folder Corolla may not write into is the user's to fix, and is found before the work."""

from __future__ import annotations

import csv
import errno
import json
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and TPU VMs
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from corolla.errors import UserError  # noqa: E402
from corolla.files import atomic_path, write_text_atomic  # noqa: E402

# What the system says when a folder cannot be written, as opposed to a bug.
_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def check_folder(folder: str | Path, flag: str = "") -> Path:
    """Fails before the work, not after it: a missing folder, or one this user may not write
    into, is found before a model is loaded. `flag` names the option that chose the folder."""
    folder = Path(folder)
    other = f" or pass {flag} with another one" if flag else ""
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise UserError(f"folder {folder} {what}; create it first{other}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write into {folder} (permission denied); make it writable"
                        f"{other}")
    return folder


def make_folder(folder: str | Path) -> Path:
    """The folder, made if missing (not its parents: a mistyped path is not built), with a
    refusal of the system as one line."""
    folder = Path(folder)
    try:
        folder.mkdir(exist_ok=True)
    except FileNotFoundError:
        raise UserError(f"cannot make {folder}: {folder.parent} does not exist") from None
    except OSError as e:
        if e.errno not in _UNWRITABLE:
            raise
        raise UserError(f"cannot make {folder} ({e.strerror}); make {folder.parent} writable "
                        f"or write elsewhere") from None
    return folder


def write_json(data: dict, path: str | Path) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


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
