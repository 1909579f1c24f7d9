"""A new user's first minute: what can be checked without work (a path, a name, a flag, an
installed package) is said first, in one line, before any recipe is resolved, data converted or
time probed; no line is contradicted by the next."""

import pytest

from helpers.cli import one_line_error


@pytest.mark.parametrize("argv, says", [
    (["train", "--epohcs", "3"], "unrecognized arguments: --epohcs 3; did you mean --epochs?"),
    (["train", "--epohcs=3", "--nmae", "x"], "did you mean --epochs and --name?"),
    (["trian"], "did you mean train?"),
    (["export", "run", "--format", "tflit"], "did you mean tflite?"),
])
def test_a_misspelt_flag_command_or_choice_suggests_the_one_meant(capsys, argv, says):
    one_line_error(capsys, argv, says)


def test_the_suggestion_is_the_closest_choice_or_none():
    from corolla.errors import did_you_mean

    assert did_you_mean("Small_CNN", ["small_cnn", "small_resnet"]) == "did you mean small_cnn?"
    assert did_you_mean("zzz", ["small_cnn", "small_resnet"]) == ""
