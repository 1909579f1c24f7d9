"""`corolla export RUN --format savedmodel|tflite|onnx`: the run's model for deployment, in a
folder with its classes.txt and export.json (`report.export_folder`), checked against model.keras on
the run's own val images by the format's own runtime (`evaluation.exported`).

Exports are made on the TensorFlow backend, in float32, whatever the run trained on: Keras
exports SavedModel and LiteRT only from TensorFlow, and a model saved on JAX or in mixed
precision loads there with the same weights (keras-team/keras#20710, #22443). A process whose
Keras is already on another backend (a JAX notebook) exports in a TensorFlow subprocess.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from importlib import metadata
from pathlib import Path

import numpy as np

from corolla import runtime
from corolla.data.prepare import image_files
from corolla.errors import UserError, did_you_mean
from corolla.evaluation import exported
from corolla.files import (PARTIAL_FOLDER, WRITER, check_folder, hold_lock, make_folder,
                           remove_stale_folders, unwritable)
from corolla.report import export_folder
from corolla.runs import paths, rundir

CHECK_IMAGES = 64  # val images the export is compared on: enough to see a wrong conversion
TOLERANCE = 1e-4  # float32 exports: the largest difference in a probability
AGREEMENT = 0.99  # quantized exports: the share of images whose top class is kept


def default_out(run_dir: Path, fmt: str, quantize: str) -> Path:
    return run_dir / f"{paths.EXPORT_PREFIX}{fmt}{'' if quantize == 'none' else '-' + quantize}"


def _check_args(fmt: str, quantize: str) -> None:
    if fmt not in exported.FORMATS:
        hint = did_you_mean(fmt, exported.FORMATS)
        raise UserError(f"--format must be one of {', '.join(exported.FORMATS)}, got {fmt!r}"
                        f"{'; ' + hint if hint else ''}")
    if quantize not in exported.QUANTIZE:
        raise UserError(f"--quantize must be one of {', '.join(exported.QUANTIZE)}, got "
                        f"{quantize!r}")
    if quantize != "none" and fmt != "tflite":
        raise UserError(f"--quantize {quantize} is for --format tflite (LiteRT); the {fmt} "
                        f"export is float32")


def _keras_elsewhere() -> str | None:
    """The backend this process's Keras is on, when it is imported and not TensorFlow."""
    if "keras" not in sys.modules:
        return None
    backend = sys.modules["keras"].backend.backend()
    return None if backend == "tensorflow" else backend


def export(run, fmt: str, out: str | Path | None = None, quantize: str = "none",
           check_images: int = CHECK_IMAGES, log=print) -> Path:
    """Writes the export folder (default RUN/export-<format>[-<quantize>]/, never an existing
    one) and returns it."""
    quantize = quantize or "none"
    _check_args(fmt, quantize)
    if isinstance(check_images, bool) or not isinstance(check_images, int) or check_images < 0:
        raise UserError(f"--check-images must be 0 (no check) or a number of val images, got "
                        f"{check_images!r}")
    run_dir, config = rundir.load(run)
    out = Path(out) if out is not None else default_out(run_dir, fmt, quantize)
    if out.exists():
        raise UserError(f"{out} already exists; remove it or pass --out with a new folder")
    check_folder(out.parent, "--out")
    if _keras_elsewhere():
        return _in_subprocess(run_dir, fmt, out, quantize, check_images, log)
    return _export_here(run_dir, config, fmt, out, quantize, check_images, log)


def _in_subprocess(run_dir, fmt, out, quantize, check_images, log) -> Path:
    log(f"Keras is on {_keras_elsewhere()} here: exporting in a TensorFlow subprocess")
    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    done = subprocess.run([sys.executable, "-m", "corolla", "export", str(run_dir), "--format",
                           fmt, "--quantize", quantize, "--out", str(out), "--check-images",
                           str(check_images)], env=env, capture_output=True, text=True,
                          check=False)
    for line in done.stdout.splitlines():
        log(line)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"the export in a TensorFlow subprocess failed: {last}")
    return out


def _export_here(run_dir: Path, config, fmt: str, out: Path, quantize: str, check_images: int,
                 log) -> Path:
    import keras

    from corolla.evaluation.inference import check_packages, load_model

    check_packages(run_dir, config)  # export opens the run without `open_run`
    plan = runtime.detect(backend="tensorflow", strategy="default", precision="float32")
    class_names = rundir.class_names(run_dir)
    model = exported.as_float32(load_model(run_dir, plan, len(class_names), config,
                                           final=True))
    size = model.input_shape[1]
    # Written under a temporary name beside OUT and renamed last: a folder named OUT is whole.
    partial = out.with_name(f".{out.name}{PARTIAL_FOLDER}{uuid.uuid4().hex[:8]}")
    remove_stale_folders(out.parent, "an export", log)
    make_folder(partial)
    writing = hold_lock(partial / WRITER)  # released when this process ends, however it ends
    try:
        path = export_folder.write_model(model, partial, fmt, quantize)
        about = {"format": fmt, "quantize": quantize, "file": path.name,
                 "input": {"shape": [None, size, size, 3], "dtype": "float32",
                           "range": [0, 255], "channels": "RGB"},
                 # A photo made into the input as `corolla predict RUN PATH...` makes it:
                 # another resize or crop changes some predictions.
                 "preprocessing": image_files.preprocessing(
                     size, image_files.fit_of(config.data.converted or config.data.path)),
                 "output": {"shape": [None, len(class_names)], "what": "class probabilities"},
                 "classes": len(class_names), "run": str(run_dir.resolve()),
                 "corolla": metadata.version("corolla"), "keras": keras.__version__,
                 "size_bytes": export_folder.size_bytes(path)}
        about["check"] = _check(model, fmt, path, run_dir, config, size, quantize, check_images,
                                log)
        export_folder.write_beside(partial, class_names, about)
        (partial / WRITER).unlink()
        partial.rename(out)
    except ImportError as e:
        raise UserError(f"the {fmt} export needs a package that is not installed ({e}); run: "
                        f"pip install 'corolla[export]'") from None
    except Exception as e:
        _refuse_unwritable(e, out)
        raise
    finally:
        os.close(writing)
        shutil.rmtree(partial, ignore_errors=True)
    log(f"wrote {out} ({fmt}{'' if quantize == 'none' else ', ' + quantize}, "
        f"{about['size_bytes'] / 1e6:.2f} MB; input float32 RGB [0, 255] at {size} px)")
    return out




def _refuse_unwritable(error: BaseException, out: Path) -> None:
    """A full, size-limited or read-only disk met while writing (an OSError, or TensorFlow's
    own error from the SavedModel writer) as one line; anything else is left to the caller."""
    what = unwritable(error)
    if what is not None:
        raise UserError(f"could not write {out} ({what}); free space or pass --out with a "
                        f"folder on a writable disk, then run the command again") from None


def _check(model, fmt, path, run_dir, config, size, quantize, count, log) -> dict | None:
    """The export against model.keras on the first `count` val images of the run's data."""
    if count <= 0:
        log("not checked against model.keras (--check-images 0): the export's outputs are "
            "unverified")
        return None
    images = _val_images(run_dir, config, size, count)
    if images is None:
        log("not checked: the run's data is not readable here")
        return None
    try:
        run = exported.runner(fmt, path)
    except ImportError as e:
        log(f"not checked: {fmt}'s runtime is not installed ({e}); pip install "
            f"'corolla[export]'")
        return None
    result = exported.agreement(model.predict(images, verbose=0), run(images))
    ok = result["top1_agreement"] >= AGREEMENT if quantize != "none" else \
        result["max_abs_difference"] <= TOLERANCE
    result["within_tolerance"] = bool(ok)
    log(f"{'checked' if ok else 'warning: differs from model.keras'}: on {result['images']} "
        f"val images, largest probability difference {result['max_abs_difference']:.2e}, "
        f"top-1 agreement {result['top1_agreement']:.1%}")
    return result


def _val_images(run_dir: Path, config, size: int, count: int):
    """float32 [n <= count, size, size, 3] from the val split of the run (`run_dir`, its
    `config`), or None."""
    from corolla.data import pipeline
    from corolla.evaluation.inference import open_data

    try:
        layout = open_data(run_dir, config, log=lambda *a: None)
        split = layout.split("val")
        batches = pipeline.eval_dataset(split, size, min(count, split.count), pad=False)
        return np.asarray(next(iter(batches)), np.float32)
    except (UserError, StopIteration, KeyError):
        return None
