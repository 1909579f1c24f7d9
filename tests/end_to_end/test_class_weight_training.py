"""`--class-weight balanced` trained for real: the rare class's recall rises, and class weights with
mixed labels train on several replicas, TensorFlow's and JAX's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corolla import config
from corolla.runs import paths
from helpers.processes import REPO, SCRIPTS, run_python


def _rare_recall(train_tiny, rare_class, runs, name, weight) -> float:
    run = train_tiny(runs, "--model", "small_cnn", "--epochs", "2", "--batch-size", "16", "--lr",
                     "0.003", "--no-augment", "--seed", "1", "--class-weight", weight,
                     data=rare_class, name=name, tiny=())
    saved = config.load_config(run / paths.CONFIG)
    assert saved.train.class_weight == weight  # recorded with the run
    per_class = json.loads((run / paths.METRICS).read_text())["per_class"]
    return next(c["recall"] for c in per_class if c["name"] == "rare")


@pytest.mark.slow
@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_balanced_raises_the_rare_classs_recall(rare_class, tmp_path, train_tiny):
    """Measured: recall of the rare class 0.0 unweighted, 0.75 balanced (2 epochs, seed 1)."""
    none = _rare_recall(train_tiny, rare_class, tmp_path, "none", "none")
    balanced = _rare_recall(train_tiny, rare_class, tmp_path, "balanced", "balanced")
    assert balanced > none + 0.2, (none, balanced)


HELPER = SCRIPTS / "replicas.py"


@pytest.mark.large
@pytest.mark.parametrize("backend, devices, strategy", [("tensorflow", 2, "MirroredStrategy"),
                                                        ("jax", 2, "DataParallel")])
def test_class_weights_with_mixed_labels_train_on_several_replicas(tiny_petals, tmp_path,
                                                                   backend, devices, strategy):
    overrides = json.dumps({"train.class_weight": "balanced", "data.augment": ["flip", "mixup"]})
    argv = [str(HELPER), backend, str(devices), "train", str(tiny_petals), str(tmp_path), "16",
            overrides]
    code = f"import runpy, sys; sys.argv = {argv!r}; " \
           f"runpy.run_path({str(HELPER)!r}, run_name='__main__')"
    result = run_python(code, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads([s for s in result.stdout.splitlines() if s.startswith("RESULT ")][-1][7:])
    assert (out["strategy"], out["replicas"]) == (strategy, devices)
    run = Path(out["run_dir"])
    assert config.load_config(run / paths.CONFIG).train.class_weight == "balanced"
    assert (run / paths.MODEL).is_file()
