"""What a report's picture grids cost to draw: `report.plots.image_grid` (axes off and hidden)
against the same grid with its axes turned off only, side by side in one process.

    python benchmarks/report_pictures.py [--images 18] [--size 192] [--repeats 7]

Each repeat draws the sample grid (`plot_samples`, 6 columns, every image titled with its
class and, where wrong, the true one) both ways, alternating, on the same random images; the
figures are the median CPU seconds of a grid each way, their ratio, whether the two PNGs are
the same pixels, and the host's load (os.getloadavg) beside them: CPU seconds depend on it less
than wall seconds do, but not at all only on an idle host.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from corolla.report import plots  # noqa: E402


def axes_off_only(rows, columns, figsize):
    """The grid as it was drawn before `image_grid`: `axis("off")` alone."""
    fig, axes = plt.subplots(rows, columns, figsize=figsize, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    return fig, axes


def draw(grid, images, path: Path) -> tuple[float, np.ndarray]:
    names = [f"flower number {k}" for k in range(len(images))]
    y_true = np.arange(len(images))
    y_pred = np.where(y_true % 3 == 0, (y_true + 1) % len(images), y_true)
    start = time.process_time()
    real = plots.image_grid
    plots.image_grid = grid  # plot_samples' own grid, swapped for the baseline
    try:
        plots.plot_samples(images, y_true, y_pred, names, path)
    finally:
        plots.image_grid = real
    return time.process_time() - start, matplotlib.image.imread(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=18)  # report.scored.SAMPLES
    p.add_argument("--size", type=int, default=192)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    images = np.random.default_rng(0).uniform(0, 255, (args.images, args.size, args.size, 3))
    seconds = {"image_grid": [], "axis off only": []}
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        draw(plots.image_grid, images, Path(tmp) / "warm.png")  # fonts and caches, once
        for _ in range(args.repeats):
            new, new_pixels = draw(plots.image_grid, images, Path(tmp) / "new.png")
            old, old_pixels = draw(axes_off_only, images, Path(tmp) / "old.png")
            seconds["image_grid"].append(new)
            seconds["axis off only"].append(old)
            same = same and np.array_equal(new_pixels, old_pixels)
    one, five, _ = os.getloadavg()
    print(f"{args.images} images of {args.size} px, {args.repeats} repeats each way; host load "
          f"{one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores")
    for name, values in seconds.items():
        print(f"  {name:<14} median {statistics.median(values):.3f} CPU s a grid")
    ratio = statistics.median(seconds["image_grid"]) / statistics.median(seconds["axis off only"])
    print(f"  ratio {ratio:.2f}; the same pixels: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
