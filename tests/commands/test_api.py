"""The notebook API's words: errors name the keyword a Python caller wrote, and the top level lists
its names without importing Keras."""

import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import corolla
from corolla.errors import UserError


def test_errors_name_the_keyword_a_python_caller_wrote(tmp_path):
    """The API speaks Python: `data=`, `epochs=`, `resume=`, never the CLI's `--data`."""
    with pytest.raises(UserError, match=r"no data given; pass data= with a folder"):
        corolla.train(epochs=1)
    with pytest.raises(UserError, match=r"^epochs= must be") as info:
        corolla.train(data=tmp_path, epochs=-1)
    assert "--" not in str(info.value)
    with pytest.raises(UserError, match=r"resume= continues a run .* drop epochs="):
        corolla.train(resume=tmp_path, epochs=2)


def test_a_taken_run_name_is_one_line_naming_the_keyword(tiny_run, tiny_petals):
    """The README's snippet run a second time (its run name taken): the message names
    `name=`, and the traceback holds the caller's line and the API's, none of Corolla's
    insides; IPython and Jupyter show the message alone."""
    with pytest.raises(UserError) as caught:
        corolla.train(data=str(tiny_petals), name=tiny_run.name, runs_dir=str(tiny_run.parent),
                      epochs=1)
    message = str(caught.value)
    assert "already exists (a finished run); choose another name= or" in message, message
    assert "--" not in message
    inside = [frame for frame in traceback.extract_tb(caught.value.__traceback__)
              if "/corolla/" in frame.filename.replace("\\", "/")]
    assert [(Path(f.filename).name, f.name) for f in inside] == [("api.py", "call")]
    assert caught.value._render_traceback_() == [f"UserError: {message}"]


def test_every_user_error_of_the_api_is_raised_from_its_edge(tmp_path):
    """Not only train's: a run folder that is none, and a Run's own calls."""
    for call in (lambda: corolla.open_run(tmp_path / "nope"),
                 lambda: corolla.Run(tmp_path).predict_photos(tmp_path),
                 lambda: corolla.check_data(tmp_path / "nope")):
        with pytest.raises(UserError) as caught:
            call()
        frames = traceback.extract_tb(caught.value.__traceback__)
        assert [f.name for f in frames if "/corolla/" in f.filename] == ["call"], frames


def test_an_array_given_as_data_is_one_short_line():
    """A notebook user passing images in memory gets the keyword and what it takes, not the
    array printed whole."""
    import numpy as np

    with pytest.raises(UserError) as caught:
        corolla.train(data=np.zeros((64, 32, 32, 3)))
    message = str(caught.value)
    assert message.startswith("data= must be a string, got array([[[[0.") and \
        message.endswith("...") and "\n" not in message and len(message) < 120, message


def test_the_top_level_lists_its_names_and_imports_no_keras():
    assert {"train", "open_run", "Run", "runtime", "models", "config"} <= set(dir(corolla))
    assert set(corolla.__all__) <= set(dir(corolla))
    code = ("import sys, corolla; names = dir(corolla); "
            "assert 'keras' not in sys.modules and 'tensorflow' not in sys.modules, "
            "sorted(m for m in sys.modules if m.startswith(('keras', 'tensorflow')))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_runs_defaults_are_the_named_ones():
    """The API's tta and top_k defaults are written out for its reference page: they stay the
    values every other signature and flag takes from their one home."""
    import inspect

    from corolla import api
    from corolla.scoring import tta
    from corolla.flows import photos

    for method in (api.Run.evaluate, api.Run.predict, api.Run.predict_photos):
        assert inspect.signature(method).parameters["tta"].default == tta.NO_TTA
    assert inspect.signature(api.Run.predict_photos).parameters["top_k"].default == photos.TOP_K
