"""Signals, wherever they land: a stop lost inside a weakref callback is raised at the next check,
and every stop ends as `corolla: interrupted` with the signal's exit status."""

import signal
import time

import pytest

from corolla.cli import main


def _lost_stop(signum=signal.SIGTERM):
    """A signal whose handler runs inside a weakref callback, where Python drops the
    handler's KeyboardInterrupt ("Exception ignored in ...") and carries on."""
    import weakref

    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing, lambda r: signal.raise_signal(signum))
    del thing
    return ref


def test_a_stop_lost_inside_a_weakref_callback_is_raised_at_the_next_check():
    """`timeout 300 corolla explain ...` once ran 7 minutes past its SIGTERM: the handler's
    KeyboardInterrupt was raised in a weakref callback and discarded."""
    from corolla import cli, stopping

    with pytest.raises(KeyboardInterrupt):
        with cli._stop_on_signals() as received:
            _lost_stop()
            assert received == [signal.SIGTERM]  # here: the handler ran, its exception lost
            stopping.check_stop()  # the next batch's (image's, file's) check raises it again
    assert stopping.stop_signal() is None  # cleared with the handlers: main may run again


def test_every_stop_ends_as_interrupted_with_the_signals_status(monkeypatch, capsys):
    """Wherever a stop lands: lost in a callback and never checked again, turned by a library
    into an error of its own (matplotlib's savefig raised `ValueError: Invalid affine
    transformation matrix`), or as the command fails: `corolla: interrupted`, exit 143."""
    from corolla import cli

    def lost(args):
        _lost_stop()
        return 0

    def in_a_library(args):
        try:
            signal.raise_signal(signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode; this is never finished
        except KeyboardInterrupt:
            raise ValueError("Invalid affine transformation matrix") from None

    def then_a_user_error(args):
        _lost_stop()
        raise cli.UserError("the data is gone")

    for command in (lost, in_a_library, then_a_user_error):
        monkeypatch.setattr(cli.COMMANDS["info"], "main", command)
        assert main(["info"]) == 128 + signal.SIGTERM, command.__name__
        err = capsys.readouterr().err
        assert err.strip().splitlines()[-1] == "corolla: interrupted", err
        assert "ValueError" not in err and "the data is gone" not in err
        assert "Exception ignored" not in err  # the lost stop's traceback is not printed
