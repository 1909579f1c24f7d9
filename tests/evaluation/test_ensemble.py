"""`corolla ensemble` on runs whose saved predictions are made here (no model runs): the blend
is the weighted average of the members' probabilities, `auto` weights score at least as well on
val as every member, given weights are honoured, members that do not describe the same examples
and classes are refused, and the submission written is checked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from corolla import config
from corolla.cli import main
from corolla.data.classes import format_classes_file
from corolla.evaluation import blend, predictions
from corolla.report import scored
from corolla.report import submission
from corolla.runs import paths

CLASSES = ("daisy", "rose", "tulip", "iris", "cyclamen ")
VAL, TEST = 120, 40


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:08x}" for i in np.random.default_rng(len(prefix)).permutation(n)]


VAL_IDS, TEST_IDS = _ids("v", VAL), _ids("t", TEST)
VAL_LABELS = np.arange(VAL) % len(CLASSES)
TEST_LABELS = np.arange(TEST) % len(CLASSES)  # what the members would need to predict


def _probabilities(labels, sure_of, seed):
    """Confident and right on the classes in `sure_of`; elsewhere a flat, noisy guess (right
    about half the time): two members sure of different classes blend into a better one."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 0.5, (len(labels), len(CLASSES)))
    for row, label in enumerate(labels):
        logits[row, label] += 6.0 if label in sure_of else rng.choice([0.0, 1.0])
    p = np.exp(logits)
    return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)


def make_run(folder, sure_of=(0, 1, 2), seed=0, *, classes=CLASSES, val_ids=None, order=None,
             val_labels=None, test=True):
    """A run folder as `corolla train` + `evaluate` + `predict` leave one, without the model:
    config.toml, classes.txt and predictions/{val,test}.npz. `order`: rows saved in another
    order (a run that read the split otherwise)."""
    folder.mkdir(parents=True)
    config.save_config(config.load_config(overrides={"data.path": "/data/petals",
                                                     "model.name": "small_cnn"}),
                       folder / paths.CONFIG)
    (folder / paths.CLASSES).write_text(format_classes_file(classes))
    ids = list(val_ids or VAL_IDS)
    labels = VAL_LABELS if val_labels is None else np.asarray(val_labels)
    val_p = _probabilities(labels, sure_of, seed)
    test_p = _probabilities(TEST_LABELS, sure_of, seed + 100)
    val_rows = np.arange(VAL) if order is None else np.asarray(order)
    scored.save_predictions(predictions.path_in(folder, "val"), [ids[i] for i in val_rows],
                            labels[val_rows], val_p[val_rows], classes)
    if test:
        scored.save_predictions(predictions.path_in(folder, "test"), TEST_IDS, None, test_p,
                                classes)
    return folder


def _f1(p: predictions.Predictions) -> float:
    from sklearn.metrics import f1_score

    return f1_score(p.labels, p.predicted, average="macro", zero_division=0)


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default output, runs/ensemble-<timestamp>, lands here
    sure = [(0, 1, 2), (2, 3, 4), (0, 3), (1, 4), (0, 2, 4)]
    return [make_run(tmp_path / f"m{i}", s, seed=i) for i, s in enumerate(sure)]


def _ensemble_folder(tmp_path):
    made = list((tmp_path / "runs").iterdir())
    assert len(made) == 1 and made[0].name.startswith("ensemble-"), made
    return made[0]


@pytest.mark.parametrize("members", [2, 3, 5], ids=["grid-2", "grid-3", "coordinate-ascent-5"])
def test_auto_weights_score_at_least_as_well_as_every_member(runs, tmp_path, members, capsys):
    chosen = runs[:members]
    assert main(["ensemble", *map(str, chosen)]) == 0
    out = _ensemble_folder(tmp_path)
    for name in (paths.METRICS, paths.CONFUSION, paths.SUBMISSION,
                 "predictions/val.npz", "predictions/test.npz"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name

    metrics = json.loads((out / paths.METRICS).read_text())
    loaded = [predictions.load(paths.predictions_file(r, "val")) for r in chosen]
    member_f1 = [_f1(p) for p in loaded]
    assert [m["f1_macro"] for m in metrics["members"]] == pytest.approx(member_f1, abs=1e-12)
    assert [m["folder"] for m in metrics["members"]] == [str(r.resolve()) for r in chosen]
    assert metrics["f1_macro"] >= max(member_f1)
    assert metrics["f1_macro"] > max(member_f1)  # these members are sure of different classes
    weights = np.array(metrics["weights"])
    assert weights.sum() == pytest.approx(1) and (weights >= 0).all()
    assert metrics["split"] == "val" and metrics["weights_search"].startswith("auto")
    assert "optimistic" in metrics["note"]

    # The saved blend is the weighted average, and metrics.json scores that very file.
    val = predictions.load(paths.predictions_file(out, "val"))
    expected = sum(w * p.probabilities for w, p in zip(weights, loaded))
    np.testing.assert_allclose(val.probabilities, expected, rtol=1e-5, atol=1e-7)
    assert val.ids == tuple(VAL_IDS) and val.labels.tolist() == VAL_LABELS.tolist()
    assert _f1(val) == pytest.approx(metrics["f1_macro"], abs=1e-12)
    test = predictions.load(paths.predictions_file(out, "test"))
    assert submission.read(out / paths.SUBMISSION) == dict(zip(TEST_IDS, test.predicted))
    assert "blend: val accuracy" in capsys.readouterr().out


@pytest.mark.parametrize("members", [2, 4], ids=["grid", "coordinate-ascent"])
def test_auto_weights_turn_down_members_that_would_hurt(tmp_path, members):
    """Members confidently wrong on a third of val: equal weights would score below the good
    member alone; `auto` finds weights that do not, and gives those members less weight."""
    good = make_run(tmp_path / "good", (0, 1, 2, 3), seed=0)
    wrong = VAL_LABELS.copy()
    wrong[::3] = (wrong[::3] + 1) % len(CLASSES)  # sure of the wrong class for every third id
    bad = []
    for i in range(members - 1):
        bad.append(tmp_path / f"bad{i}")
        bad[-1].mkdir()
        for split, ids, labels, truth in (("val", VAL_IDS, VAL_LABELS, wrong),
                                          ("test", TEST_IDS, None, TEST_LABELS)):
            scored.save_predictions(predictions.path_in(bad[-1], split), ids, labels,
                                    _probabilities(truth, range(5), seed=10 + i), CLASSES)
    result = blend.build([good, *bad], "auto")
    vals = [m.val for m in result.members]
    equal = blend.blend(vals, np.full(members, 1 / members))
    assert blend.macro_f1(equal.labels, equal.predicted) < result.member_f1[0]
    assert _f1(result.val) >= max(result.member_f1)
    assert result.weights[0] > 1 / members  # the good member weighs more than its share


def test_the_searchs_macro_f1_is_scikit_learns_default():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(1)
    for classes_true, classes_pred, n in ((5, 5, 50), (30, 40, 200), (104, 104, 3712), (3, 1, 9)):
        y_true, y_pred = rng.integers(0, classes_true, n), rng.integers(0, classes_pred, n)
        assert blend.macro_f1(y_true, y_pred) == pytest.approx(
            f1_score(y_true, y_pred, average="macro", zero_division=0), abs=1e-12)
    assert blend.macro_f1([2, 2], [2, 2]) == 1.0  # classes absent from both do not count


def test_the_search_is_exhaustive_on_the_grid_for_two_members(runs):
    """No point of the 0.05 grid scores better than the weights chosen."""
    members = blend.load_members(runs[:2])
    vals = [m.val for m in members]
    weights, _ = blend.search_weights(vals)
    best = blend.macro_f1(vals[0].labels, blend.blend(vals, weights).predicted)
    for w in np.linspace(0, 1, 21):
        mixed = blend.blend(vals, [w, 1 - w])
        assert blend.macro_f1(vals[0].labels, mixed.predicted) <= best


@pytest.mark.parametrize("members", [2, 3, 5])
def test_ties_go_to_equal_weights(tmp_path, members):
    """Members that agree everywhere score the same under every weighting: equal weights."""
    same = [make_run(tmp_path / f"same{i}", seed=7) for i in range(members)]
    result = blend.build(same, "auto")
    np.testing.assert_allclose(result.weights, np.full(members, 1 / members))


def test_given_weights_are_honoured(runs, tmp_path):
    a, b = runs[:2]
    pa, pb = (predictions.load(paths.predictions_file(r, "test")) for r in (a, b))
    assert main(["ensemble", str(a), str(b), "--weights", "3,1", "--out", "blend"]) == 0
    metrics = json.loads((tmp_path / "blend" / paths.METRICS).read_text())
    assert metrics["weights"] == [0.75, 0.25] and metrics["weights_search"].startswith("given")
    assert "note" not in metrics
    test = predictions.load(paths.predictions_file(tmp_path / "blend", "test"))
    np.testing.assert_allclose(test.probabilities,
                               0.75 * pa.probabilities + 0.25 * pb.probabilities, rtol=1e-6)

    # All the weight on one member: its own predictions, exactly.
    assert main(["ensemble", str(a), str(b), "--weights", "0,1", "--out", "only-b"]) == 0
    only_b = predictions.load(paths.predictions_file(tmp_path / "only-b", "test"))
    np.testing.assert_array_equal(only_b.probabilities, pb.probabilities)
    assert submission.read(tmp_path / "only-b" / paths.SUBMISSION) == dict(
        zip(pb.ids, pb.predicted))


def test_members_saved_in_another_order_are_aligned_by_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = make_run(tmp_path / "a", (0, 1, 2), seed=0)
    b = make_run(tmp_path / "b", (2, 3, 4), seed=1)
    shuffled = make_run(tmp_path / "b-shuffled", (2, 3, 4), seed=1,
                        order=np.random.default_rng(3).permutation(VAL))
    straight = blend.build([a, b], "0.4,0.6")
    aligned = blend.build([a, shuffled], "0.4,0.6")
    assert aligned.val.ids == straight.val.ids == tuple(VAL_IDS)
    np.testing.assert_array_equal(aligned.val.probabilities, straight.val.probabilities)
    assert aligned.member_f1 == straight.member_f1


def _one_line_error(capsys, argv, *needles):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("corolla: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_members_that_do_not_match_are_refused_in_one_line(runs, tmp_path, capsys):
    a = str(runs[0])
    other_ids = make_run(tmp_path / "other-ids", val_ids=_ids("w", VAL))
    other_names = make_run(tmp_path / "other-names",
                           classes=("daisy", "rose", "tulip", "iris", "cyclamen"))
    fewer = tmp_path / "fewer-classes"
    fewer.mkdir()
    scored.save_predictions(predictions.path_in(fewer, "val"), VAL_IDS, VAL_LABELS % 4,
                            np.full((VAL, 4), 0.25), CLASSES[:4])
    other_labels = make_run(tmp_path / "other-labels", val_labels=(VAL_LABELS + 1) % 5)
    no_test = make_run(tmp_path / "no-test", test=False)
    empty = tmp_path / "no-predictions"
    empty.mkdir()
    (tmp_path / "taken").mkdir()
    cases = [
        ([a, str(other_ids)], f"{other_ids}'s val predictions and {a}'s cover other ids "
                              f"({VAL} missing, {VAL} extra"),
        ([a, str(other_names)], f"{other_names} predicts other classes than {a} (class 4 is "
                                f"'cyclamen', not 'cyclamen ')"),
        ([a, str(fewer)], "predicts other classes", "(4 classes, not 5)"),
        ([a, str(other_labels)], "disagree on the true class of 120 val ids"),
        ([a, str(no_test)], f"{no_test} has no saved test predictions",
         f"run `corolla predict {no_test}` first"),
        ([a, str(empty)], f"{empty} has no saved predictions",
         f"run `corolla evaluate {empty}` and `corolla predict {empty}` first"),
        ([a, str(tmp_path / "nowhere")], "is not a folder"),
        ([a], "an ensemble needs at least two runs, got 1"),
        ([a, a + "/"], "is given twice"),
        ([a, str(runs[1]), "--weights", "0.5"], "--weights has 1 numbers for 2 runs"),
        ([a, str(runs[1]), "--weights", "one,two"], "--weights takes auto or one number"),
        ([a, str(runs[1]), "--weights=-1,2"], "--weights must be numbers >= 0"),
        ([a, str(runs[1]), "--weights", "0,0"], "not all 0"),
        ([a, str(runs[1]), "--out", str(tmp_path / "taken")], "already exists"),
    ]
    for argv, *needles in cases:
        _one_line_error(capsys, ["ensemble", *argv], *needles)
    assert not (tmp_path / "runs").exists()  # nothing was made for a refused ensemble


def test_members_without_test_predictions_blend_val_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    a = make_run(tmp_path / "a", (0, 1, 2), seed=0, test=False)
    b = make_run(tmp_path / "b", (2, 3, 4), seed=1, test=False)
    assert main(["ensemble", str(a), str(b)]) == 0
    out = _ensemble_folder(tmp_path)
    assert paths.predictions_file(out, "val").is_file() and (out / paths.METRICS).is_file()
    test = paths.predictions_file(out, "test")
    assert not (out / paths.SUBMISSION).exists() and not test.exists()
    assert "no submission.csv written" in capsys.readouterr().out


def test_the_submission_is_checked(runs, tmp_path, monkeypatch):
    """Against the members' test ids and the classes, before it is put in place."""
    checked = []
    real_check = submission.check

    def spy(path, test_ids, num_classes):
        checked.append((list(test_ids), num_classes))
        return real_check(path, test_ids, num_classes)

    monkeypatch.setattr(submission, "check", spy)
    assert main(["ensemble", str(runs[0]), str(runs[1]), "--out", "checked"]) == 0
    assert checked == [(TEST_IDS, len(CLASSES))]
    assert real_check(tmp_path / "checked" / paths.SUBMISSION, TEST_IDS, len(CLASSES)) == []

    # A file that failed its check would not be written.
    monkeypatch.setattr(submission, "check", lambda *args: [
        submission.Problem("missing", 1, "test ids with no row", ("'x'",))])
    with pytest.raises(ValueError, match="fails its check: 1 test ids with no row"):
        main(["ensemble", str(runs[0]), str(runs[1]), "--out", "refused"])
    assert not (tmp_path / "refused" / paths.SUBMISSION).exists()
    assert list((tmp_path / "refused").rglob("*.partial*")) == []


def test_an_ensemble_can_be_a_member(runs, tmp_path):
    assert main(["ensemble", str(runs[0]), str(runs[1]), "--out", "first"]) == 0
    assert main(["ensemble", "first", str(runs[2]), "--out", "second"]) == 0
    metrics = json.loads((tmp_path / "second" / paths.METRICS).read_text())
    assert metrics["f1_macro"] >= max(m["f1_macro"] for m in metrics["members"])


def test_a_run_inside_an_ensemble_member_is_not_counted_twice(runs, tmp_path, capsys):
    """`ensemble s1 ens1` where ens1 blends s1: s1 was counted twice, silently."""
    assert main(["ensemble", str(runs[0]), str(runs[1]), "--out", "ens1"]) == 0
    assert main(["ensemble", "ens1", str(runs[2]), "--out", "ens2"]) == 0
    capsys.readouterr()
    for given in ([str(runs[0]), "ens1"], ["ens2", str(runs[1])], ["ens1", "ens2"]):
        assert main(["ensemble", *given, "--out", "twice"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("corolla: error: ") and "so the blend would count it twice" \
            in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "twice").exists()


def test_an_ensemble_naming_itself_or_odd_members_is_still_a_member(runs, tmp_path):
    """Its metrics.json names the runs it holds, read to count none twice: one naming its own
    folder (or a loop of ensembles) recursed without end, a member folder given as a number
    was a traceback."""
    assert main(["ensemble", str(runs[0]), str(runs[1]), "--out", "ens1"]) == 0
    path = tmp_path / "ens1" / paths.METRICS
    metrics = json.loads(path.read_text())
    metrics["members"] += [{"folder": str(tmp_path / "ens1")}, {"folder": 5}, 7]
    path.write_text(json.dumps(metrics))
    assert main(["ensemble", "ens1", str(runs[2]), "--out", "ens2"]) == 0


@pytest.mark.parametrize("odd", [3, None, 2.5])
def test_a_member_that_is_not_a_folder_is_one_line(runs, odd):
    """From Python (a list with a run's number in it): a TypeError from Path(3) before."""
    from corolla.errors import UserError

    with pytest.raises(UserError, match=rf"^an ensemble's members are run folders \(paths\), got "
                                        rf"{odd!r} \({type(odd).__name__}\); give each run's "
                                        rf"folder$"):
        blend.build([runs[0], odd], "auto")
