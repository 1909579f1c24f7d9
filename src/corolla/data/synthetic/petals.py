"""Procedural "synthetic petals": a small, offline flower-classification task.

``corolla demo`` must run with no network and no downloaded data set, yet it
should exercise the real training pipeline on a task a CNN has to *look* at.
This module draws flowers with pure numpy (polar coordinates around the
flower centre, one petal shape per angular sector) so that a few thousand
images take a couple of seconds to make.

Each class combines petal count, petal shape, petal colour and centre colour:

=====  =========================  ======  =======  ======  ======
label  name                       petals  shape    petal   centre
=====  =========================  ======  =======  ======  ======
0      red five-petal round       5       round    red     yellow
1      red five-petal pointed     5       pointed  red     yellow
2      red six-petal narrow       6       narrow   red     dark
3      yellow five-petal round    5       round    yellow  brown
4      yellow six-petal pointed   6       pointed  yellow  brown
5      yellow eight-petal narrow  8       narrow   yellow  brown
6      purple four-petal round    4       round    purple  white
7      purple six-petal pointed   6       pointed  purple  white
8      white eight-petal narrow   8       narrow   white   yellow
9      white three-petal round    3       round    white   yellow
=====  =========================  ======  =======  ======  ======

Colour alone cannot separate the classes (three red, three yellow, two purple
and two white kinds; a family shares one centre colour, but for the dark
centre of the red six-petal) and neither can petal count (5, 6 and 8 each
occur in several colours), so a model has to combine shape, count and
colour.  Fuller shapes are drawn a little smaller and half the distractor
blobs take a petal colour, so the amount of petal colour in an image gives
little away either: a logistic regression on colour histograms scores far
below a small CNN (figures: docs/benchmarks.md#figures-behind-the-defaults).

Every image is randomised: background (colour gradient, smooth two-colour
texture or blotches), flower position, scale (about 0.5-1.0 of the image),
rotation, uneven petal lengths, petal width, hue/saturation/brightness
jitter, an optional stem with a leaf, an optional distractor blob, a colour
cast and Gaussian pixel noise.  Edges are anti-aliased analytically (coverage
from a signed distance), which costs a quarter of 2x supersampling.
"""

from __future__ import annotations

import colorsys
import functools
import operator

import numpy as np

__all__ = ["CLASS_NAMES", "draw_flower", "generate"]

# (name, petal count, shape, petal colour, centre colour); index = label.
_SPECS: tuple[tuple[str, int, str, str, str], ...] = (
    ("red five-petal round", 5, "round", "red", "yellow"),
    ("red five-petal pointed", 5, "pointed", "red", "yellow"),
    ("red six-petal narrow", 6, "narrow", "red", "dark"),
    ("yellow five-petal round", 5, "round", "yellow", "brown"),
    ("yellow six-petal pointed", 6, "pointed", "yellow", "brown"),
    ("yellow eight-petal narrow", 8, "narrow", "yellow", "brown"),
    ("purple four-petal round", 4, "round", "purple", "white"),
    ("purple six-petal pointed", 6, "pointed", "purple", "white"),
    ("white eight-petal narrow", 8, "narrow", "white", "yellow"),
    ("white three-petal round", 3, "round", "white", "yellow"),
)

CLASS_NAMES: tuple[str, ...] = tuple(spec[0] for spec in _SPECS)

# Base HSV and per-image jitter (dh, ds, dv) of each named colour.
_COLOURS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "red": ((0.985, 0.85, 0.85), (0.025, 0.12, 0.12)),
    "yellow": ((0.14, 0.85, 0.95), (0.02, 0.12, 0.05)),
    "purple": ((0.77, 0.60, 0.75), (0.03, 0.12, 0.12)),
    "white": ((0.10, 0.05, 0.95), (0.50, 0.05, 0.05)),
    "dark": ((0.00, 0.30, 0.15), (0.05, 0.10, 0.05)),
    "brown": ((0.07, 0.75, 0.40), (0.02, 0.10, 0.08)),
    "green": ((0.30, 0.65, 0.50), (0.06, 0.15, 0.15)),
}

_PETAL_COLOURS = ("red", "yellow", "purple", "white")
_SHAPE_SCALE = {"round": 0.85, "pointed": 0.97, "narrow": 1.08}
_MIN_IMAGE_SIZE = 16
_TWO_PI = 2.0 * np.pi


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _check_image_size(image_size: object) -> int:
    size = _check_int("image_size", image_size)
    if size < _MIN_IMAGE_SIZE:
        raise ValueError(f"image_size must be >= {_MIN_IMAGE_SIZE} "
                         f"(smaller flowers lose their shape), got {size}")
    return size


@functools.lru_cache(maxsize=8)
def _grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre coordinates as a column and a row (cached: every image reuses them)."""
    c = np.arange(size, dtype=np.float32) + np.float32(0.5)
    return c[:, None], c[None, :]


@functools.lru_cache(maxsize=32)
def _hat_weights(size: int, g: int) -> np.ndarray:
    """(size, g) bilinear weights that upsample a g-point coarse grid to size pixels."""
    pos = (np.arange(size, dtype=np.float32) + 0.5) / size * (g - 1)
    return np.maximum(0.0, 1.0 - np.abs(pos[:, None] - np.arange(g, dtype=np.float32)[None, :]))


def _rgb(h: float, s: float, v: float) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v), dtype=np.float32)[:, None, None]


def _colour(rng: np.random.Generator, name: str) -> np.ndarray:
    """A jittered (3, 1, 1) RGB colour from a named family, so no two flowers are alike."""
    (h, s, v), (dh, ds, dv) = _COLOURS[name]
    jh, js, jv = rng.uniform(-1.0, 1.0, 3)
    return _rgb(h + dh * jh, min(max(s + ds * js, 0.0), 1.0), min(max(v + dv * jv, 0.0), 1.0))


def _random_colour(rng: np.random.Generator, s: tuple[float, float],
                   v: tuple[float, float]) -> np.ndarray:
    # Half are foliage-like greens/browns, the rest any hue (including the petal hues).
    h = rng.uniform(0.08, 0.45) if rng.random() < 0.5 else rng.random()
    return _rgb(h, rng.uniform(*s), rng.uniform(*v))


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """(3, S, S) gradient, smooth texture or blotches: no flat backdrop for the flower to pop
    out of."""
    c1 = _random_colour(rng, (0.15, 0.7), (0.2, 0.85))
    c2 = _random_colour(rng, (0.15, 0.7), (0.2, 0.85))
    kind = rng.integers(3)
    if kind == 0:  # linear gradient in a random direction
        a = rng.uniform(0.0, _TWO_PI)
        t = np.linspace(-0.5, 0.5, size, dtype=np.float32)
        w = np.clip(0.5 + float(np.sin(a)) * t[:, None] + float(np.cos(a)) * t[None, :], 0.0, 1.0)
    else:  # smooth random field, bilinearly upsampled from a coarse grid
        g = int(rng.integers(3, 7))
        wts = _hat_weights(size, g)
        w = wts @ rng.random((g, g), dtype=np.float32) @ wts.T
        if kind == 2:  # two-tone blotches
            w = 1.0 / (1.0 + np.exp(-12.0 * (w - 0.5)))
    return c1 + (c2 - c1) * w


def _blend(img: np.ndarray, dist: np.ndarray, colour: np.ndarray) -> None:
    """Paint ``colour`` where the signed distance ``dist`` (pixels, > 0 inside) is positive.

    Coverage ramps over one pixel across the edge: analytic anti-aliasing at the
    output resolution, four times cheaper than supersampling.
    """
    cov = dist + np.float32(0.5)
    np.maximum(cov, 0.0, out=cov)
    np.minimum(cov, 1.0, out=cov)
    img += cov * (colour - img)


def _draw_blob(rng: np.random.Generator, img: np.ndarray, ys, xs, size: int) -> None:
    """A distractor blob (a bud, a pebble, a far-away flower) behind the flower, half the time."""
    if rng.random() < 0.5:
        br = rng.uniform(0.05, 0.16) * size
        by, bx = rng.uniform(0.0, size, 2)
        q = (ys - by) ** 2 + (xs - bx) ** 2 * rng.uniform(0.5, 1.5)
        # Half the time in a petal colour, so counting petal-coloured pixels is not enough.
        if rng.random() < 0.5:
            colour = _colour(rng, _PETAL_COLOURS[rng.integers(len(_PETAL_COLOURS))])
        else:
            colour = _random_colour(rng, (0.2, 0.9), (0.3, 1.0))
        _blend(img, br - np.sqrt(q), colour)


def _draw_stem(rng: np.random.Generator, img: np.ndarray, ys, xs, size: int, cy: float,
               cx: float, radius: float) -> None:
    """A stem towards the bottom edge, optionally with one leaf (most of the time)."""
    if rng.random() < 0.6:
        green = _colour(rng, "green")
        a = rng.uniform(-0.5, 0.5)
        dy, dx = float(np.cos(a)), float(np.sin(a))
        along = (ys - cy) * dy + (xs - cx) * dx
        perp = (xs - cx) * dy - (ys - cy) * dx
        _blend(img, np.minimum(max(0.035 * size, 0.6) - np.abs(perp), along), green)
        if rng.random() < 0.7:
            # Leaf base on the stem, blade pointing sideways and up.
            la = a + np.pi + rng.choice((-1.0, 1.0)) * rng.uniform(0.9, 1.4)
            base = radius * rng.uniform(1.0, 1.5)
            ly0, lx0 = cy + dy * base, cx + dx * base
            ll = radius * rng.uniform(0.45, 0.7)
            ca, sa = float(np.cos(la)), float(np.sin(la))
            u = (ys - ly0) * ca + (xs - lx0) * sa
            v = (xs - lx0) * ca - (ys - ly0) * sa
            half = 0.56 * np.sqrt(np.clip(u * (ll - u), 0.0, None))
            _blend(img, np.minimum(np.minimum(half - np.abs(v), u), ll - u), green * 0.85)


def _petal_width(rng: np.random.Generator, shape: str, k: int, sc: np.ndarray) -> np.ndarray:
    """The half-width of a petal of `shape` at `sc` along it (0 centre, 1 tip)."""
    if shape == "round":
        half = min(0.5, 0.95 * np.sin(np.pi / k)) * rng.uniform(0.85, 1.0)
        return half * np.sqrt(np.maximum(1.0 - (2.0 * sc - 1.0) ** 2, 0.0))
    if shape == "pointed":
        half = min(0.42, 0.8 * np.sin(np.pi / k)) * rng.uniform(0.7, 0.95)
        # Teardrop with a sharp tip; 0.345 is the peak of sqrt(s) * (1 - s)**1.3.
        return (half / 0.345) * np.sqrt(np.maximum(sc, 0.0)) * (1.0 - sc) ** 1.3
    half = rng.uniform(0.09, 0.16)  # narrow
    return half * np.sqrt(np.maximum(1.0 - (2.0 * sc - 1.0) ** 2, 0.0))


def _draw_petals(rng: np.random.Generator, img: np.ndarray, ys, xs, size: int, cy: float,
                 cx: float, radius: float, label: int) -> None:
    """The class's petals and centre, around (cy, cx) within `radius`."""
    _, k, shape, petal_name, centre_name = _SPECS[label]
    # Petals and centre lie within `radius` of the centre: only render that box.
    y0, y1 = max(int(cy - radius), 0), min(int(cy + radius) + 2, size)
    x0, x1 = max(int(cx - radius), 0), min(int(cx + radius) + 2, size)
    box = img[:, y0:y1, x0:x1]
    dy_, dx_ = ys[y0:y1] - cy, xs[:, x0:x1] - cx
    # Angle to the nearest petal axis gives petal coordinates: s along (0 centre, 1 tip), v across.
    r = np.sqrt(dy_ * dy_ + dx_ * dx_)
    sector = _TWO_PI / k
    theta = (np.arctan2(dy_, dx_) + rng.uniform(np.pi, 3.0 * np.pi)) * (1.0 / sector)  # > 0
    turn = theta.astype(np.int32)
    phi = (theta - turn - 0.5) * sector
    length = (radius * rng.uniform(0.88, 1.0, k)).astype(np.float32)[turn % k]
    rl = r / length
    s = rl * np.cos(phi)
    sc = np.minimum(s, 1.0)
    v = np.abs(rl * np.sin(phi))
    width = _petal_width(rng, shape, k, sc)
    # Darker towards the centre and along the rim, so overlapping petals stay distinct.
    rim = np.clip((v - 0.8 * width) * length + 0.5, 0.0, 1.0)
    shade = (0.72 + 0.3 * sc) * (1.0 - 0.2 * rim)
    _blend(box, np.minimum(width - v, 1.0 - s) * length, shade * _colour(rng, petal_name))

    centre_r = radius * rng.uniform(0.16, 0.24)
    disc = (1.0 - (0.35 / centre_r) * r) * _colour(rng, centre_name)
    _blend(box, centre_r - r, disc)


def draw_flower(rng: np.random.Generator, label: int, image_size: int) -> np.ndarray:
    """Draw one random flower of class ``label`` as a uint8 (S, S, 3) RGB image.

    All randomness comes from ``rng``, so callers control reproducibility.
    """
    label = _check_int("label", label)
    if not 0 <= label < len(_SPECS):
        raise ValueError(f"label must be in [0, {len(_SPECS) - 1}], got {label}")
    size = _check_image_size(image_size)
    shape = _SPECS[label][2]

    ys, xs = _grid(size)
    img = _background(rng, size)  # channels first: (h, w) maps broadcast over contiguous planes

    # Flower geometry, in pixels. Fuller petal shapes are drawn a little smaller, so the
    # petal-coloured area says less about the class (species differ in size, too).
    radius = rng.uniform(0.55, 0.95) * _SHAPE_SCALE[shape] * size / 2.0
    slack = max(size / 2.0 - 0.8 * radius, 1.0)
    cy = size / 2.0 + rng.uniform(-slack, slack)
    cx = size / 2.0 + rng.uniform(-slack, slack)

    _draw_blob(rng, img, ys, xs, size)
    _draw_stem(rng, img, ys, xs, size, cy, cx, radius)
    _draw_petals(rng, img, ys, xs, size, cy, cx, radius, label)

    # Light/colour cast and sensor noise (luminance only: a third of the cost of per-channel).
    gain = rng.uniform(0.8, 1.15) * rng.uniform(0.93, 1.07, 3) * 255.0
    img *= gain.astype(np.float32)[:, None, None]
    img += rng.standard_normal((size, size), dtype=np.float32) * np.float32(rng.uniform(2.5, 12.5))
    out = np.clip(img + np.float32(0.5), 0.0, 255.5).astype(np.uint8)
    return np.ascontiguousarray(out.transpose(1, 2, 0))


def generate(
    n: int, *, image_size: int = 64, seed: int = 0, num_classes: int = len(CLASS_NAMES)
) -> tuple[np.ndarray, np.ndarray]:
    """Make ``n`` labelled flower images from the first ``num_classes`` classes.

    Labels are dealt round robin (so classes are balanced to within one image)
    and then shuffled; the result depends only on the arguments, so a demo run
    can be reproduced exactly.  Returns uint8 images (n, S, S, 3) and int64
    labels (n,).
    """
    n = _check_int("n", n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    size = _check_image_size(image_size)
    num_classes = _check_int("num_classes", num_classes)
    if not 2 <= num_classes <= len(CLASS_NAMES):
        raise ValueError(f"num_classes must be in [2, {len(CLASS_NAMES)}], got {num_classes}")
    seed = _check_int("seed", seed)

    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n, dtype=np.int64) % num_classes)
    images = np.empty((n, size, size, 3), dtype=np.uint8)
    for i, label in enumerate(labels):
        images[i] = draw_flower(rng, int(label), size)
    return images, labels
