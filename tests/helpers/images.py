"""Images written for tests: folders of photos in every mode people have them, photos with
planted copies (resized, re-compressed, brightened), small class folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance


PHOTO_CLASSES = ("aster", "bluebell", "crocus")


def smooth(rng, height: int, width: int) -> np.ndarray:
    """A photo-like image (smooth gradients, so JPEG keeps it within a few levels)."""
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    a, b, c = rng.uniform(0, 1, 3)
    image = np.stack([a * 255 * x, b * 255 * y, 255 * c * (1 - x * y)], -1)
    return image.clip(0, 255).astype(np.uint8)


def make_photos(root: Path, per_class: int = 7, seed: int = 0) -> dict[str, str]:
    """CLASS/*.{jpg,png} in every mode a folder of photos holds: RGB JPEG, greyscale, PNG with
    alpha, palette PNG, CMYK JPEG, EXIF-rotated JPEG, mixed sizes. Returns {id: class}."""
    rng = np.random.default_rng(seed)
    made = {}
    for cls in PHOTO_CLASSES:
        (root / cls).mkdir(parents=True)
        for k in range(per_class):
            image = Image.fromarray(smooth(rng, 20 + 3 * k, 28 - k))
            name = f"{cls}/{k:02d}"
            kind = k % 6
            if kind == 0:
                path, kwargs = f"{name}.jpg", {"quality": 95}
            elif kind == 1:
                image, path, kwargs = image.convert("L"), f"{name}.jpeg", {}
            elif kind == 2:
                image, path, kwargs = image.convert("RGBA"), f"{name}.png", {}
            elif kind == 3:
                image = image.convert("P", palette=Image.Palette.ADAPTIVE)
                path, kwargs = f"{name}.PNG", {}
            elif kind == 4:
                image, path, kwargs = image.convert("CMYK"), f"{name}.jpg", {"quality": 95}
            else:
                exif = image.getexif()
                exif[0x0112] = 6  # stored sideways: viewers rotate it 90 degrees
                path, kwargs = f"{name}.jpg", {"quality": 95, "exif": exif.tobytes()}
            image.save(root / path, **kwargs)
            made[path] = cls
    (root / "notes.txt").write_text("not an image: ignored\n")
    return made


# Photos for the duplicate search.
PHOTO_SIZE = 48


def photo(rng) -> Image.Image:
    """A photo-like image: detail at every scale, the coarser the stronger (as in photos,
    whose perceptual hashes these are meant for)."""
    out = np.zeros((PHOTO_SIZE, PHOTO_SIZE, 3), np.float32)
    for cells, amplitude in ((3, 1.0), (6, 0.6), (12, 0.35), (24, 0.2)):
        noise = rng.uniform(-1, 1, (cells, cells, 3)).astype(np.float32)
        out += amplitude * np.stack([np.asarray(Image.fromarray(noise[..., c], "F").resize(
            (PHOTO_SIZE, PHOTO_SIZE), Image.BICUBIC)) for c in range(3)], -1)
    return Image.fromarray(np.clip(128 + 60 * out, 0, 255).astype(np.uint8))


def jpeg(image: Image.Image, path: Path, quality: int) -> None:
    image.save(path.with_suffix(".jpg"), quality=quality)


# The planted changes: what a photo saved twice goes through.
def resized(image):
    return image.resize((int(PHOTO_SIZE * 0.8), int(PHOTO_SIZE * 0.8)), Image.BICUBIC)


def brighter(image):
    return ImageEnhance.Brightness(image).enhance(1.25)


def planted_folder(root: Path) -> dict:
    """train/{a,b}/ (10 photos each), val/{a,b}/ (4 each), test/ (6 loose), with copies of
    train photos planted in val and test, and one exact copy under another name inside train.
    Returns {"across": [{ids}], "within": [{ids}]}: the groups a check must find."""
    rng = np.random.default_rng(7)
    photos = {}
    for split, n in (("train", 10), ("val", 4)):
        for cls in "ab":
            (root / split / cls).mkdir(parents=True)
            for k in range(n):
                photos[f"{split}/{cls}/{k}"] = image = photo(rng)
                image.save(root / split / cls / f"{k}.png")
    (root / "test").mkdir()
    for k in range(6):
        photo(rng).save(root / "test" / f"t{k}.png")
    resized(photos["train/a/0"]).save(root / "val" / "a" / "resized.png")
    jpeg(photos["train/b/1"], root / "val" / "b" / "recompressed", 60)
    brighter(photos["train/a/2"]).save(root / "test" / "brighter.png")
    jpeg(brighter(resized(photos["train/b/3"])), root / "test" / "all_three", 60)
    photos["train/a/4"].save(root / "test" / "same_pixels.bmp")  # exact: another format, name
    photos["train/b/5"].save(root / "train" / "b" / "5 (copy).png")
    return {"across": [{"train/a/0.png", "val/a/resized.png"},
                       {"train/b/1.png", "val/b/recompressed.jpg"},
                       {"train/a/2.png", "test/brighter.png"},
                       {"train/b/3.png", "test/all_three.jpg"},
                       {"train/a/4.png", "test/same_pixels.bmp"}],
            "within": [{"train/b/5.png", "train/b/5 (copy).png"}]}


def copies_folder(root: Path) -> int:
    """a/ and b/, each with 12 distinct photos and 4 groups of copies (the photo, resized,
    and re-compressed). Returns the number of groups planted."""
    rng = np.random.default_rng(3)
    for cls in "ab":
        (root / cls).mkdir(parents=True)
        for k in range(12):
            photo(rng).save(root / cls / f"{k}.png")
        for k in range(4):
            image = photo(rng)
            image.save(root / cls / f"g{k}.png")
            resized(image).save(root / cls / f"g{k}-small.png")
            jpeg(image, root / cls / f"g{k}-q60", 60)
    return 8


def class_folders(root: Path, n: int = 6, size: int = 8, noise: bool = False) -> Path:
    """daisy/ and tulip/, each with `n` PNGs of `size` px: grey levels, or noise."""
    rng = np.random.default_rng(0)
    for name in ("daisy", "tulip"):
        (root / name).mkdir(parents=True, exist_ok=True)
        for k in range(n):
            pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8) if noise else \
                np.full((size, size, 3), 30 * k, np.uint8)
            Image.fromarray(pixels).save(root / name / f"{k}.png")
    return root


def pictures(folder: Path, names=("a", "b")) -> Path:
    """A class folder of tiny PNG photos, one per name."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        Image.fromarray(np.full((8, 8, 3), 40 * k, np.uint8)).save(folder / f"{name}.png")
    return folder
