"""The backbone ladder (`models.ladder`): a larger EfficientNet-Lite rung is chosen only where
the suite says it earns its time and its features fit the budget at the host's pace; the rungs
are read from a folder of keras-hub preset folders, or keras-hub's downloadable presets; and
`recipe auto` applies it only where the user chose neither model nor preset."""

import json
import shutil

import pytest

from corolla.flows import auto
from corolla.models import ladder
from corolla.models.ladder import Rung
from helpers.processes import SHARED

WEIGHTS = SHARED / "weights"
RUNGS = [Rung("lite0", "/w/l0", 192), Rung("lite0", "/w/l0", 224), Rung("lite1", "/w/l1", 240),
         Rung("lite2", "/w/l2", 260)]
# (cost against the foot, mean gain, worst gain): Lite0 at 224 and Lite2 earn, Lite1 does not.
SUITE = {("lite0", 192): (1.0, 0.0, 0.0), ("lite0", 224): (1.4, 0.02, 0.0),
         ("lite1", 240): (2.0, 0.03, -0.01), ("lite2", 260): (3.0, 0.04, 0.01)}


def test_the_rung_that_gains_most_of_those_that_earn_their_time_and_fit_is_chosen():
    # 1,000 photos at 0.01 s an image on the foot: Lite2 takes 30 s, within 25% of 180 s.
    rung, why = ladder.choose(RUNGS, 180, 1000, 0.01, SUITE)
    assert rung == RUNGS[3]
    assert why == ("EfficientNet-Lite2 at 260 px: its forward passes over 1000 images take ~30 s "
                   "here, within 25% of 180 s, and its linear probe gains +0.040 on the suite")


def test_a_larger_rung_that_gains_less_is_not_chosen():
    # Lite1 gains more than Lite2 (as on the suite): Lite1, though Lite2 fits too.
    suite = {**SUITE, ("lite1", 240): (2.0, 0.05, 0.01)}
    assert ladder.choose(RUNGS, 180, 1000, 0.01, suite)[0] == RUNGS[2]


def test_a_rung_whose_features_do_not_fit_gives_way_to_a_smaller_one_that_earns():
    # Lite2: 150 s, over 45 s; Lite1 does not earn (worse on a set); Lite0 at 224: 70 s > 45.
    rung, why = ladder.choose(RUNGS, 180, 5000, 0.01, SUITE)
    assert rung == RUNGS[0] and \
        "Lite0 at 224 px's forward passes over 5000 images would take ~70 s" in why and \
        "over 25% of 180 s" in why
    rung, _ = ladder.choose(RUNGS, 300, 5000, 0.01, SUITE)  # 75 s allowed: Lite0 at 224
    assert rung == RUNGS[1]


def test_no_rung_is_climbed_where_the_suite_says_none_earns_its_time():
    flat = {key: (cost, 0.004, -0.002) for key, (cost, _, _) in SUITE.items()}
    rung, why = ladder.choose(RUNGS, 3600, 10, 1e-4, flat)  # all the time in the world
    assert rung == RUNGS[0]
    assert why.startswith("EfficientNet-Lite0 at 192 px: no larger rung earns its time on the "
                          "suite's linear probes") and "+0.004 mean, -0.002 worst" in why
    assert not ladder.climbable(RUNGS, flat) and ladder.climbable(RUNGS, SUITE)


def test_without_a_budget_or_a_pace_or_a_choice_the_foot_is_kept():
    assert ladder.choose(RUNGS, None, 1000, 0.01, SUITE)[0] == RUNGS[0]
    assert ladder.choose(RUNGS, 180, 1000, None, SUITE)[0] == RUNGS[0]
    rung, why = ladder.choose(RUNGS[:1], 180, 1000, 0.01, SUITE)
    assert rung == RUNGS[0] and why.endswith("the only rung of the Lite ladder here")


def _preset(folder, config: dict):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _lite(width=1.0, depth=1.1, **extra) -> dict:
    return {"class_name": "EfficientNetBackbone",
            "config": {"activation": "relu6", "stackwise_squeeze_and_excite_ratios": [0] * 7,
                       "stackwise_width_coefficients": [width] * 7,
                       "stackwise_depth_coefficients": [1.0] + [depth] * 5 + [1.0], **extra}}


def test_a_folder_of_preset_folders_gives_its_lite_rungs_and_nothing_else(tmp_path):
    _preset(tmp_path / "b" / "mine_lite2", _lite(1.1, 1.2))
    _preset(tmp_path / "b" / "a_lite0", _lite(1.0, 1.0))
    _preset(tmp_path / "b" / "se", _lite(1.0, 1.1, stackwise_squeeze_and_excite_ratios=[0.25]))
    _preset(tmp_path / "b" / "swish", _lite(1.0, 1.1, activation="swish"))
    _preset(tmp_path / "b" / "resnet", {"class_name": "ResNetBackbone", "config": {}})
    (tmp_path / "b" / "damaged").mkdir()
    (tmp_path / "b" / "damaged" / "config.json").write_text("{not json")
    rungs = ladder.local_rungs(str(tmp_path / "b"))
    assert [(r.name, r.size) for r in rungs] == [("lite0", 192), ("lite0", 224),
                                                 ("lite2", 260)]
    assert rungs[2].weights == str(tmp_path / "b" / "mine_lite2")
    assert ladder.is_shelf(str(tmp_path / "b"))
    assert not ladder.is_shelf(str(tmp_path / "b" / "a_lite0"))  # one preset: a choice
    assert not ladder.is_shelf(str(tmp_path / "b" / "damaged"))


@pytest.mark.skipif(not WEIGHTS.is_dir(), reason="needs ../shared/weights")
def test_the_parity_tested_shared_folders_are_the_ladders_rungs():
    rungs = ladder.local_rungs(str(WEIGHTS))
    assert [(r.name, r.size, r.weights) for r in rungs] == [
        ("lite0", 192, str(WEIGHTS / "efficientnet_lite0_imagenet")),
        ("lite0", 224, str(WEIGHTS / "efficientnet_lite0_imagenet")),
        ("lite1", 240, str(WEIGHTS / "efficientnet_lite1_imagenet")),
        ("lite2", 260, str(WEIGHTS / "efficientnet_lite2_imagenet"))]


def test_the_online_rungs_are_keras_hubs_downloadable_lite_presets():
    """keras-hub's EfficientNet presets, read from its source (importing it takes ~20 s): a
    release that publishes Lite1 or Lite2 fails here, to be added to the ladder's online rungs."""
    import importlib.util
    import re
    from pathlib import Path

    found = importlib.util.find_spec("keras_hub")
    if found is None:
        pytest.skip("keras-hub is not installed")
    presets = Path(found.submodule_search_locations[0], "src", "models", "efficientnet",
                   "efficientnet_presets.py").read_text()
    published = set(re.findall(r'"(efficientnet_lite\w+)": \{', presets))
    assert {f"efficientnet_{name}_ra_imagenet" for name in ladder.ONLINE} == published
    assert {r.weights for r in ladder.online_rungs()} == {"imagenet"}


def _shelf(tmp_path):
    for name, (width, depth) in {"lite0": (1.0, 1.0), "lite2": (1.1, 1.2)}.items():
        _preset(tmp_path / "weights" / f"efficientnet_{name}_imagenet", _lite(width, depth))
    return tmp_path / "weights"


RECIPE = {"model.name": "efficientnet_lite0", "model.weights": "imagenet",
          "model.input_size": 192}


def test_recipe_auto_climbs_to_a_rung_of_a_weights_folder_where_it_earns_and_fits(
        tmp_path, monkeypatch):
    shelf = _shelf(tmp_path)
    monkeypatch.setattr(ladder, "SUITE", SUITE)
    monkeypatch.setattr(auto, "_forward_passes", lambda path: 1000)
    asked = {"model.weights": str(shelf), "train.time_budget": "3m", "data.path": "x"}
    decided, why = auto.backbone(asked, RECIPE, measure=lambda rung: 0.01)
    lite2 = str(shelf / "efficientnet_lite2_imagenet")
    assert decided == {"model.name": f"hub:{lite2}", "model.weights": "imagenet",
                       "model.input_size": 260}
    assert why.startswith("EfficientNet-Lite2 at 260 px: its forward passes over 1000 images")
    # A slower host: Lite0 at 224 is what fits, from the same folder's Lite0.
    decided, _ = auto.backbone(asked, RECIPE, measure=lambda rung: 0.1)
    assert decided == {"model.weights": str(shelf / "efficientnet_lite0_imagenet")}


def test_recipe_auto_measures_nothing_where_no_rung_earns_its_time(tmp_path, monkeypatch):
    shelf = _shelf(tmp_path)
    monkeypatch.setattr(ladder, "SUITE", {k: (c, 0.0, -0.01) for k, (c, _, _) in
                                          SUITE.items()})

    def measure(rung):
        raise AssertionError("measured")

    monkeypatch.setattr(auto, "_forward_passes", measure)
    asked = {"model.weights": str(shelf), "train.time_budget": "3m"}
    decided, why = auto.backbone(asked, RECIPE, measure=measure)
    assert decided == {"model.weights": str(shelf / "efficientnet_lite0_imagenet")}
    assert "no larger rung earns its time" in why


def test_the_ladder_counts_a_labelled_photo_and_its_mirror_and_a_test_photo_once(tmp_path):
    from PIL import Image

    for name in ("train/a/1.jpg", "train/a/2.jpg", "train/b/3.jpg", "test/4.jpg"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8)).save(tmp_path / name)
    assert auto._forward_passes(str(tmp_path)) == 2 * 3 + 1


def test_recipe_auto_leaves_a_users_choice_of_model_preset_or_size_alone(tmp_path):
    shelf = _shelf(tmp_path)
    one = str(shelf / "efficientnet_lite2_imagenet")
    for asked in ({"model.name": "efficientnet_lite0", "model.weights": str(shelf)},
                  {"model.weights": one}, {"model.weights": "imagenet"},
                  {"model.weights": "none"},
                  {"model.weights": str(shelf), "model.input_size": 224}):
        assert auto.backbone({**asked, "train.time_budget": "3m"}, RECIPE) is None
    assert auto.backbone({"model.weights": str(shelf)}, {**RECIPE, "model.name": "cnn"}) is None
    shutil.rmtree(shelf)


def test_a_run_given_a_folder_of_presets_trains_the_rung_recipe_auto_says(tmp_path):
    """`corolla train --weights DIR` (DIR holding preset folders), recipe auto on a CPU: the
    ladder's rung is the run's weights, and the one line of the recipe says why."""
    from corolla import config, runtime
    from corolla.config.flags import Given
    from corolla.flows import train as train_flow

    shelf = _shelf(tmp_path)
    lines = []
    cfg, _, recipe = train_flow.for_plan(None, Given({"model.weights": str(shelf)}),
                                         runtime.detect_for(config.RunConfig()),
                                         log=lines.append)
    assert recipe.name == "cpu-finetune" and cfg.model.name == "efficientnet_lite0"
    assert (cfg.model.weights, cfg.model.input_size) == (
        str(shelf / "efficientnet_lite0_imagenet"), 192)
    assert len(lines) == 1 and lines[0].startswith(
        "recipe auto on a CPU: cpu-finetune (backbone EfficientNet-Lite0 at 192 px") and \
        lines[0].endswith(f"; weights: local copy {shelf})")


def test_the_pace_is_the_foots_forward_pass_measured_without_its_weights():
    """The architecture alone: a folder that does not exist is never read, nothing is
    downloaded; a time an image, bounded."""
    pytest.importorskip("keras_hub")
    seconds = ladder.measure(Rung("lite0", "/nowhere", 64), batch=2, repeats=2)
    assert 0 < seconds < 5
