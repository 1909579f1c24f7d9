"""The notebook API's words: errors name the keyword a Python caller wrote, and the top level lists
its names without importing Keras."""

import subprocess
import sys

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
    from corolla.evaluation import tta
    from corolla.flows import photos

    for method in (api.Run.evaluate, api.Run.predict, api.Run.predict_photos):
        assert inspect.signature(method).parameters["tta"].default == tta.NONE
    assert inspect.signature(api.Run.predict_photos).parameters["top_k"].default == photos.TOP_K
