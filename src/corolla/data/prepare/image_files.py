"""Images read from files, as `corolla convert` writes them and a trained model is shown them.

- Decoding and fitting (Pillow: EXIF rotation, CMYK, greyscale, palette, alpha over white; an
  image over the megapixel limit refused on its header): `open_rgb`, `load_image`, and
  `encode`, which the conversion's worker processes run.
- Anyone's photos, for a trained model: the files a user names (image files, folders searched
  recursively, CSVs of paths) listed, and each read as a conversion reads images
  (`load_image`), fitted to the model's input size the way the run's data was fitted
  (`fit_of`).

Pillow rather than tf.image: TensorFlow cannot apply EXIF rotation or read CMYK JPEGs.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from corolla.data.prepare.settings import MANIFEST, MAX_MEGAPIXELS
from corolla.errors import UserError
from corolla.files import is_image_file


# A photo longer than this many times its width (or wider than its height) is refused: a strip
# shows a model nothing, and fitting it to a square would stretch one row of pixels.
MAX_ASPECT = 100
# A crop resizes the whole photo before cutting the square unless that is this many squares'
# worth of pixels (a photo more than 4:1); then it resizes only the square's part.
CUT_FIRST = 4


@contextlib.contextmanager
def opened(file, max_megapixels: float = MAX_MEGAPIXELS):
    """The Pillow image of `file` (a path or a binary file), only its header read: one over
    `max_megapixels` raises ValueError before any pixel is decoded."""
    Image.MAX_IMAGE_PIXELS = None  # Pillow's own guard off: the limit is the caller's, here
    with Image.open(file) as image:
        width, height = image.size
        if width * height > max_megapixels * 1e6:
            raise ValueError(f"{width}x{height} is {width * height / 1e6:.0f} megapixels, over "
                             f"the limit of {max_megapixels:g} (--max-megapixels)")
        if max(width, height) > MAX_ASPECT * min(width, height):
            raise ValueError(f"{width}x{height} is a strip (more than {MAX_ASPECT} times as "
                             f"long as it is wide), not a photo")
        yield image


def open_rgb(path: str, largest: int, max_megapixels: float = MAX_MEGAPIXELS):
    """The file as an upright RGB Pillow image, decoded at the smallest JPEG scale (1/2 .. 1/8)
    that still covers `largest` on both sides (libjpeg's DCT scaling: several times faster).
    An image over `max_megapixels` is refused before it is decoded."""
    with opened(path, max_megapixels) as image:
        image.draft(None, (largest, largest))
        image.load()  # a truncated or corrupt file fails here
        with contextlib.suppress(Exception):  # a broken EXIF block: keep the pixels as stored
            image = ImageOps.exif_transpose(image)
        if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
            image = image.convert("RGBA")
            canvas = Image.new("RGB", image.size, (255, 255, 255))
            canvas.paste(image, mask=image.getchannel("A"))
            return canvas
        if image.mode.startswith("I;16") or image.mode == "I":  # 16-bit PNG: keep the top 8 bits
            image = Image.fromarray((np.asarray(image, np.uint32) >> 8).astype(np.uint8))
        return image.convert("RGB")


# How `_fit` resizes (`preprocessing` records it; both change together).
RESAMPLE, REDUCING_GAP = Image.BICUBIC, 3.0


def preprocessing(size: int, fit: str) -> dict:
    """What `load_image` does to a photo, step by step, as data: what an exported model's
    user must do to show it a photo as `corolla predict RUN PATH...` does (export.json)."""
    s = size
    if fit == "crop":
        side = "short"
        new = f"max({s}, round(w * ({s} / min(w, h)))), max({s}, round(h * ({s} / min(w, h))))"
        square = (f"the centre {s}x{s} cut out: its top-left corner at ((new_w - {s}) // 2, "
                  f"(new_h - {s}) // 2)")
    else:
        side = "long"
        new = (f"min({s}, max(1, round(w * ({s} / max(w, h))))), "
               f"min({s}, max(1, round(h * ({s} / max(w, h)))))")
        square = (f"pasted on a black {s}x{s} square, its top-left corner at (({s} - new_w) "
                  f"// 2, ({s} - new_h) // 2)")
    return {
        "reference": "corolla.data.prepare.image_files.load_image(path, size, fit)",
        "decode": f"Pillow: Image.draft(None, ({s}, {s})) first (a JPEG decoded at the smallest "
                  f"DCT scale whose sides are both at least {s}), then ImageOps.exif_transpose",
        "colour": "RGB; transparency composited over white; 16-bit images keep their top 8 "
                  "bits; CMYK, greyscale and palette images converted by Pillow",
        "fit": fit,
        "resize": {"side": f"the {side} side to {s}", "method": "Pillow Image.resize, BICUBIC",
                   "reducing_gap": REDUCING_GAP, "new_size": f"({new}) for a w x h image",
                   "skipped": "where the new size is the image's own"},
        "square": square,
        "dtype": "uint8 pixels as float32, not rescaled: [0, 255] (the model rescales them)",
        "layout": f"[N, {size}, {size}, 3], channels RGB",
    }


def _fit(image, size: int, fit: str):
    w, h = image.size
    scale = size / (min(w, h) if fit == "crop" else max(w, h))
    new = (max(size if fit == "crop" else 1, round(w * scale)),
           max(size if fit == "crop" else 1, round(h * scale)))
    if fit == "pad":
        new = (min(size, new[0]), min(size, new[1]))
    if fit == "crop" and new[0] * new[1] > CUT_FIRST * size * size:
        # A long strip would be resized whole to be cut to a square: resize only the square's
        # part of it (Pillow's `box`: the same neighbourhoods sampled, nearly the same pixels).
        left, top = (new[0] - size) // 2, (new[1] - size) // 2
        sx, sy = w / new[0], h / new[1]
        return image.resize((size, size), RESAMPLE, reducing_gap=REDUCING_GAP,
                            box=(left * sx, top * sy, (left + size) * sx, (top + size) * sy))
    resized = image.resize(new, RESAMPLE, reducing_gap=REDUCING_GAP) if new != image.size else \
        image
    if fit == "crop":
        left, top = (new[0] - size) // 2, (new[1] - size) // 2
        return resized.crop((left, top, left + size, top + size))
    canvas = Image.new("RGB", (size, size))
    canvas.paste(resized, ((size - new[0]) // 2, (size - new[1]) // 2))
    return canvas


def load_image(path: str, size: int, fit: str = "crop",
               max_megapixels: float = MAX_MEGAPIXELS) -> np.ndarray:
    """The pixels a conversion at `size` writes for `path` (before JPEG): uint8 [S, S, 3]."""
    return np.asarray(_fit(open_rgb(path, size, max_megapixels), size, fit))


def encode(task) -> tuple[int, list[bytes] | None, str]:
    """(position, JPEG bytes per size, "") or (position, None, why it failed): runs in the
    worker processes, so it returns errors instead of raising them."""
    position, path, sizes, fit, quality, max_megapixels = task
    try:
        image = open_rgb(path, max(sizes), max_megapixels)
        out = []
        for size in sizes:
            buffer = io.BytesIO()
            _fit(image, size, fit).save(buffer, format="JPEG", quality=quality)
            out.append(buffer.getvalue())
        return position, out, ""
    except Exception as e:  # noqa: BLE001 - any failure means this file cannot be used
        reason = " ".join(str(e).split()) or type(e).__name__
        return position, None, reason



def _csv_paths(path: Path) -> list[str]:
    """The `path` column of a CSV (or its first column when no header names `path`), relative
    to the CSV's folder unless absolute."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = [row for row in csv.reader(f) if row and any(cell.strip() for cell in row)]
    if not rows:
        raise UserError(f"{path} lists no images; write one image path a line (or a `path` "
                        f"column)")
    header = [cell.strip().lower() for cell in rows[0]]
    column = header.index("path") if "path" in header else 0
    if "path" in header or not Path(rows[0][0].strip()).suffix:  # a header row, not a path
        rows = rows[1:]
    return [str((path.parent / row[column].strip()).resolve()) for row in rows
            if len(row) > column and row[column].strip()]


def as_paths(given, argument: str = "photos") -> list[str]:
    """`given` (a path, or an iterable of them) as strings; anything else (an image in memory,
    an array, None) is a one-line UserError naming `argument`: photos are read from files, as
    the run's data was, so that they are fitted to the model the same way."""
    items = [given] if isinstance(given, (str, os.PathLike)) else given
    try:
        items = list(items)
    except TypeError:
        items = [given]
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            kind = "None" if item is None else f"{type(item).__module__}.{type(item).__qualname__}"
            raise UserError(f"{argument} takes image files, folders of them or CSVs of paths "
                            f"(str or pathlib.Path), got {kind}; save an image in memory to a "
                            f"file first")
    return [os.fspath(item) for item in items]


def list_photos(paths) -> list[str]:
    """Absolute paths of the images named by `paths` (files, folders searched recursively for
    image files, CSVs of paths), in the given order (a folder's files sorted), each once. A
    path that does not exist is an error; an image file that does not decode is not (see
    `read`)."""
    found: dict[str, None] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and is_image_file(p))
            if not files:
                raise UserError(f"{given} holds no image files; pass image files, folders of "
                                f"them, or a CSV of their paths")
            found.update((str(p.resolve()), None) for p in files)
        elif path.is_file() and path.suffix.lower() == ".csv":
            found.update((p, None) for p in _csv_paths(path))
        elif path.is_file():
            found[str(path.resolve())] = None
        else:  # a device or a pipe (also behind a link) is there, but no photo
            what = "is not a regular file (a device, pipe or socket)" if path.exists() else \
                "does not exist"
            raise UserError(f"{given} {what}; pass image files, folders of them, or a CSV of "
                            f"their paths")
    return list(found)


def fit_of(data_root: str | Path) -> str:
    """How the run's images were fitted to a square ("crop" or "pad"): the setting of the
    conversion that made its data (convert.json), else "crop" (the competition's images, and
    Corolla's default)."""
    manifest = Path(data_root) / MANIFEST
    try:
        return json.loads(manifest.read_text())["settings"]["fit"]
    except (OSError, ValueError, KeyError, TypeError):
        return "crop"


def read(path: str, size: int, fit: str = "crop") -> np.ndarray:
    """uint8 [size, size, 3]: the photo as a conversion at `size` would store it. Raises
    OSError / ValueError (Pillow's) for a file that does not decode."""
    return load_image(path, size, fit)


def read_many(paths: list[str], size: int, fit: str = "crop"):
    """(uint8 [N, size, size, 3] of the photos that decode, {path: why} of those that do
    not), in order."""
    images, failed = [], {}
    for path in paths:
        try:
            images.append(read(path, size, fit))
        except Exception as e:  # noqa: BLE001 - any failure means this file cannot be used
            failed[path] = " ".join(str(e).split()) or type(e).__name__
    array = np.stack(images) if images else np.zeros((0, size, size, 3), np.uint8)
    return array, failed
