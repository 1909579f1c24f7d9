"""`corolla submit`: the file is checked first, the package and the credentials are looked for
before `kaggle` is imported, and the official API's competition_submit gets the checked file.
A fake `kaggle` module stands in for the package: nothing is sent anywhere."""

import sys
import types

import numpy as np
import pytest

from corolla.cli import main
from corolla.evaluation import predictions
from corolla.report import scored
from corolla.flows import submit
from corolla.report import submission
from corolla.runs import paths

IDS = ["a1", "b2", "c3", "d4"]
NAMES = ("daisy", "rose", "tulip")


@pytest.fixture
def run(tmp_path):
    """A folder as `corolla predict` leaves it: submission.csv and predictions/test.npz."""
    folder = tmp_path / "run"
    folder.mkdir()
    probabilities = np.eye(3, dtype=np.float32)[[0, 1, 2, 1]]
    scored.save_predictions(predictions.path_in(folder, "test"), IDS, None, probabilities, NAMES)
    submission.write(IDS, [0, 1, 2, 1], folder / paths.SUBMISSION, num_classes=3)
    return folder


@pytest.fixture
def home(tmp_path, monkeypatch):
    """No credentials anywhere: an empty home, no KAGGLE_* variables."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for name in ("KAGGLE_API_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_CONFIG_DIR",
                 "KAGGLE_API_V1_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def fake_kaggle(monkeypatch):
    """A `kaggle` module whose api records the calls (and counts its imports)."""
    calls = []

    class Api:
        def competition_submit(self, file_name, message, competition, quiet=False):
            calls.append((file_name, message, competition))
            return types.SimpleNamespace(message="Successfully submitted")

    module = types.ModuleType("kaggle")
    module.api = Api()
    monkeypatch.setitem(sys.modules, "kaggle", module)
    return calls


def test_submits_the_checked_file_through_the_kaggle_api(run, home, fake_kaggle, monkeypatch,
                                                         capsys):
    monkeypatch.setenv("KAGGLE_USERNAME", "someone")
    monkeypatch.setenv("KAGGLE_KEY", "secret")
    assert main(["submit", str(run), "--competition", "tpu-getting-started",
                 "-m", "small_cnn, 12 epochs"]) == 0
    assert fake_kaggle == [(str(run / paths.SUBMISSION), "small_cnn, 12 epochs",
                            "tpu-getting-started")]
    assert "Successfully submitted" in capsys.readouterr().out


def test_a_bad_submission_is_refused_before_any_call(run, home, fake_kaggle, monkeypatch,
                                                     capsys):
    monkeypatch.setenv("KAGGLE_API_TOKEN", "token")
    (run / paths.SUBMISSION).write_text("id,label\na1,0\nb2,1\nb2,1\nd4,7\n")
    assert main(["submit", str(run), "--competition", "tpu-getting-started", "-m", "x"]) == 2
    err = capsys.readouterr().err
    assert "ids with more than one row" in err and "test ids with no row: 'c3'" in err
    assert "labels outside the 3 classes" in err and "nothing was sent to Kaggle" in err
    assert fake_kaggle == []


def test_missing_package_says_how_to_install(run, home, monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "kaggle", raising=False)
    monkeypatch.setattr(submit.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("KAGGLE_API_TOKEN", "token")
    assert main(["submit", str(run), "--competition", "tpu-getting-started", "-m", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ('corolla: error: corolla submit needs the kaggle package: '
                   'pip install "corolla[kaggle]"')


def test_missing_credentials_say_where_to_put_them_before_kaggle_is_imported(
        run, home, monkeypatch, capsys):
    module = types.ModuleType("kaggle")  # importing it would authenticate (and fail)
    monkeypatch.setitem(sys.modules, "kaggle", module)
    imported = []
    real = submit.importlib.import_module
    monkeypatch.setattr(submit.importlib, "import_module",
                        lambda name: imported.append(name) or real(name))
    assert main(["submit", str(run), "--competition", "tpu-getting-started", "-m", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no Kaggle credentials found" in err
    assert f"{home / '.kaggle'}/" in err and "KAGGLE_API_TOKEN" in err
    assert imported == []


@pytest.mark.parametrize("place", ["token", "username_key", "config_dir", "home_json",
                                   "access_token_file", "oauth"])
def test_credentials_are_found_where_the_kaggle_package_looks(place, home, tmp_path):
    env = {}
    if place == "token":
        env["KAGGLE_API_TOKEN"] = "KGAT_x"
    elif place == "username_key":
        env.update(KAGGLE_USERNAME="someone", KAGGLE_KEY="secret")
    elif place == "config_dir":
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "kaggle.json").write_text("{}")
        env["KAGGLE_CONFIG_DIR"] = str(tmp_path / "cfg")
    else:
        name = {"home_json": "kaggle.json", "access_token_file": "access_token",
                "oauth": "credentials.json"}[place]
        (home / ".kaggle").mkdir()
        (home / ".kaggle" / name).write_text("x")
    assert submit.credentials(env, home) is not None
    assert submit.credentials({}, tmp_path / "nobody") is None


def test_a_run_without_submission_says_to_predict(tmp_path, home, capsys):
    assert main(["submit", str(tmp_path), "--competition", "c", "-m", "x"]) == 2
    assert f"run `corolla predict {tmp_path}` first" in capsys.readouterr().err
