"""The `corolla` command. Thin: it builds its parser from the command modules, each of which
declares its help, flags and entry (`corolla.commands`), and dispatches to the one named.

A user mistake ends with one line on stderr and exit status 2 (`flows.library_errors` makes the
line); Ctrl-C ends with 130 and says how to continue; a bug keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys

from corolla import __version__
from corolla.commands import (arguments, bench, check_data, check_submission, convert, demo,
                              ensemble, evaluate, explain, export, info, lr_find, predict, report,
                              submit, train)
from corolla.credentials import scrub
from corolla.errors import UserError, closest, did_you_mean
from corolla.flows.library_errors import as_user_errors
from corolla.runtime import clock, hardware, signals, tflog
from corolla.stopping import clear_stop, request_stop

# The commands, in the order `corolla --help` lists them, by name (the module's, with - for _).
# Each declares HELP, add_arguments(parser) and main(args) -> exit status; DESCRIPTION, where
# it has one, is the longer text its own --help opens with (else HELP).
COMMANDS = {module.__name__.rpartition(".")[2].replace("_", "-"): module for module in (
    info, demo, train, lr_find, evaluate, predict, export, explain, ensemble, convert, check_data,
    check_submission, report, submit, bench)}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors that suggest the flag, command or choice meant (Python
    3.11's argparse suggests none)."""

    def error(self, message):  # one line, exit 2 (argparse would print the usage block too)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _check_value(self, action, value):  # a value outside `choices`: a command, a format
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as e:
            hint = did_you_mean(value, action.choices)
            raise argparse.ArgumentError(action, f"{e.message}; {hint}" if hint else
                                         e.message) from None

    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:  # said by the command's own parser, which knows the flags meant
            parser = _chosen(self, parsed)
            flags = [s for a in parser._actions for s in a.option_strings]
            meant = [closest(arg.partition("=")[0], flags) for arg in unknown
                     if arg.startswith("-")]
            meant = " and ".join(m for m in meant if m)
            parser.error(f"unrecognized arguments: {' '.join(unknown)}"
                         f"{f'; did you mean {meant}?' if meant else ''}")
        return parsed


def _chosen(parser: argparse.ArgumentParser, parsed) -> argparse.ArgumentParser:
    """The innermost parser of the (sub)command `parsed` names: `corolla bench data`'s."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(parsed, action.dest, None)
            if name in action.choices:
                return _chosen(action.choices[name], parsed)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="corolla", description="Train image classifiers on your own photos "
                     "(or on TFRecords such as the Kaggle flowers'), on TPUs, GPUs or CPUs; "
                     "evaluate them, predict with them, explain and export them.")
    parser.add_argument("--version", action="version", version=f"corolla {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.HELP,
                           description=getattr(command, "DESCRIPTION", command.HELP))
        command.add_arguments(p)
        arguments.name_flags(p)
    return parser


@contextlib.contextmanager
def _stop_on_signals():
    """SIGTERM (`docker stop`, Kubernetes, Slurm, notebook shutdowns) and SIGHUP (a closed
    terminal) stop a command as Ctrl-C does: the run keeps its last completed epoch and the
    message says how to continue it. Yields the list the received signal is put in; the
    previous handlers and signal mask come back after the block (`main` may run inside a
    larger program)."""
    received = []

    def stop(signum, frame):
        received.append(signum)
        request_stop(signum)  # for the loops' checks, should this exception be lost
        raise KeyboardInterrupt

    def nohup(name, current):
        # A SIGHUP ignored from the start was ignored on purpose (`nohup corolla train ...`
        # must outlive its terminal): it stays ignored.
        return name == "SIGHUP" and current is signal.SIG_IGN

    unraisable = sys.unraisablehook

    def quiet(what):  # a stop lost in a callback is raised again (check_stop): no traceback
        if not (received and isinstance(what.exc_value, KeyboardInterrupt)):
            unraisable(what)

    # Unblocked: a parent may start us with them blocked (some job runners do), and a blocked
    # signal never reaches the handler: the run would train on through `docker stop`.
    with signals.handled(("SIGTERM", "SIGHUP"), stop, keep=nohup, unblock=True):
        sys.unraisablehook = quiet
        try:
            yield received
        finally:
            sys.unraisablehook = unraisable
            clear_stop()


def main(argv: list[str] | None = None) -> int:
    began = clock.default_clock().now()  # a time budget is the whole command's: it counts from here
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version, or a flag error (already printed)
        return e.code
    args.began = began
    quiet_import = tflog.quiet_tensorflow()
    received = []
    try:
        with _stop_on_signals() as received, quiet_import, as_user_errors():
            hardware.check_env_backend()
            code = COMMANDS[args.command].main(args)
        if received:  # a stop the command never saw: lost, or landed as it ended
            raise KeyboardInterrupt
        return code
    except KeyboardInterrupt as e:
        return _interrupted(received, getattr(e, "run_dir", None))
    except BrokenPipeError:  # `corolla check-data ... | head -1`: the reader has had enough
        return _pipe_closed()
    except UserError as e:
        if received:
            return _interrupted(received)
        print(f"corolla: error: {scrub(str(e))}", file=sys.stderr)  # a quoted URL's password
        return 2
    except Exception:
        if received:  # a stop that landed in a library which turned it into its own error
            return _interrupted(received)  # (matplotlib's savefig: a ValueError)
        raise


def _pipe_closed() -> int:
    """A closed pipe ends quietly, as `head` expects: standard output goes to /dev/null, so
    that Python's flush at exit finds nothing to fail on, and the status is SIGPIPE's."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 128 + getattr(signal, "SIGPIPE", 13)


def _interrupted(received: list[int], run_dir=None) -> int:
    """Every stop ends the same way: one line, and 128 + the signal as the exit status."""
    hint = f"; continue with: corolla train --resume {run_dir}" if run_dir else ""
    print(f"corolla: interrupted{hint}", file=sys.stderr)
    return 128 + (received[0] if received else 2)  # 130 for Ctrl-C (SIGINT), 143: SIGTERM


if __name__ == "__main__":
    sys.exit(main())
