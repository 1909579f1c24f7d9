"""Fine-tuning a pre-trained backbone: the registered efficientnet_lite0 on the real
ImageNet weights of ../shared (load, fine-tune, save, reload), BatchNorm statistics kept while
frozen and (by default) when unfrozen, only the top of the backbone trained when asked, no
weight decay on normalization and bias variables, `--recipe auto` on a CPU, and the head
trained on cached frozen features equal to the slow path."""

import numpy as np
import pytest

from corolla import config
from corolla.config.flags import Given
from corolla.errors import UserError
from corolla.runs import paths
from helpers.processes import SHARED
from helpers.runs import history

LITE0 = SHARED / "weights" / "efficientnet_lite0_imagenet"


@pytest.fixture(scope="module")
def lite0() -> str:
    pytest.importorskip("keras_hub")
    if not (LITE0 / "config.json").is_file():
        pytest.skip(f"{LITE0} is absent")
    return str(LITE0)


@pytest.fixture
def offline(monkeypatch):
    """No network and an empty kagglehub cache, whatever the machine has."""
    from corolla.models import hub

    monkeypatch.setattr(hub, "reachable", lambda *a, **k: False)
    monkeypatch.setattr(hub, "cached", lambda named: False)


def _images(n, size, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (n, size, size, 3)).astype("float32")


@pytest.mark.slow
def test_the_shared_preset_loads_fine_tunes_and_reloads_in_safe_mode(lite0, tmp_path):
    import keras

    from corolla import models
    from corolla.training.optimizer import make_optimizer

    model = models.create_model("efficientnet_lite0", 3, 64, lite0)
    # The weights file of the same preset gives the same network (and its converter).
    same = models.create_model("efficientnet_lite0", 3, 64, f"{lite0}/model.weights.h5")
    x = _images(8, 64)
    backbone = next(layer for layer in model.layers if isinstance(layer, keras.Model))
    other = next(layer for layer in same.layers if isinstance(layer, keras.Model))
    np.testing.assert_allclose(backbone.predict(x, verbose=0), other.predict(x, verbose=0),
                               atol=1e-5)
    train = config.TrainConfig()
    model.compile(optimizer=make_optimizer(train, 1e-3, model), loss="categorical_crossentropy",
                  run_eagerly=True)  # two steps: tracing the graph would take 3x longer
    before = [np.array(w) for w in backbone.trainable_weights]
    model.fit(x, np.eye(3)[np.arange(8) % 3], batch_size=4, epochs=1, verbose=0)
    assert any(not np.array_equal(a, np.array(b))
               for a, b in zip(before, backbone.trainable_weights))  # it trained
    model.save(tmp_path / "m.keras")
    reloaded = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    np.testing.assert_array_equal(model.predict(x, verbose=0), reloaded.predict(x, verbose=0))


@pytest.mark.slow
def test_batchnorm_statistics_stay_while_frozen_and_in_inference_mode(lite0, tiny_petals,
                                                                      tmp_path):
    """A frozen epoch (the slow path: colour augmentation) then an unfrozen one with
    train.batchnorm auto (pre-trained: inference): every BatchNorm moving mean and variance
    and its scale and offset end as the preset has them, while the convolutions trained."""
    import keras

    from corolla import models, runtime, training
    from corolla.training.phases import batchnorm_layers

    cfg = config.load_config(overrides={
        "data.path": str(tiny_petals), "data.augment": "color", "model.name": "efficientnet_lite0",
        "model.weights": lite0, "train.epochs": 2, "train.frozen_epochs": 1,
        "train.steps_per_epoch": 1, "train.batch_size": 8, "output.runs_dir": str(tmp_path),
        "output.name": "bn"})
    training.run(cfg, runtime.detect_for(cfg), log=lambda *a: None)
    trained = keras.saving.load_model(tmp_path / "bn" / paths.LAST, compile=False)
    fresh = models.create_model("efficientnet_lite0", 4, 32, lite0)
    pairs = list(zip(batchnorm_layers(fresh), batchnorm_layers(trained)))
    assert len(pairs) == 49
    for a, b in pairs:
        for name in ("moving_mean", "moving_variance", "gamma", "beta"):
            np.testing.assert_array_equal(np.array(getattr(a, name)),
                                          np.array(getattr(b, name)), err_msg=a.name)
    convs = [(a, b) for a, b in zip(fresh.weights, trained.weights) if "kernel" in a.path]
    assert sum(not np.array_equal(np.array(a), np.array(b)) for a, b in convs) > len(convs) // 2


@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_only_the_backbones_top_fraction_trains_once_it_thaws(lite0, tiny_petals, tmp_path):
    """train.unfreeze_fraction 0.5 with BatchNorm in training mode: after an epoch, every
    weight of the bottom half of the backbone's weighted layers (BatchNorm statistics
    included) is the preset's, while the top half trained."""
    import keras

    from corolla import models, runtime, training
    from corolla.training.phases import backbone_of, below_unfrozen

    cfg = config.load_config(overrides={
        "data.path": str(tiny_petals), "model.name": "efficientnet_lite0",
        "model.weights": lite0, "train.epochs": 1,
        "train.unfreeze_fraction": 0.5, "train.batchnorm": "train",
        "train.steps_per_epoch": 1, "train.batch_size": 8, "output.runs_dir": str(tmp_path),
        "output.name": "top"})
    training.run(cfg, runtime.detect_for(cfg), log=lambda *a: None)
    trained = keras.saving.load_model(tmp_path / "top" / paths.LAST, compile=False)
    fresh = models.create_model("efficientnet_lite0", 4, 32, lite0)
    frozen = {layer.name for layer in below_unfrozen(backbone_of(fresh), 0.5)}
    assert 45 <= len(frozen) <= 53  # of the backbone's 98 weighted layers
    same = {a.path: np.array_equal(np.array(a), np.array(b))
            for a, b in zip(backbone_of(fresh).weights, backbone_of(trained).weights)}
    below = [path for path in same if path.split("/")[-2] in frozen]
    above = [path for path in same if path not in below]
    assert below and all(same[path] for path in below)
    assert sum(not same[path] for path in above) > len(above) // 2


def test_batchnorm_mode_follows_the_weights_unless_the_recipe_says():
    from corolla.training.phases import batchnorm_inference

    def mode(**keys):
        return batchnorm_inference(config.load_config(overrides=keys))

    assert mode(**{"model.weights": "imagenet"})
    assert not mode(**{"model.weights": "none"})  # from scratch: BatchNorm learns
    assert not mode(**{"model.weights": "imagenet", "train.batchnorm": "train"})
    assert mode(**{"model.weights": "none", "train.batchnorm": "inference"})
    with pytest.raises(UserError, match="train.batchnorm must be one of auto, inference"):
        config.load_config(overrides={"train.batchnorm": "frozen"})


def test_weight_decay_leaves_normalization_and_bias_variables_alone():
    import keras

    from corolla.training.optimizer import make_optimizer

    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(2, name="dense")(keras.layers.LayerNormalization(name="ln")(x))
    model = keras.Model(inputs, outputs)
    for layer in model.layers:  # every variable away from its initial 0 / 1
        layer.set_weights([w + 0.5 for w in layer.get_weights()])
    train = config.TrainConfig(optimizer="adamw", weight_decay=0.1)
    optimizer = make_optimizer(train, 0.1, model)
    before = {v.path: np.array(v) for v in model.trainable_variables}
    # Zero gradients: Adam's step is 0, so whatever moves was decayed.
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v)
                               for v in model.trainable_variables])
    decayed = {v.path for v in model.trainable_variables
               if not np.array_equal(before[v.path], np.array(v))}
    assert decayed == {"conv/kernel", "dense/kernel"}


def _cpu_plan():
    from corolla import runtime

    return runtime.detect_for(config.RunConfig())


def test_auto_on_a_cpu_fine_tunes_with_a_local_copy(tmp_path, offline):
    from corolla.flows import train as train_flow

    (tmp_path / "config.json").write_text("{}")
    lines = []
    cfg, _, recipe = train_flow.for_plan(None, Given({"model.weights": str(tmp_path)}),
                                         _cpu_plan(), log=lines.append)
    assert recipe.name == cfg.train.recipe == "cpu-finetune"
    assert (cfg.model.name, cfg.model.weights) == ("efficientnet_lite0", str(tmp_path))
    assert lines == [(f"recipe auto on a CPU: cpu-finetune (efficientnet_lite0: local copy "
                      f"{tmp_path})")]


def test_auto_on_a_cpu_offline_without_a_copy_trains_from_scratch(offline):
    from corolla.flows import train as train_flow

    lines = []
    cfg, _, recipe = train_flow.for_plan(None, Given(), _cpu_plan(), log=lines.append)
    assert recipe.name == "cpu" and cfg.model.weights == "none"
    assert len(lines) == 1 and lines[0].startswith("recipe auto on a CPU: cpu (no pre-trained "
                                                   "weights to fine-tune, offline: ")
    # A model without pre-trained weights is from scratch too, said why.
    _, _, recipe = train_flow.for_plan(None, Given({"model.name": "small_cnn"}), _cpu_plan(),
                                       log=lines.append)
    assert recipe.name == "cpu" and "small_cnn has no pre-trained weights" in lines[-1]


def test_auto_on_a_cpu_fine_tunes_when_the_preset_is_downloadable(monkeypatch):
    from corolla.flows import train as train_flow
    from corolla.models import hub

    monkeypatch.setattr(hub, "cached", lambda named: False)
    monkeypatch.setattr(hub, "reachable", lambda *a, **k: True)
    lines = []
    _, _, recipe = train_flow.for_plan(None, Given(), _cpu_plan(), log=lines.append)
    assert recipe.name == "cpu-finetune" and "downloadable" in lines[0]


def test_an_offline_download_fails_at_once_with_one_line(offline):
    import time

    from corolla import models

    began = time.monotonic()
    with pytest.raises(UserError, match=r"could not download keras-hub preset "
                                        r"efficientnet_lite0_ra_imagenet .*--weights FOLDER"):
        models.create_model("efficientnet_lite0", 3, 32, "imagenet")
    assert time.monotonic() - began < 10


def test_a_folder_is_a_weights_file_error_for_keras_applications(tmp_path):
    from corolla import models

    with pytest.raises(UserError, match="is a folder; mobilenet_v3_small takes a weights file"):
        models.check_weights(models.get("mobilenet_v3_small"), str(tmp_path))
    assert models.check_weights(models.get("efficientnet_lite0"), str(tmp_path)) == str(tmp_path)


def test_head_on_cached_features_equals_the_slow_path():
    """The same head weights as fitting the whole (frozen) model on the images, given the same
    images in the same order: split_model's features are the frozen model's own."""
    import keras

    from corolla import models
    from corolla.training import features

    x, y = _images(16, 32, seed=1), np.eye(3, dtype="float32")[np.arange(16) % 3]

    def frozen_model():
        keras.utils.set_random_seed(3)
        return models.create_model("small_cnn", 3, 32, train_backbone=False)

    def compiled(model):
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1))
        return model

    slow = compiled(frozen_model())
    slow.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    fast = frozen_model()
    extractor, head = features.split_model(fast)
    compiled(head).fit(extractor.predict(x, verbose=0), y, batch_size=4, epochs=2,
                       shuffle=False, verbose=0)
    for a, b in zip(slow.get_layer("probabilities").get_weights(),
                    fast.get_layer("probabilities").get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert not np.allclose(fast.get_layer("probabilities").get_weights()[0],
                           frozen_model().get_layer("probabilities").get_weights()[0])


def test_cached_feature_epochs_are_fresh_draws_with_mirrors_at_random():
    from corolla.training import features

    table = np.stack([np.arange(10.0)[:, None], -np.arange(10.0)[:, None]])  # [2, 10, 1]
    labels = np.arange(10) % 2
    batches = list(features.dataset(table, labels, 2, batch=4, steps=3, first_epoch=0,
                                    last_epoch=2, seed=7))
    values = np.concatenate([np.asarray(b[0])[:, 0] for b in batches])
    assert len(batches) == 6 and values.shape == (24,)
    first = values[:12]
    assert len(set(np.abs(first[:10]))) == 10  # a permutation, then repeated as needed
    assert (values < 0).any() and (values > 0).any()  # both views drawn
    again = list(features.dataset(table, labels, 2, batch=4, steps=3, first_epoch=1,
                                  last_epoch=2, seed=7))
    np.testing.assert_array_equal(np.concatenate([np.asarray(b[0])[:, 0] for b in again]),
                                  values[12:])  # epoch 1 drawn the same when resumed there
    assert features.cacheable(["flip"]) and not features.cacheable(["flip", "color"])
    # --class-weight reaches the head's stream too: each example weighted by its class's weight.
    weighted = list(features.dataset(table, labels, 2, batch=4, steps=3, first_epoch=0,
                                     last_epoch=2, seed=7, class_weights=[0.5, 3.0]))
    for (x, y, w), (x0, _) in zip(weighted, batches):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(x0))
        np.testing.assert_array_equal(np.asarray(w), np.where(np.asarray(y)[:, 1] == 1, 3.0, 0.5))


def test_train_help_says_the_recipe_sets_the_defaults(capsys):
    from corolla.cli import main

    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--epochs EPOCHS default: the recipe's; cpu: 56, cpu-finetune: 11" in text
    assert "default 12" not in text
    assert "--unfreeze-fraction UNFREEZE_FRACTION the part of the backbone trained once it " \
        "thaws, from the top (cheaper steps below 1); default: the recipe's; cpu: 1, " \
        "cpu-finetune: 0.5" in text


@pytest.mark.slow
def test_a_frozen_run_trains_its_head_on_cached_features_end_to_end(tiny_petals, tmp_path):
    """--freeze-backbone with flips: the features are cached once (said in the log), every
    epoch is validated and recorded (counted from 1), the classifier trained, the backbone
    (BatchNorm statistics included) untouched."""

    import keras

    from corolla import models, runtime, training

    cfg = config.load_config(overrides={
        "data.path": str(tiny_petals), "data.augment": "flip", "model.train_backbone": False,
        "train.epochs": 2, "train.steps_per_epoch": 2, "train.batch_size": 8, "train.seed": 5,
        "output.runs_dir": str(tmp_path), "output.name": "frozen"})
    lines = []
    keras.utils.set_random_seed(5)
    initial = models.create_model("small_cnn", 4, 32, train_backbone=False)
    training.run(cfg, runtime.detect_for(cfg), log=lines.append)
    assert sum("features of 64 training images and their mirror images" in line
               for line in lines) == 1
    rows = history(tmp_path / "frozen")
    assert [r["epoch"] for r in rows] == ["1", "2"] and all(r["val_f1_macro"] for r in rows)
    trained = keras.saving.load_model(tmp_path / "frozen" / paths.LAST, compile=False)
    backbone = [np.array(w) for w in trained.get_layer("small_cnn_backbone").weights]
    for a, b in zip(initial.get_layer("small_cnn_backbone").weights, backbone):
        np.testing.assert_array_equal(np.array(a), b)
    assert not np.allclose(initial.get_layer("probabilities").get_weights()[0],
                           trained.get_layer("probabilities").get_weights()[0])
