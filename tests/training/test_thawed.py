"""Thawed steps on cached outputs (`training.thawed`): where only the backbone's top trains with
its BatchNorm in inference mode and flips alone augment, the top trains on its frozen lower
part's outputs computed once per view: the same update as a step of the whole model, taken only
where allowed, on disk past the memory bound, resumable, the saved model the full one."""

import numpy as np
import pytest

from corolla.runs import paths
from helpers.runs import Stop, history, saved_weights

# small_resnet: residual blocks, so the cut search meets an Add; from scratch, BatchNorm kept
# in inference mode by asking for it.
THAWED = {"model.name": "small_resnet", "model.input_size": 32, "model.weights": "none",
          "data.augment": ["flip"], "train.batchnorm": "inference",
          "train.unfreeze_fraction": 0.5, "train.epochs": 2, "train.frozen_epochs": 0,
          "train.cache_thawed": True}


def _split(fraction=0.5, size=32):
    import keras

    from corolla import models
    from corolla.training import phases, thawed

    keras.utils.set_random_seed(0)
    model = models.create_model("small_resnet", 3, size, "none")
    backbone = phases.backbone_of(model)
    phases.freeze(backbone, phases.Phase(0, 1, frozen=False), fraction, frozen_bn=True)
    cut = thawed.clean_cut(backbone, fraction)
    return model, backbone, cut


def test_the_cut_lies_below_every_trained_layer_and_one_tensor_crosses_it():
    from corolla.training import thawed

    model, backbone, cut = _split()
    (_, node), = cut
    nodes = thawed.graph_nodes(backbone)
    at = nodes.index(node)
    assert not any(node.operation.trainable_weights for node in nodes[:at + 1])
    assert any(node.operation.trainable_weights for node in nodes[at + 1:])
    assert node.operation.name == "stage0_out"  # part of stage1 trains: its block's input
    lower, top = thawed.split_at(model, backbone, cut)
    assert {id(v) for v in top.trainable_weights} == {id(v) for v in model.trainable_weights}
    assert not lower.trainable_weights


def test_a_backbone_that_wraps_another_behind_its_preprocessing_is_cut_inside_it():
    """As the registered efficientnet_lite0 wraps keras-hub's backbone: the cut is found in
    the model the wrapper calls, and the two halves compute the whole model's outputs."""
    import keras

    from corolla import models
    from corolla.training import phases, thawed

    keras.utils.set_random_seed(0)
    inner = models.get("small_resnet").backbone((32, 32, 3), None)
    images = keras.Input((32, 32, 3))
    wrapper = keras.Model(images, inner(keras.layers.Rescaling(0.5, name="scale")(images)))
    inputs = keras.Input((32, 32, 3))
    pooled = keras.layers.GlobalAveragePooling2D(name="pool")(wrapper(inputs))
    model = keras.Model(inputs, keras.layers.Dense(3, name="probabilities")(pooled))
    phases.freeze(wrapper, phases.Phase(0, 1, frozen=False), 0.5, frozen_bn=True)
    cut = thawed.clean_cut(wrapper, 0.5)
    assert [node.operation.name for _, node in cut] == [inner.name, "stage0_out"]
    lower, top = thawed.split_at(model, wrapper, cut)
    x = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3)).astype("float32")
    np.testing.assert_allclose(top.predict(lower.predict(x, verbose=0), verbose=0),
                               model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


def test_no_cut_where_the_whole_backbone_trains():
    from corolla.training import thawed

    _, backbone, _ = _split(fraction=1.0)
    assert thawed.clean_cut(backbone, 1.0) is None


def test_a_step_of_the_top_on_cached_outputs_is_a_step_of_the_whole_model():
    import keras

    from corolla.training import thawed

    model, backbone, cut = _split()
    lower, top = thawed.split_at(model, backbone, cut)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (8, 32, 32, 3)).astype("float32")
    y = np.eye(3, dtype="float32")[rng.integers(0, 3, 8)]
    start = [v.numpy() for v in model.weights]

    def step(fitted, inputs):
        for variable, value in zip(model.weights, start):
            variable.assign(value)
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss="categorical_crossentropy")
        if fitted is not model:  # as the path compiles it: the model's optimizer and loss
            fitted.compile(optimizer=model.optimizer, loss=model.loss)
        fitted.train_on_batch(inputs, y)
        return [v.numpy() for v in model.weights]

    whole = step(model, x)
    on_cache = step(top, lower.predict(x, verbose=0))
    moved = [not np.allclose(a, b) for a, b in zip(start, whole)]
    assert any(moved)
    for a, b in zip(whole, on_cache):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_run_trains_the_top_on_cached_outputs_and_saves_the_full_model(train_tiny, tmp_path):
    lines = []
    result, _ = train_tiny.fit(tmp_path, "r", THAWED, log=lines.append)
    run = tmp_path / "r"
    said = [line for line in lines if line.startswith("backbone's frozen lower part")]
    assert len(said) == 1 and "up to stage0_out" in said[0] and "in memory" in said[0]
    assert "and their mirror images" in said[0]
    assert [row["epoch"] for row in history(run)] == ["1", "2"]
    assert float(history(run)[-1]["val_f1_macro"]) >= 0  # validated on the full model
    import keras

    import corolla.models.layers  # noqa: F401 (registers Corolla's layers)

    saved = keras.saving.load_model(run / paths.MODEL, compile=False)
    classes = (run / paths.CLASSES).read_text().splitlines()
    assert saved.input_shape == (None, 32, 32, 3)
    assert saved.output_shape == (None, len(classes))
    assert len(saved_weights(run / paths.LAST)) == len(saved.get_weights())


def test_one_trained_epoch_caches_the_images_as_they_are_alone(train_tiny, tmp_path):
    lines = []
    train_tiny.fit(tmp_path, "r", {**THAWED, "train.epochs": 1}, log=lines.append)
    said = next(line for line in lines if line.startswith("backbone's frozen lower part"))
    assert "training images cached in" in said  # no mirror images


@pytest.mark.parametrize("setting, why", [
    ({"data.augment": ["flip", "color"]}, "the augmentation (flip, color) changes the images"),
    ({"train.batchnorm": "train"}, "its BatchNorm trains"),
])
def test_a_run_that_cannot_cache_trains_on_images_and_says_why(train_tiny, tmp_path, setting,
                                                               why):
    lines = []
    train_tiny.fit(tmp_path, "r", {**THAWED, "train.epochs": 1, **setting}, log=lines.append)
    assert not any(line.startswith("backbone's frozen lower part") for line in lines)
    assert any(line.startswith("backbone's top trained on images every epoch") and why in line
               for line in lines)


def test_a_run_whose_whole_backbone_trains_says_nothing_of_the_cache(train_tiny, tmp_path):
    lines = []
    train_tiny.fit(tmp_path, "r", {**THAWED, "train.epochs": 1, "train.unfreeze_fraction": 1.0},
                   log=lines.append)
    assert not any(line.startswith("backbone's") for line in lines)


def test_past_the_memory_bound_the_outputs_go_to_the_backup_folder_and_leave_with_it(
        train_tiny, tmp_path, monkeypatch):
    import keras

    from corolla.data import pipeline
    from corolla.training import thawed

    monkeypatch.setattr(pipeline, "memory_budget", lambda: 1024.0)
    files = []
    look = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: files.extend((tmp_path / "r").rglob("*.npy")))
    lines = []
    train_tiny.fit(tmp_path, "r", THAWED, [look], log=lines.append)
    said = next(line for line in lines if line.startswith("backbone's frozen lower part"))
    folder = tmp_path / "r" / paths.BACKUP / thawed.FOLDER
    assert f"in {folder / 'lower-outputs.npy'}" in said
    assert folder / "lower-outputs.npy" in files  # there while it trained
    assert not (tmp_path / "r" / paths.BACKUP).exists()  # gone with the backup


def test_the_disk_cache_gives_the_batches_the_memory_one_does(tmp_path):
    from corolla.training import thawed

    values = np.random.default_rng(0).normal(size=(2, 5, 3, 3, 4)).astype("float32")
    folder = tmp_path / "cache"
    tables = [thawed.ViewCache(2, 5, (3, 3, 4), "float32", bound, folder)
              for bound in (float("inf"), 0)]
    assert tables[0].path is None and tables[1].path == folder / "lower-outputs.npy"
    for table in tables:
        table.table[:] = values
    labels = np.array([0, 1, 2, 0, 1])
    batches = [list(table.batches(labels, 3, 2, 3, 1, 3, seed=7)) for table in tables]
    assert len(batches[0]) == 6
    for (xa, ya), (xb, yb) in zip(*batches):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    tables[1].close()
    assert not folder.exists()


def test_a_killed_run_resumes_on_cached_outputs(train_tiny, tmp_path):
    import keras

    class KillAfterFirst(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise Stop

    result, _ = train_tiny.fit(tmp_path, "r", THAWED, [KillAfterFirst()])
    assert result is None
    lines = []
    result, _ = train_tiny.fit(tmp_path, "r", {}, resume=True, log=lines.append)
    assert any(line.startswith("backbone's frozen lower part") for line in lines)
    assert [row["epoch"] for row in history(tmp_path / "r")] == ["1", "2"]
    assert (tmp_path / "r" / paths.MODEL).is_file()


def test_a_timed_runs_probe_measures_the_top_on_cached_outputs_and_their_caching(
        train_tiny, tmp_path):
    import keras

    def stop(epoch, logs):  # the plan and the first epoch are what this looks at
        raise Stop

    lines = []
    train_tiny.fit(tmp_path, "r", {**THAWED, "train.time_budget": "10m"},
                   [keras.callbacks.LambdaCallback(on_epoch_end=stop)], log=lines.append)
    probe = next(line for line in lines if line.startswith("time probe: "))
    assert "the backbone's lower part's outputs cached at 32 px in " in probe
    assert any(line.startswith("backbone's frozen lower part") for line in lines)
