"""export.json's record of how a photo becomes the model's input is enough to do it: Pillow
code written from the record alone gives the pixels `corolla predict RUN PATH...` gives, to the
last level (a user's own resize or crop changed 3 predictions in 48)."""

import numpy as np
import pytest
from PIL import Image, ImageOps

from corolla.data.prepare import image_files
from helpers.images import smooth


def _from_the_record(path, size: int, fit: str) -> np.ndarray:
    """What a user writes reading `image_files.preprocessing(size, fit)`, and nothing of Corolla."""
    record = image_files.preprocessing(size, fit)
    assert record["resize"]["method"] == "Pillow Image.resize, BICUBIC"
    image = Image.open(path)
    image.draft(None, (size, size))
    image = ImageOps.exif_transpose(image)
    if image.mode == "RGBA":
        white = Image.new("RGB", image.size, (255, 255, 255))
        white.paste(image, mask=image.getchannel("A"))
        image = white
    image = image.convert("RGB")
    w, h = image.size
    formula = record["resize"]["new_size"].split(" for ")[0]
    new = eval(formula, {"__builtins__": {}}, {"w": w, "h": h, "round": round, "min": min,
                                               "max": max})
    if new != (w, h):
        image = image.resize(new, Image.BICUBIC, reducing_gap=record["resize"]["reducing_gap"])
    if fit == "crop":
        left, top = (new[0] - size) // 2, (new[1] - size) // 2
        return np.asarray(image.crop((left, top, left + size, top + size)))
    square = Image.new("RGB", (size, size))  # black
    square.paste(image, ((size - new[0]) // 2, (size - new[1]) // 2))
    return np.asarray(square)


@pytest.mark.parametrize("fit", ["crop", "pad"])
def test_the_recorded_preprocessing_gives_the_pixels_predict_gives(tmp_path, fit):
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 40, (333, 517, 3), dtype=np.uint8)  # detail a resize changes
    pixels = np.clip(smooth(rng, 333, 517).astype(int) + noise, 0, 255).astype(np.uint8)
    rotated = Image.fromarray(pixels)
    exif = rotated.getexif()
    exif[0x0112] = 6  # stored on its side: shown turned 90 degrees
    rotated.save(tmp_path / "phone.jpg", quality=92, exif=exif)
    Image.fromarray(pixels).convert("RGBA").save(tmp_path / "alpha.png")
    for name in ("phone.jpg", "alpha.png"):
        path = str(tmp_path / name)
        want = image_files.load_image(path, 96, fit)
        assert want.shape == (96, 96, 3)
        assert np.array_equal(_from_the_record(path, 96, fit), want), name


def test_the_record_names_the_fit_size_and_what_the_model_takes():
    record = image_files.preprocessing(224, "pad")
    assert record["fit"] == "pad" and "the long side to 224" in record["resize"]["side"]
    assert record["layout"] == "[N, 224, 224, 3], channels RGB"
    assert "[0, 255]" in record["dtype"] and "black 224x224" in record["square"]
