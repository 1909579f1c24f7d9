"""Models saved before a change of layout still load: a run's model.keras names Corolla's
registered layers (and its optimizer's schedule) by their registered names and module paths, so
moving those modules would strand every trained run. The fixture was written by the code before
the layout move (tests/fixtures/make_old_layout_model.py says how)."""

import shutil
import zipfile

import numpy as np

from corolla.runs import paths
from helpers.processes import FIXTURES


def test_the_fixture_names_the_registered_objects_by_their_old_paths():
    config = zipfile.ZipFile(FIXTURES / "old_layout_model.keras").read("config.json").decode()
    for name in ('"corolla>CaffePreprocessing"', '"module": "corolla.models.layers"',
                 '"corolla>Ramp"', '"module": "corolla.training.schedule"'):
        assert name in config


def test_a_model_saved_before_the_layout_move_loads_and_predicts_the_same(tmp_path):
    from corolla import runtime

    plan = runtime.detect()
    from corolla.evaluation import inference

    shutil.copyfile(FIXTURES / "old_layout_model.keras", tmp_path / paths.MODEL)
    model = inference.load_model(tmp_path, plan, num_classes=3)  # the path evaluate takes
    saved = np.load(FIXTURES / "old_layout_model.npz")
    probabilities = model.predict(saved["images"], verbose=0)
    np.testing.assert_allclose(probabilities, saved["probabilities"], rtol=0, atol=1e-6)
    assert [layer.__class__.__name__ for layer in model.layers][1] == "CaffePreprocessing"
