"""The dependency layout, installed for real (issue 24, item 4): pyproject names no TensorFlow
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

from conftest import REPO
from corolla.errors import NO_TENSORFLOW

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


def test_the_readmes_set_up_command_on_a_fresh_machine(tmp_path, source):
    """`pip install ".[tensorflow]"` in an empty environment: one TensorFlow, the full build,
    and the demo's command line works (`corolla demo --tiny`, a few seconds of training)."""
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python, corolla = venv / "bin" / "python", venv / "bin" / "corolla"
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         f"{source}[tensorflow]")
    assert _tensorflows(python) == ["tensorflow"]
    demo = subprocess.run([str(corolla), "demo", "--tiny"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900, check=False,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert demo.returncode == 0, demo.stderr[-3000:]


# The CUDA libraries a GPU stack needs as pip wheels (JAX's documented `jax[cuda12]` install).
CUDA_WHEELS = {"nvidia-cudnn-cu12", "nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12"}


def test_the_gpu_extra_resolves_cuda_wheels_and_one_tensorflow(tmp_path, source):
    """`pip install ".[gpu]"` on a fresh machine, resolved only (`--dry-run --report`: no
    multi-GB download): JAX's CUDA plugin and CUDA wheels come with it, and the one TensorFlow
    distribution is tensorflow-cpu (JAX owns the GPU; TensorFlow reads the data)."""
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    report = tmp_path / "report.json"
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--dry-run", "--report", report, f"{source}[gpu]")
    names = {item["metadata"]["name"].lower().replace("_", "-")
             for item in json.loads(report.read_text())["install"]}
    assert CUDA_WHEELS <= names, sorted(names)
    assert {"jax", "jaxlib", "jax-cuda12-plugin", "filelock"} <= names, sorted(names)
    assert sorted(names & TENSORFLOWS) == ["tensorflow-cpu"]
