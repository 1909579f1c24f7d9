"""`--recipe auto` on a GPU or TPU fits the data, the weights and the card: decided before
training from a described machine (`runtime.plan.described`), trained on the CPU."""

import json
import subprocess
import sys

import pytest

from corolla.runs import paths
from corolla.runtime import plan
from corolla.runtime.decide import choose_batch
from helpers.processes import SCRIPTS, SHARED


GIB = 1 << 30
H100 = {"gpus": 1, "gpu_compute_capability": [9, 0], "device_name": "NVIDIA H100 80GB HBM3",
        "device_memory": 80 * GIB}
# A compute capability 7.5 card whose float16 gives NaN losses, with little memory.
T1000 = {"gpus": 1, "gpu_compute_capability": [7, 5], "device_name": "Quadro T1000",
         "device_memory": 16 << 20}
HELPER = SCRIPTS / "described_train.py"


def _train(tmp_path, hardware: dict, *args):
    runs = tmp_path / "runs"
    result = subprocess.run(
        [sys.executable, str(HELPER), json.dumps(hardware), "train", "--epochs", "2",
         "--steps-per-epoch", "2", "--input-size", "32", "--jit-compile", "off",
         "--runs-dir", str(runs), "--name", "r", *args],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env={**__import__("os").environ, "COROLLA_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr[-3000:]
    run = runs / "r"
    import tomllib

    config = tomllib.loads((run / paths.CONFIG).read_text())
    session = json.loads((run / paths.PLAN).read_text())["sessions"][0]["plan"]
    auto = [line for line in result.stdout.splitlines() if line.startswith("recipe auto on")]
    return config, session, auto


@pytest.mark.slow
@pytest.mark.large  # 33 s on a 2-core host: CI's large step
def test_a_model_without_weights_on_a_gpu_trains_from_scratch_at_the_datas_size(
        tmp_path, flowers5):
    """`--model small_cnn` on 192 px data, offline, on a small T-series card: no error about
    ImageNet weights or the recipe's 512 px; float32 (its float16 is broken); the batch from
    its 16 MiB."""
    config, session, auto = _train(tmp_path, {**T1000, "offline": True}, "--data",
                                   str(flowers5), "--model", "small_cnn")
    assert len(auto) == 1 and auto[0].startswith("recipe auto on a GPU: cpu (no pre-trained "
                                                 "weights to fine-tune, small_cnn has no "
                                                 "pre-trained weights; from scratch")
    assert config["train"]["recipe"] == "cpu" and config["model"]["weights"] == "none"
    assert config["data"]["image_size"] == 192 and config["model"]["input_size"] == 32
    assert session["precision"] == "float32" and session["accelerator"] == "gpu"
    assert session["hardware"]["device_name"] == "Quadro T1000"
    batch = choose_batch(16 << 20, 32, _activations("small_cnn"), "float32", examples=2717)
    assert 8 < batch < 256
    assert config["train"]["global_batch_size"] == session["global_batch"] == batch
    assert f"batch {batch} a replica (16 MiB, small_cnn at 32 px, float32)" in auto[0]


def _activations(name):
    from corolla import models

    return models.get(name).activations


@pytest.mark.slow
@pytest.mark.large  # 66 s on a 2-core host: CI's large step
def test_a_local_preset_folder_on_a_gpu_fine_tunes_it_with_a_batch_for_the_card(
        tmp_path, flowers5):
    """`--weights FOLDER` (a keras-hub preset folder, offline) on an 80 GB card: that preset
    is fine-tuned with the GPU recipe's schedule, at the data's 192 px (not the recipe's 512),
    with the batch the card holds and the learning rate scaled with it."""
    pytest.importorskip("keras_hub")
    lite0 = SHARED / "weights" / "efficientnet_lite0_imagenet"
    if not (lite0 / "config.json").is_file():
        pytest.skip(f"{lite0} is absent")
    config, session, auto = _train(tmp_path, {**H100, "offline": True}, "--data", str(flowers5),
                                   "--weights", str(lite0), "--warmup-epochs", "1")
    assert auto[0].startswith(f"recipe auto on a GPU: effnet-b7-finetune (the keras-hub preset "
                              f"folder {lite0}; image size 192 (the data's nearest to 512)")
    assert config["model"]["name"] == f"hub:{lite0}" and config["model"]["weights"] == "imagenet"
    assert config["data"]["image_size"] == 192
    assert session["precision"] == "mixed_bfloat16"
    assert config["train"]["global_batch_size"] == 256  # 80 GiB at 32 px: the cap
    # The recipe's peak, 5e-5 for 16 images a replica, x 256 / 16 (one replica).
    assert config["train"]["learning_rate"] == pytest.approx(5e-5 * 16)


@pytest.fixture
def h100_plan():
    from corolla import config, runtime

    import keras

    with plan.described(**{k: tuple(v) if isinstance(v, list) else v for k, v in H100.items()}):
        described = runtime.detect_for(config.RunConfig())
    yield described
    keras.config.set_dtype_policy("float32")  # detect set the card's mixed_bfloat16


def _auto(described, flags: dict, monkeypatch, reachable: bool):
    """`corolla train`'s settings for `described` (a plan), weights downloadable or not:
    (config, plan, recipe, the lines logged)."""
    from corolla.config.flags import Given
    from corolla.flows import train as train_flow
    from corolla.models import hub

    monkeypatch.setattr(hub, "reachable", lambda *a, **k: reachable)
    lines = []
    return (*train_flow.for_plan(None, Given(flags), described, log=lines.append), lines)


def test_auto_on_a_gpu_offline_without_weights_trains_the_scratch_recipe(
        h100_plan, flowers5, monkeypatch):
    cfg, run_plan, recipe, lines = _auto(h100_plan, {"data.path": str(flowers5)}, monkeypatch,
                                         reachable=False)
    assert recipe.name == "cpu" and (cfg.model.name, cfg.model.weights) == ("small_cnn", "none")
    assert lines[0].startswith("recipe auto on a GPU: cpu (no pre-trained weights to fine-tune, "
                               "offline: ")
    assert run_plan.global_batch == 256 and "small_cnn at 176 px" in lines[0]


def test_auto_on_a_gpu_with_downloadable_weights_reads_the_datas_nearest_size(
        h100_plan, flowers5, monkeypatch):
    """EfficientNet-B7's recipe asks 512 px; the data has 192: that, not an error."""
    cfg, run_plan, recipe, _ = _auto(h100_plan, {"data.path": str(flowers5)}, monkeypatch,
                                     reachable=True)
    assert recipe.name == "effnet-b7-finetune" and cfg.data.image_size == 192
    batch = choose_batch(80 << 30, 192, 145.0, "mixed_bfloat16", examples=2717)
    assert run_plan.batch_per_replica == cfg.train.batch_size == batch
    assert cfg.train.learning_rate == pytest.approx(5e-5 * batch / 16)
    # What the user sets is theirs: no size, batch or rate decided over it.
    cfg, run_plan, _, _ = _auto(
        h100_plan, {"data.path": str(flowers5), "train.batch_size": 8,
                    "train.learning_rate": 1e-4, "model.name": "efficientnet_b0"}, monkeypatch,
        reachable=True)
    assert (run_plan.batch_per_replica, cfg.train.learning_rate) == (8, 1e-4)
