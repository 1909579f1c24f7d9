"""The fixtures every folder of tests shares: tiny data sets, the shared real data, tiny
trained runs. Modules of helpers are in helpers/ (`from helpers import ...`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.once import built_once
from helpers.processes import SHARED

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["CUDA_VISIBLE_DEVICES"] = ""  # tests describe CPU behaviour, whatever the machine

FLOWERS5 = SHARED / "data" / "flowers5"


def pytest_collection_modifyitems(items):
    """A `large` or `install` test is `slow` too: `-m "not slow"` (which replaces pyproject's
    `-m`) then runs the quick part alone, not the later steps' tests."""
    for item in items:
        if item.get_closest_marker("large") or item.get_closest_marker("install"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def flowers5() -> Path:
    """The real-photo data set beside the repository (present in CI, absent in a fresh clone)."""
    if not (FLOWERS5 / "tfrecords-jpeg-192x192").is_dir():
        pytest.skip(f"{FLOWERS5} is absent")
    return FLOWERS5


@pytest.fixture(scope="session", autouse=True)
def _no_test_writes_the_users_cache(tmp_path_factory):
    """Corolla's cache folder for the whole session (conversions, data checks, JAX's compiled
    programs), not the user's ~/.cache/corolla: one folder beside every xdist worker's, so
    that they share conversions as they would share the user's. A test that wants its own
    takes `cache`."""
    from corolla.runtime.compile_cache import CACHE_ENV

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    patch = pytest.MonkeyPatch()
    patch.setenv(CACHE_ENV, str(shared / "corolla-cache"))
    yield
    patch.undo()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """Corolla's cache folder for this test alone (COROLLA_CACHE_DIR: conversions, checks)."""
    from corolla.data import datasets

    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def tiny_petals(tmp_path_factory) -> Path:
    """32 px synthetic petals in the competition layout: 4 classes, 64/32/20 images (one folder
    for the session, so that the runs of shared fixtures name the data every test has)."""
    from corolla.data.synthetic import dataset as synthetic

    from corolla.flows import demo

    return built_once(tmp_path_factory, "petals",
                      lambda root: synthetic.write(root / "data", demo.TINY.data)) / "data"


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(a folder of 3 classes of 7 photos in every mode people have them, {file: class}):
    helpers.images.make_photos. Tests that change the folder work on a copy."""
    from helpers.images import make_photos

    root = tmp_path_factory.mktemp("photos") / "flowers"
    return root, make_photos(root)


@pytest.fixture(scope="session")
def rare_class(tmp_path_factory) -> Path:
    """16 px solid-colour records whose class is their red band, one class 10x rarer
    (helpers.records: 150/150/15 train, 40 of each class in val)."""
    from helpers import records

    return records.write_rare_class(tmp_path_factory.mktemp("rare"))


# One epoch of two steps of 8 images: a tiny training's flags where the exact ones do not matter.
TINY = ("--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "8")


class TinyTrainer:
    """Tiny trainings in this process, on tiny_petals unless told otherwise (the `train_tiny`
    fixture)."""

    def __init__(self, tiny_petals: Path):
        self.tiny_petals = tiny_petals

    def __call__(self, runs, *flags, data=None, name: str | None = "r", tiny=TINY,
                 code: int = 0) -> Path:
        """`corolla train --data DATA [TINY] FLAGS --runs-dir RUNS --name NAME`, asserting its exit
        status is `code`; returns the run folder (without a name: the one it made). TINY's
        flags that FLAGS give too are left out; `tiny=()` leaves them all out."""
        from corolla.cli import main

        flags = [str(f) for f in flags]
        pairs = zip(tiny[::2], tiny[1::2])
        defaults = [x for flag, value in pairs if flag not in flags for x in (flag, value)]
        runs = Path(runs)
        argv = ["train", "--data", str(data or self.tiny_petals), *defaults, *flags,
                "--runs-dir", str(runs)] + (["--name", name] if name else [])
        before = set(runs.iterdir()) if runs.is_dir() else set()
        assert main(argv) == code
        if name or code:
            return runs / (name or "")
        (made,) = set(runs.iterdir()) - before
        return made

    def fit(self, runs, name: str, overrides: dict, callbacks=(), resume: bool = False,
            log=None):
        """The training layer's `training.run` on a config of `overrides` (tiny_petals, 2 steps
        of 8 images an epoch, learning rate 3e-3, unless they say otherwise), or resuming the
        run; a callback may raise helpers.runs.Stop to end it as a crash would. `log`: what the
        run's log lines go to (none by default). Returns (the run's result or None when stopped,
        the plan)."""
        from corolla import config, runtime, training
        from corolla.runs import rundir
        from helpers.runs import Stop

        runs = Path(runs)
        if resume:
            _, cfg = rundir.load_unfinished(runs / name)
        else:
            cfg = config.load_config(overrides={
                "data.path": str(self.tiny_petals), "train.batch_size": 8,
                "train.steps_per_epoch": 2, "train.learning_rate": 3e-3,
                "output.runs_dir": str(runs), "output.name": name, **overrides})
        plan = runtime.detect_for(cfg)
        try:
            result = training.run(cfg, plan, log=log or (lambda *a: None),
                                  resume=runs / name if resume else None,
                                  callbacks=list(callbacks))
        except Stop:
            result = None
        return result, plan


@pytest.fixture(scope="session")
def train_tiny(tiny_petals) -> TinyTrainer:
    """The factory of tiny trainings: `train_tiny(runs, *flags)` runs `corolla train` and returns
    the run folder; `train_tiny.fit(runs, name, overrides, callbacks)` runs the training layer."""
    return TinyTrainer(tiny_petals)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The one finished tiny run of the session: `corolla demo --tiny` (small_cnn, 1 epoch on
    the synthetic petals tiny_petals holds too, evaluated and predicted), <root>/runs/tiny beside
    its data in <root>/cache. Every test that only reads a finished run shares it; a test that
    writes into it (evaluate, predict, report, a file changed) takes `tiny_run_copy`."""
    from corolla.cli import main

    def build(root):
        assert main(["demo", "--tiny", "--cache-dir", str(root / "cache"), "--runs-dir",
                     str(root / "runs"), "--name", "tiny"]) == 0

    return built_once(tmp_path_factory, "tiny", build) / "runs" / "tiny"


@pytest.fixture
def tiny_run_copy(tiny_run, tmp_path) -> Path:
    """A copy of tiny_run for this test to write into (a whole run copied is still itself)."""
    return Path(shutil.copytree(tiny_run, tmp_path / "tiny-copy"))


@pytest.fixture(scope="session")
def tiny_kfold(train_tiny, tmp_path_factory) -> Path:
    """A finished `corolla train --folds 2` run on tiny_petals (one epoch of two steps a fold).
    Its folds are small trained runs too: tests that write into one work on a copy."""
    return built_once(tmp_path_factory, "kfold",
                      lambda root: train_tiny(root, "--folds", "2", name="k2")) / "k2"
