"""The dependency layout, installed for real: pyproject names no TensorFlow
distribution, so `pip install .` beside tensorflow-cpu (Kaggle's TPU image) adds no second one,
and without any TensorFlow a command ends with one line naming what to install.

It downloads wheels (tensorflow-cpu, Keras, scikit-learn...: about 400 MB) into fresh virtual
environments: marked `install`, left out of the default run; .ci/run runs it as a step of its
own (`python -m pytest -m install`)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from corolla.errors import NO_TENSORFLOW
from helpers.images import make_photos
from helpers.processes import REPO, SHARED

pytestmark = pytest.mark.install

# The distributions that install the `tensorflow` package folder.
TENSORFLOWS = {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
               "tensorflow-macos", "tensorflow-tpu", "tensorflow-aarch64", "tf-nightly",
               "tf-nightly-cpu"}


def _run(*cmd, check=True, timeout=1500):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True,
                            timeout=timeout, check=False)
    if check:
        assert result.returncode == 0, (cmd, result.stdout[-2000:], result.stderr[-3000:])
    return result


def _tensorflows(python) -> list[str]:
    listed = json.loads(_run(python, "-m", "pip", "list", "--format", "json").stdout)
    return sorted(p["name"].lower().replace("_", "-") for p in listed
                  if p["name"].lower().replace("_", "-") in TENSORFLOWS)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The repository's files, copied (a build writes into its source folder)."""
    dest = tmp_path_factory.mktemp("src") / "corolla"
    anywhere = shutil.ignore_patterns("*.egg-info", "__pycache__", ".*_cache")

    def ignore(folder, names):  # at the top only: src/corolla/runs is a package
        top = {".git", ".venv", "runs", "build"} if os.path.samefile(folder, REPO) else set()
        return set(anywhere(folder, names)) | (top & set(names))

    shutil.copytree(REPO, dest, ignore=ignore)
    return dest


def test_pip_install_beside_tensorflow_cpu_keeps_one_tensorflow(tmp_path, source):
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python, corolla = venv / "bin" / "python", venv / "bin" / "corolla"
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run(*pip, "tensorflow-cpu>=2.18")  # as on Kaggle's TPU image
    _run(*pip, source)
    assert _tensorflows(python) == ["tensorflow-cpu"]
    info = _run(corolla, "info", timeout=300)
    assert "backend      tensorflow" in info.stdout and info.stderr == "", info.stderr

    # Without TensorFlow: one line, naming the command to run.
    _run(python, "-m", "pip", "uninstall", "-y", "-q", "tensorflow-cpu")
    assert _tensorflows(python) == []
    missing = _run(corolla, "info", check=False, timeout=300)
    assert missing.returncode == 2
    assert missing.stderr == f"corolla: error: {NO_TENSORFLOW}\n"


def test_the_readmes_set_up_command_on_a_fresh_machine(tmp_path, source, cache):
    """`pip install ".[tensorflow]"` in an empty environment: one TensorFlow, the full build,
    keras-hub for the default CPU fine-tune (`cpu-finetune`'s EfficientNet-Lite0), the demo's
    command line works (`corolla demo --tiny`, a few seconds of training), and a photo folder
    fine-tunes from a local preset folder. Its conversion goes to the test's own cache folder
    (`cache`), not the user's."""
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python, corolla = venv / "bin" / "python", venv / "bin" / "corolla"
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         f"{source}[tensorflow]")
    assert _tensorflows(python) == ["tensorflow"]
    listed = json.loads(_run(python, "-m", "pip", "list", "--format", "json").stdout)
    hub = {p["name"].lower().replace("_", "-"): p["version"] for p in listed}.get("keras-hub")
    assert hub and tuple(int(p) for p in hub.split(".")[:2]) >= (0, 32), hub
    demo = subprocess.run([str(corolla), "demo", "--tiny"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900, check=False,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert demo.returncode == 0, demo.stderr[-3000:]
    # The default path on a CPU, as the README's tour gives it: a photo folder fine-tuned from a
    # local keras-hub preset folder (CI has the shared Lite0 weights; elsewhere this part skips).
    weights = SHARED / "weights" / "efficientnet_lite0_imagenet"
    if not weights.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must fine-tune from {weights}")
        pytest.skip(f"no {weights}: the fine-tune from a preset folder is CI's")
    make_photos(tmp_path / "photos", per_class=8)
    tuned = subprocess.run([str(corolla), "train", "--data", str(tmp_path / "photos"),
                            "--weights", str(weights), "--epochs", "1", "--steps-per-epoch", "2",
                            "--batch-size", "4", "--name", "tuned"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=900, check=False,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    assert "efficientnet_lite0" in tuned.stdout and "from scratch" not in tuned.stdout, \
        tuned.stdout[-3000:]
    assert (tmp_path / "runs" / "tuned" / "model.keras").is_file()
    assert any((cache / "converted").iterdir())


# The CUDA libraries a GPU stack needs as pip wheels (JAX's documented `jax[cuda12]` install).
CUDA_WHEELS = {"nvidia-cudnn-cu12", "nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12"}


def _resolved(tmp_path, *requirements) -> dict[str, str]:
    """name -> version that `pip install REQUIREMENTS` would install into a fresh venv,
    resolved only (`--dry-run --report`: no multi-GB download)."""
    tmp_path.mkdir(exist_ok=True)
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    report = tmp_path / "report.json"
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--dry-run", "--report", report, *requirements)
    return {item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]}


def test_the_gpu_extra_resolves_cuda_wheels_and_one_tensorflow(tmp_path, source):
    """`pip install ".[gpu]"` on a fresh machine: JAX's CUDA plugin and CUDA wheels come with
    it, and the one TensorFlow distribution is tensorflow-cpu (JAX owns the GPU; TensorFlow
    reads the data)."""
    names = set(_resolved(tmp_path, f"{source}[gpu]"))
    assert CUDA_WHEELS <= names, sorted(names)
    assert {"jax", "jaxlib", "jax-cuda12-plugin", "filelock"} <= names, sorted(names)
    assert sorted(names & TENSORFLOWS) == ["tensorflow-cpu"]


def test_the_hub_extra_keeps_tensorflow_2_21(tmp_path, source):
    """keras-hub 0.31 pins tensorflow-text<2.21, which takes TensorFlow 2.21 down to 2.20: the
    hub extra admits no such release (asked for one, pip finds no resolution), and beside 2.21
    it resolves a keras-hub that keeps it."""
    found = _resolved(tmp_path / "a", "tensorflow==2.21.0", f"{source}[hub]")
    assert found["tensorflow"] == "2.21.0", found
    hub = tuple(int(p) for p in found["keras-hub"].split(".")[:2])
    assert hub >= (0, 32) and found["tensorflow-text"].startswith("2.21"), found
    with pytest.raises(AssertionError, match="ResolutionImpossible|conflict"):
        _resolved(tmp_path / "b", "keras-hub==0.31.1", f"{source}[hub]")
