"""A timed run's floor, the linear head (`training.linear_head`): a logistic regression on the
cached frozen features, written into the model's classifier, kept as the best to beat; the run
ends with it where training fails or scores below it, a killed run keeps its record, and its
refit fits it again on train + val. The probe's costs are fixed here (`fixed_costs`), so that
the plans are the same on any host."""

import json
import tomllib

import numpy as np
import pytest

from corolla.runs import paths
from corolla.training import linear_head

# A timed run of small_cnn whose frozen epoch trains on cached features (tiny_petals, 4 classes).
TIMED = {"train.time_budget": "10m", "train.frozen_epochs": 1, "data.augment": "flip",
         "train.refit": "off"}
# `corolla train`'s flags of such a run, its epochs left to the budget.
TIMED_FLAGS = ("--frozen-epochs", "1", "--augment", "flip", "--time", "10m", "--batch-size", "8",
               "--steps-per-epoch", "2")


# What a run that kept its head says of its refit.keras (the head fit on train + val).
REFIT_LINE = "refit: the run kept its linear head: refit.keras is model.keras with the head fit " \
    "again on the frozen features of train + val, in seconds from those at hand; it is the " \
    "model that predicts (the test split, `corolla predict`) and is exported"


class Kill(BaseException):
    """A kill in the middle of a run: no Exception, which a run that fit its linear head would
    take for a failed training."""


def kill_after_the_first_epoch():
    """A callback that kills the run (`Kill`) as its first epoch ends."""
    import keras

    class KillAfterFirst(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise Kill

    return KillAfterFirst()


@pytest.fixture
def fixed_costs(monkeypatch):
    """The time probe measures nothing: a frozen epoch's caching costs `costs.cache` s a
    batch (5: no host is so slow, the run never falls behind its plan), a trained step
    `costs.thawed` s (100: a few trained epochs of 1-2 steps fit in 10 minutes), a validation
    pass and a commit next to nothing; the plan is not made again."""
    from corolla.training.timing import probe
    from corolla.training.timing.plan import TimePlan

    class Costs:
        thawed = 100.0
        cache = 5.0

    def measure(trainer, kinds, costs, final, val_split, cached):
        for frozen, size in kinds:
            if frozen and cached:
                costs.cache[size], costs.cache_first[size] = Costs.cache, 0.0
            else:
                costs.step[(frozen, size)] = Costs.thawed
                costs.first[(frozen, size)] = costs.epoch[(frozen, size)] = 0.0
        costs.val[final] = costs.val_first[final] = 0.0
        costs.backup = 0.01

    monkeypatch.setattr(probe, "measure", measure)
    monkeypatch.setattr(TimePlan, "replan", lambda *a: None)
    return Costs


@pytest.fixture
def heads(monkeypatch):
    """The linear heads the runs fit, as (kernel, bias), in order."""
    fitted, put = [], linear_head.put

    def recording(model, kernel, bias):
        fitted.append((kernel, bias))
        put(model, kernel, bias)

    monkeypatch.setattr(linear_head, "put", recording)
    return fitted


def _classifier(path):
    import keras

    return keras.saving.load_model(path, compile=False).get_layer("probabilities").get_weights()


def test_the_heads_weights_in_the_model_give_scikit_learns_probabilities():
    """kernel = coef.T and bias = intercept in the model's own classifier: the model predicts
    what LogisticRegression's predict_proba does; a class the training split lacks (here 1 and
    4 of 5) is never predicted."""
    from sklearn.linear_model import LogisticRegression

    from corolla import models
    from corolla.training import features

    rng = np.random.default_rng(0)
    labels = np.array([0, 2, 3] * 20)
    x = rng.normal(size=(60, 256)).astype("float32") + 0.2 * labels[:, None]  # small_cnn's
    kernel, bias = linear_head.fit(x, labels, 5)
    model = models.create_model("small_cnn", 5, 32, train_backbone=False)
    linear_head.put(model, kernel, bias)
    _, head = features.split_model(model)
    # The probe's regression: scikit-learn's own default C.
    assert LogisticRegression().C == linear_head.C
    expected = LogisticRegression(max_iter=linear_head.MAX_ITER).fit(x, labels).predict_proba(x)
    predicted = head.predict(x, verbose=0)
    np.testing.assert_allclose(predicted[:, [0, 2, 3]], expected, atol=1e-4)
    assert predicted[:, [1, 4]].max() < 1e-4
    np.testing.assert_allclose(linear_head.probabilities(x, kernel, bias), predicted, atol=1e-5)
    # Two classes: scikit-learn's one row of weights, as two logits of the same softmax.
    two = np.array([0, 1] * 20)
    kernel, bias = linear_head.fit(x[:40], two, 2)
    np.testing.assert_allclose(
        linear_head.probabilities(x[:40], kernel, bias),
        LogisticRegression(C=linear_head.C).fit(x[:40], two).predict_proba(x[:40]), atol=1e-6)


def test_a_run_whose_training_diverges_ends_with_the_linear_head_and_says_so(
        train_tiny, tmp_path, fixed_costs, heads, monkeypatch):
    import keras

    monkeypatch.setattr(linear_head, "score", lambda *a: 1.0)  # the best, whatever the epochs

    class Diverge(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch >= 1:  # the thawed phase: its loss becomes NaN
                layer = self.model.get_layer("probabilities")
                layer.set_weights([np.full_like(w, np.nan) for w in layer.get_weights()])

    lines = []
    result, _ = train_tiny.fit(tmp_path, "d", TIMED, [Diverge()], log=lines.append)
    run = tmp_path / "d"
    assert result is not None and (run / paths.MODEL).is_file() and len(heads) == 1
    said = [line for line in lines if line.startswith("training failed after epoch 1 (")]
    assert len(said) == 1 and "the training loss became nan" in said[0] and \
        said[0].endswith("the run ends with its best so far")
    assert json.loads((run / paths.LINEAR_HEAD).read_text())["kept"] is True
    assert any(line.startswith("no epoch that trained the backbone was validated: kept the "
                               "linear head (val macro F1 1.0000") for line in lines)
    # model.keras the head; last.keras the last committed epoch, not the diverged weights.
    model = _classifier(run / paths.MODEL)
    for a, b in zip(model, heads[0]):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert all(np.isfinite(w).all() for w in _classifier(run / paths.LAST))


def test_a_run_whose_trained_epochs_score_below_the_linear_head_keeps_the_head(
        train_tiny, tmp_path, fixed_costs, heads, monkeypatch):
    monkeypatch.setattr(linear_head, "score", lambda *a: 1.0)  # no epoch can beat it
    lines = []
    result, _ = train_tiny.fit(tmp_path, "k", TIMED, log=lines.append)
    run = tmp_path / "k"
    assert any(line.startswith("linear head: val macro F1 1.0000 (a logistic regression")
               for line in lines)
    rows = result.history["val_f1_macro"]
    assert len(rows) >= 2  # a frozen epoch and trained ones, all validated
    assert f"training did not beat the linear head on val ({max(rows[1:]):.4f} <= 1.0000): " \
        f"kept the linear head" in lines
    assert f"model.keras: the linear head (val macro F1 1.0000, the best); last.keras: epoch " \
        f"{len(rows)}" in lines
    for a, b in zip(_classifier(run / paths.MODEL), heads[0]):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert json.loads((run / paths.LINEAR_HEAD).read_text()) == \
        {"val_f1": 1.0, "c": linear_head.C, "kept": True}


def test_a_killed_run_keeps_its_linear_head_in_its_backup_and_ends_with_it(
        train_tiny, tmp_path, fixed_costs, monkeypatch):
    monkeypatch.setattr(linear_head, "score", lambda *a: 1.0)
    with pytest.raises(Kill):
        train_tiny.fit(tmp_path, "r", TIMED, [kill_after_the_first_epoch()])
    state = json.loads((tmp_path / "r" / paths.BACKUP / paths.STATE).read_text())
    assert state["epochs_done"] == 1 and state["linear_head"]["val_f1"] == 1.0
    assert (state["best_epoch"], state["best"]) == (-1, "linear-head.npz")
    monkeypatch.setattr(linear_head, "score", lambda *a: 0.0)  # a head fit again would say
    lines = []
    train_tiny.fit(tmp_path, "r", {}, resume=True, log=lines.append)
    run = tmp_path / "r"
    assert not any(line.startswith("linear head:") for line in lines)  # not fit again
    assert json.loads((run / paths.LINEAR_HEAD).read_text())["kept"] is True
    assert any(line.startswith("model.keras: the linear head (val macro F1 1.0000")
               for line in lines)


def test_a_budget_with_no_time_for_a_thawed_epoch_ends_with_the_linear_head(
        train_tiny, tmp_path, fixed_costs, capsys):
    # A trained epoch would take 2,000 s of the 10 minutes: once refused, now the head.
    fixed_costs.thawed = 1000.0
    run = train_tiny(tmp_path, *TIMED_FLAGS, "--refit", "on", name="h", tiny=())
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("time 10m: 1 epoch of"))
    assert "the frozen one alone (no time for a thawed epoch)" in line
    assert "linear head: val macro F1 " in out
    train = tomllib.loads((run / paths.CONFIG).read_text())["train"]
    assert (train["epochs"], train["frozen_epochs"]) == (1, 1)
    # Evaluated, predicted and finished as any run; its refit repeats the winner's recipe.
    assert all((run / name).is_file() for name in (paths.METRICS, paths.SUBMISSION,
                                                   paths.FINISHED, paths.REFIT))
    # The frozen epoch trains the same head on the same features: never kept over it. Its
    # refit is the head fit on train + val when it was first fit, no feature extracted again.
    assert json.loads((run / paths.LINEAR_HEAD).read_text())["kept"] is True
    assert json.loads((run / paths.REFIT_PLAN).read_text())["linear_head"] is True
    assert REFIT_LINE in out and "frozen backbone: features of 96 training images" not in out


def test_a_budget_that_holds_the_linear_head_but_not_a_refits_share_plans_the_head_alone(
        train_tiny, tmp_path, fixed_costs, capsys):
    """With a refit, a plan gives the validated training a share of the time (the rest for the
    refit's epochs). The linear head alone needs none: its refit is seconds. So a budget whose
    whole time left holds the frozen features and the head, and whose share does not, plans
    them; one too short for them names the least without a share."""
    fixed_costs.thawed = 1000.0  # the refit of a thawed epoch would take most of the budget
    fixed_costs.cache = 30.0  # the frozen features: 13 batches, 390 s of the 10 minutes
    run = train_tiny(tmp_path, *TIMED_FLAGS, "--refit", "on", name="h", tiny=())
    out = capsys.readouterr().out
    assert "the frozen one alone (no time for a thawed epoch): the model is the linear head" \
        in out and "of the time left for the validated training" not in out
    assert REFIT_LINE in out and (run / paths.SUBMISSION).is_file()
    fixed_costs.cache = 60.0  # 780 s: too long for 10 minutes
    train_tiny(tmp_path, *TIMED_FLAGS, "--refit", "on", name="s", tiny=(), code=2)
    err = capsys.readouterr().err.strip()
    assert err.startswith("corolla: error: --time 10m (train.time_budget) is too short for "
                          "the frozen features and the linear head") and \
        "before the refit" not in err


def test_a_frozen_epoch_above_the_linear_head_on_val_is_not_kept_over_it(
        train_tiny, tmp_path, fixed_costs, heads, monkeypatch):
    """The frozen phase's epochs train the same linear model on the same features as the head,
    less converged and on train alone: a val photo or two above it is val's noise. Only an
    epoch that trains the backbone may replace it."""
    fixed_costs.thawed = 1000.0  # no time for a thawed epoch: the frozen one alone
    monkeypatch.setattr(linear_head, "score", lambda *a: 0.0)  # any epoch scores above it
    lines = []
    result, _ = train_tiny.fit(tmp_path, "f", TIMED, log=lines.append)
    run = tmp_path / "f"
    [frozen] = result.history["val_f1_macro"]
    assert frozen > 0.0
    assert f"no epoch that trained the backbone was validated: kept the linear head (val " \
        f"macro F1 0.0000; the frozen epochs' best, {frozen:.4f}, is the same head on the same " \
        f"features fit on train alone)" in lines
    assert json.loads((run / paths.LINEAR_HEAD).read_text())["kept"] is True
    assert any(line.startswith("model.keras: the linear head (val macro F1 0.0000")
               for line in lines)
    for a, b in zip(_classifier(run / paths.MODEL), heads[0]):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_the_verdict_weighs_only_the_epochs_that_trained_the_backbone():
    verdict = linear_head.verdict
    assert verdict(0.8, [0.9, 0.7, 0.85], frozen={0}) == \
        (False, "training beat the linear head on val (0.8500 > 0.8000): kept epoch 3")
    assert verdict(0.8, [0.9, 0.7, 0.75], frozen={0}) == \
        (True, "training did not beat the linear head on val (0.7500 <= 0.8000): kept the "
               "linear head")
    # Without frozen epochs (a run that trains everything from the first) every one counts.
    assert verdict(0.8, [0.9, 0.7], frozen=set())[0] is False
    assert verdict(0.8, [None, float("nan")], frozen=set()) == \
        (True, "no trained epoch was validated: kept the linear head (val macro F1 0.8000)")
    # Ties keep the earlier epoch, as the checkpoint does (a later one must be better).
    assert verdict(0.8, [0.5, 0.9, 0.9], frozen={0})[1].endswith("kept epoch 2")


def test_a_budget_too_short_for_the_frozen_features_is_refused_naming_them(
        train_tiny, tmp_path, fixed_costs, monkeypatch, capsys):
    from corolla.training.timing import probe

    measure = probe.measure

    def slow_caching(trainer, kinds, costs, final, val_split, cached):
        measure(trainer, kinds, costs, final, val_split, cached)
        for size in costs.cache:
            costs.cache[size] = 1000.0

    monkeypatch.setattr(probe, "measure", slow_caching)
    train_tiny(tmp_path, *TIMED_FLAGS, name="s", tiny=(), code=2)
    err = capsys.readouterr().err.strip()
    assert err.startswith("corolla: error: --time 10m (train.time_budget) is too short for "
                          "the frozen features and the linear head of recipe ") and \
        "give at least --time" in err and "\n" not in err


def _blobs(scale: float, counts, seed: int = 0):
    """Gaussian features [sum(counts), 16] of len(counts) classes (`counts` photos each)
    around centres 2 apart, times `scale`."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).normal(size=(len(counts), 16)) * 2
    labels = np.repeat(np.arange(len(counts)), counts)
    return ((centres[labels] + rng.normal(size=(len(labels), 16))) * scale).astype("float32"), \
        labels


def test_a_refit_fits_the_head_at_the_c_its_run_chose(tmp_path):
    from corolla.errors import UserError
    from corolla.training import features

    assert features.chosen_c(None) == features.chosen_c(tmp_path) == linear_head.C
    # A head recorded before runs recorded its C: the one C heads had then.
    (tmp_path / paths.LINEAR_HEAD).write_text(json.dumps({"val_f1": 0.8, "kept": True}))
    assert features.chosen_c(tmp_path) == features.UNRECORDED_C == 0.01
    (tmp_path / paths.LINEAR_HEAD).write_text(json.dumps({"val_f1": 0.8, "c": 0.3,
                                                          "kept": True}))
    assert features.chosen_c(tmp_path) == 0.3
    for bad in ("0.3", 0, -1, True, None):
        (tmp_path / paths.LINEAR_HEAD).write_text(json.dumps({"c": bad}))
        with pytest.raises(UserError, match=f"c is {bad!r}, not a positive number"):
            features.chosen_c(tmp_path)


def test_the_head_fits_on_one_thread(monkeypatch):
    """BLAS's and OpenMP's threads spin against a busy host's other work: ~40x slower for
    features this small. The fit runs with one of each."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_info

    seen, fit = [], LogisticRegression.fit

    def recording(self, *args, **kwargs):
        seen.append({pool["num_threads"] for pool in threadpool_info()})
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(LogisticRegression, "fit", recording)
    linear_head.fit(*_blobs(1.0, [5, 5, 5]), 3)
    assert seen == [{1}]


def test_a_run_that_keeps_its_head_without_a_refit_predicts_with_it_fit_on_train_and_val(
        train_tiny, tmp_path, fixed_costs, heads, monkeypatch, capsys):
    """No refit follows (--refit off) and the head is kept (no time for a thawed epoch): the
    test split is predicted by the head fit again on train + val at the probe's C
    (refit.keras, made in seconds from the features at hand), as the probe fits it;
    model.keras keeps the head fit on train, whose val scores are fair."""
    fixed_costs.thawed = 1000.0
    rows, fit = [], linear_head.fit

    def recording(features, labels, *args, **kwargs):
        rows.append(len(labels))
        return fit(features, labels, *args, **kwargs)

    monkeypatch.setattr(linear_head, "fit", recording)
    run = train_tiny(tmp_path, *TIMED_FLAGS, "--refit", "off", name="n", tiny=())
    out = capsys.readouterr().out
    record = json.loads((run / paths.LINEAR_HEAD).read_text())
    assert record["kept"] is True and record["c"] == linear_head.C
    # The head on train, then on train + val (96 photos): two fits, no other.
    assert len(rows) == 2 and rows[0] < rows[1] == 96
    assert REFIT_LINE in out
    assert len(heads) == 2  # the head on train into the model, then the one on train + val
    for a, b in zip(_classifier(run / paths.MODEL), heads[0]):
        np.testing.assert_allclose(a, b, atol=1e-6)
    for a, b in zip(_classifier(run / paths.REFIT), heads[1]):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert not np.allclose(heads[0][0], heads[1][0])
    assert (run / paths.SUBMISSION).is_file() and not (run / paths.REFIT_PLAN).exists()


def test_a_run_folder_without_its_heads_train_and_val_fit_refits_it_from_the_features(
        train_tiny, tmp_path, fixed_costs, heads, monkeypatch):
    """A kept head's refit is the head fit on train + val when it was first fit
    (linear_head.npz). A run folder without that file (written before it existed, or lost)
    still refits: the features of train + val extracted again, the head fit at its C."""
    from corolla.training import refit

    fixed_costs.thawed = 1000.0  # no time for a thawed epoch: the head is kept
    _, plan = train_tiny.fit(tmp_path, "o", {**TIMED, "train.refit": "on"})
    run = tmp_path / "o"
    assert json.loads((run / paths.REFIT_PLAN).read_text())["linear_head"] is True
    (run / paths.LINEAR_HEAD_ALL).unlink()
    lines = []
    assert refit.train(run, plan, lines.append) == run / paths.REFIT
    assert "refit: the run kept its linear head: the logistic regression fit again on the " \
        "frozen features of train + val (96 photos)" in lines
    for a, b in zip(_classifier(run / paths.REFIT), heads[-1]):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert not np.allclose(heads[0][0], heads[-1][0])  # not the head fit on train alone


def _classifier_recorder():
    """A callback that records the model's classifier weights as each epoch begins and ends,
    in its `seen` under ("begin", epoch) and ("end", epoch), counted from 0."""
    import keras

    class Recorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def _record(self, when, epoch):
            weights = self.model.get_layer("probabilities").get_weights()
            self.seen[(when, epoch)] = [np.array(w) for w in weights]

        def on_epoch_begin(self, epoch, logs=None):
            self._record("begin", epoch)

        def on_epoch_end(self, epoch, logs=None):
            self._record("end", epoch)

    return Recorder()


# A timed run whose recipe freezes the backbone for 2 of 4 epochs, planned at more (a trained
# step 50 s of the 10 minutes): frozen epochs in the recipe's share, more than one.
THAWING = {**TIMED, "train.epochs": 4, "train.frozen_epochs": 2}


@pytest.mark.slow  # two tiny runs, with the key and without: about 11 s
def test_a_run_that_thaws_from_its_head_trains_one_frozen_epoch_and_starts_the_backbone_there(
        train_tiny, tmp_path, fixed_costs, heads, monkeypatch):
    """train.thaw_from_head: the thawed phase starts from the linear head itself, not from the
    frozen epochs trained on after it (lower on val in every 10-minute suite run, and never kept
    over it); so the plan's frozen phase is its one epoch, where the head is fit."""
    fixed_costs.thawed = 50.0
    monkeypatch.setattr(linear_head, "score", lambda *a: 0.0)
    train_tiny.fit(tmp_path, "as-recipe", THAWING)
    planned = tomllib.loads((tmp_path / "as-recipe" / paths.CONFIG).read_text())["train"]
    assert 1 < planned["frozen_epochs"] < planned["epochs"]  # the recipe's share, without it
    recorder, lines = _classifier_recorder(), []
    train_tiny.fit(tmp_path, "t", {**THAWING, "train.thaw_from_head": True}, [recorder],
                   log=lines.append)
    planned = tomllib.loads((tmp_path / "t" / paths.CONFIG).read_text())["train"]
    assert planned["frozen_epochs"] == 1 < planned["epochs"]
    assert "the backbone thaws from the linear head it fit, not from the epochs that trained " \
        "the head after it" in lines
    # The frozen epoch moved the head; the first thawed epoch begins from the head as fit.
    kernel, bias = heads[0]
    moved = recorder.seen[("end", 0)]
    assert np.abs(moved[0] - kernel).max() > 1e-4
    for a, b in zip(recorder.seen[("begin", 1)], (kernel, bias)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_a_run_killed_before_its_thaw_resumes_from_the_linear_head_its_backup_holds(
        train_tiny, tmp_path, fixed_costs, heads, monkeypatch):
    fixed_costs.thawed = 50.0
    monkeypatch.setattr(linear_head, "score", lambda *a: 0.0)
    with pytest.raises(Kill):
        train_tiny.fit(tmp_path, "r", {**THAWING, "train.thaw_from_head": True},
                       [kill_after_the_first_epoch()])
    recorder, lines = _classifier_recorder(), []
    train_tiny.fit(tmp_path, "r", {}, [recorder], resume=True, log=lines.append)
    assert "the backbone thaws from the linear head its backup holds, not from the epochs that " \
        "trained the head after it" in lines
    for a, b in zip(recorder.seen[("begin", 1)], heads[0]):
        np.testing.assert_allclose(a, b, atol=1e-6)
