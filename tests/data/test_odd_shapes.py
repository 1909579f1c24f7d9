"""Odd shapes stay in bounds: a photo that is a strip one pixel wide is refused on its header
(a long photo is cut to its square before it is resized, not after), an .npz of predictions
that declares arrays larger than it holds is refused before any is inflated, and a batch size
of millions is refused in the config (a few images are padded to whole parts of a batch, not
to the batch). The memory-bound ones run under a memory cap and a timeout, so a regression
fails rather than exhausting the host."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from PIL import Image

from corolla import config
from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.runtime.plan import Plan
from helpers.processes import run_capped


def _capped(code: str, setup: str, gib: float = 0.5) -> dict:
    result = run_capped(code, gib=gib, setup=setup, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_one_pixel_strip_is_refused_on_its_header_by_predict_and_convert(tmp_path):
    """1 x 1,000,000 px: 1 megapixel, under the limit, but cropped to a square it would be
    resized to 224 x 224,000,000 first. Predict's and convert's readers skip it with a line,
    under a 0.5 GiB cap."""
    strip = tmp_path / "strip.png"
    Image.new("RGB", (1, 1_000_000), "white").save(strip)
    assert strip.stat().st_size < 10_000
    found = _capped(f"""
import json
from corolla.data.prepare import image_files
images, failed = image_files.read_many([{str(strip)!r}], 224)
_, encoded, why = image_files.encode((0, {str(strip)!r}, [224], "crop", 90, 200.0))
print(json.dumps({{"read": len(images), "failed": list(failed.values()), "encoded": encoded,
                  "why": why}}))
""", setup="import numpy, PIL.Image\nfrom corolla.data.prepare import image_files")
    says = "1x1000000 is a strip (more than 100 times as long as it is wide), not a photo"
    assert found == {"read": 0, "failed": [says], "encoded": None, "why": says}


def test_a_long_photo_is_cut_to_its_square_before_it_is_resized_with_the_same_pixels(tmp_path):
    """A 60 x 3000 photo (50:1, accepted) at 224 px: only its middle square is resized, and
    the pixels are those of resizing it whole and cutting the square out, but for rounding."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, 3000)[:, None, None] * np.ones((1, 60, 3))
    pixels = np.clip(ramp + rng.normal(0, 8, ramp.shape), 0, 255).astype(np.uint8)
    path = tmp_path / "long.png"
    Image.fromarray(pixels).save(path)
    from corolla.data.prepare import image_files

    got = image_files.load_image(str(path), 224).astype(int)
    whole = Image.fromarray(pixels).resize((224, 11_200), Image.BICUBIC, reducing_gap=3.0)
    top = (11_200 - 224) // 2
    expected = np.asarray(whole.crop((0, top, 224, top + 224))).astype(int)
    assert got.shape == (224, 224, 3)
    assert np.abs(got - expected).mean() < 1 and np.abs(got - expected).max() <= 8


def _npy(array: np.ndarray | None = None, declared: tuple = (), data: bytes = b"") -> bytes:
    """An .npy member: `array` as numpy writes it, or a header declaring `declared` float32
    followed by `data` only."""
    buffer = io.BytesIO()
    if array is not None:
        np.save(buffer, array)
    else:
        np.lib.format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False,
                                                      "shape": declared})
        buffer.write(data)
    return buffer.getvalue()


@pytest.mark.parametrize("declared", [(75_000, 5_000), (10**7, 10**7)])
def test_predictions_declaring_arrays_larger_than_they_hold_are_refused_before_inflating(
        tmp_path, declared):
    """A val.npz of a few hundred bytes whose probabilities declare 1.5 GB (or 400 TB): one
    line, from the ensemble's reader as from `predictions.load`, under a 0.5 GiB cap (numpy
    would allocate the declared array first)."""
    folder = tmp_path / "run"
    path = predictions.path_in(folder, "val")
    path.parent.mkdir(parents=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ids.npy", _npy(np.array(["a", "b"])))
        archive.writestr("labels.npy", _npy(np.array([0, 1])))
        archive.writestr("class_names.npy", _npy(np.array(["x", "y"])))
        archive.writestr("probabilities.npy", _npy(declared=declared, data=b"\0" * 16))
    assert path.stat().st_size < 2_000
    found = _capped(f"""
import json
from corolla.errors import UserError
from corolla.evaluation import blend, predictions
said = []
for read in (lambda: predictions.load({str(path)!r}),
             lambda: blend.load_member({str(folder)!r})):
    try:
        read()
        said.append("read")
    except UserError as e:
        said.append(str(e))
print(json.dumps(said))
""", setup="import numpy\nfrom corolla.evaluation import blend, predictions")
    size = "1.4 GB" if declared[0] == 75_000 else "372529.0 GB"
    says = (f"{path} declares an array 'probabilities' of shape {declared} ({size}) in 144 "
            f"bytes; write it again with `corolla evaluate RUN` (val) or `corolla predict RUN` "
            f"(test)")
    assert found == [says, says]


def test_a_batch_size_of_millions_is_refused_in_a_config_and_on_a_flag(tmp_path):
    file = tmp_path / "config.toml"
    file.write_text("[train]\nbatch_size = 100000000\n")
    with pytest.raises(UserError, match="train.batch_size must be at most 16384, got 100000000"):
        config.load_config(file)
    with pytest.raises(UserError, match="--global-batch-size must be at most 16384"):
        config.with_settings(config.RunConfig(), {"train.global_batch_size": 10**8},
                             {"train.global_batch_size": "--global-batch-size"})


def _plan(replicas: int, per_replica: int) -> Plan:
    return Plan(backend="tensorflow", accelerator="gpu", strategy_name="MirroredStrategy",
                devices=replicas, replicas=replicas, num_processes=1, process_id=0,
                is_chief=True, batch_per_replica=per_replica,
                global_batch=per_replica * replicas, precision="float32",
                steps_per_execution=1, jit_compile=False, hardware=None)


@pytest.mark.parametrize("count, one, four", [(5, 5, 8), (16, 16, 16), (1000, 64, 64),
                                              (0, 64, 64)])
def test_a_few_images_are_batched_in_whole_device_parts_not_padded_to_the_batch(count, one,
                                                                                four):
    """A batch of 64 on one device, or 4 x 16 on four: 5 images make one batch of 5, or of 8
    on four devices (two each: they split a batch evenly), not 64 with 59 blank images."""
    assert _plan(replicas=1, per_replica=64).inference_batch_for(count) == one
    assert _plan(replicas=4, per_replica=16).inference_batch_for(count) == four
