"""A run is opened once per command: its config.toml parsed once, its data opened once, each
argument and the packages its model needs checked once, whether the command is `evaluate RUN`,
`predict RUN`, `predict RUN PATH...` or the evaluation and prediction at the end of `train`
(whose --config file is parsed once too). Counted by wrapping the one config reader, the data
openers and the checks."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import corolla.config
from corolla.cli import main
from corolla.config import schema
from corolla.data import datasets
from corolla.data import layout as layout_lib
from corolla.scoring import tta
from corolla.models import hub
from corolla.runs import paths

pytestmark = pytest.mark.slow  # every test reads a run the module trains


class Counts:
    """Calls of the config reader by file, of the data openers, of the TTA check and of the
    check that the model's packages are installed."""

    def __init__(self, monkeypatch):
        self.parses = collections.Counter()
        self.calls = collections.Counter()
        read_toml = schema.read_toml

        def counted_read(path, what):
            self.parses[Path(path).resolve()] += 1
            return read_toml(path, what)

        monkeypatch.setattr(schema, "read_toml", counted_read)
        monkeypatch.setattr(corolla.config, "read_toml", counted_read)  # (its re-export)
        self._count(monkeypatch, layout_lib, "open_layout")
        self._count(monkeypatch, datasets, "open_recorded")
        self._count(monkeypatch, tta, "check_views")
        self._count(monkeypatch, hub, "require")

    def _count(self, monkeypatch, module, name):
        """`module.name` counted wherever Corolla's modules hold it: in `module`, and in those
        that imported the function by its own name."""
        real = getattr(module, name)

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return real(*args, **kwargs)

        for held in list(sys.modules.values()):
            if getattr(held, "__name__", "").startswith("corolla") and \
                    getattr(held, name, None) is real:
                monkeypatch.setattr(held, name, counted)

    def of(self, path) -> int:
        return self.parses[Path(path).resolve()]


@pytest.fixture(scope="module")
def trained(train_tiny, tmp_path_factory):
    """(run folder, its --config file, the counts of its `corolla train --config F`)."""
    tmp = tmp_path_factory.mktemp("opened")
    config = tmp / "tiny.toml"
    config.write_text("[train]\nepochs = 1\nsteps_per_epoch = 2\nbatch_size = 8\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        counts = Counts(monkeypatch)
        run = train_tiny(tmp / "runs", "--config", config, tiny=())
    return run, config, counts


def test_train_parses_its_config_file_once_and_opens_the_trained_run_once(trained):
    run, config, counts = trained
    assert counts.of(config) == 1  # train_config, for_plan, cpu_auto and compose share it
    # Written by training, read once for evaluation and prediction together.
    assert counts.of(run / paths.CONFIG) == 1
    assert counts.calls["open_recorded"] == 1  # the run's own split, for both


@pytest.mark.parametrize("args", [[], ["--fit-bias"]])
def test_evaluate_opens_the_run_once(trained, monkeypatch, args):
    run, _, _ = trained
    counts = Counts(monkeypatch)
    assert main(["evaluate", str(run), *args]) == 0
    assert counts.of(run / paths.CONFIG) == 1
    assert counts.calls["open_layout"] == 1
    assert counts.calls["check_views"] == 1
    assert counts.calls["require"] == 1


@pytest.mark.parametrize("args", [[], ["--bias", "fitted"], ["--tta", "2", "--out", "-"]])
def test_predict_opens_the_run_once(trained, monkeypatch, args):
    run, _, _ = trained
    if "fitted" in args and not (run / paths.BIAS).is_file():
        assert main(["evaluate", str(run), "--fit-bias"]) == 0
    counts = Counts(monkeypatch)
    assert main(["predict", str(run), *args]) == 0
    assert counts.of(run / paths.CONFIG) == 1
    assert counts.calls["open_layout"] == 1
    assert counts.calls["check_views"] == 1
    assert counts.calls["require"] == 1


def test_predictions_on_photos_read_the_run_once_and_open_no_data(trained, monkeypatch,
                                                                  tmp_path):
    run, _, _ = trained
    Image.fromarray(np.full((40, 30, 3), 200, np.uint8)).save(tmp_path / "flower.png")
    counts = Counts(monkeypatch)
    assert main(["predict", str(run), str(tmp_path / "flower.png")]) == 0
    assert counts.of(run / paths.CONFIG) == 1
    assert counts.calls["open_layout"] == 0
    assert counts.calls["check_views"] == 1
    assert counts.calls["require"] == 1
