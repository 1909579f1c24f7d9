"""The command line as a user meets it: a command that fails ends in one line on stderr, with
exit status 2 and no traceback."""

from __future__ import annotations

from corolla.cli import main


def one_line_error(capsys, argv, *needles) -> str:
    """Runs `corolla ARGV` in this process: exit 2 and one line naming each of `needles`
    (lines not from Corolla, a library's warnings, may come beside it). Returns the line."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("corolla")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def one_line(capsys, code, *needles) -> str:
    """A command already run, whose exit status was `code`: exit 2 and stderr one line,
    `corolla: error: ...`, naming each of `needles`. Returns it."""
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("corolla: error:"), err
    for needle in needles:
        assert needle in err, err
    return err


def said_first(capsys, argv, *needles) -> str:
    """`one_line_error`, and nothing said before it: no recipe announced, no data checked, no
    time probed (standard output empty). Returns the line."""
    code = main(argv)
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    lines = [line for line in captured.err.splitlines() if line.startswith("corolla")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
