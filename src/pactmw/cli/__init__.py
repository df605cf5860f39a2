"""The `pactmw` command: `serve` a Provider from a TOML file, list or revoke delegation
`grants` in its store, manage the personal `agents` it accepts, `cleanup` its store, run the
`demo`; and the personal agent's side: `keygen` a signing key, sign a `token`, fetch a Brand's
`card`, `send` it a message, and `check` any Provider's PACT conformance.

Each subcommand is a private module `pactmw.cli._<name>` whose `COMMAND` declares it (a
`Command` of `pactmw.cli._common`: its name, help, arguments and the `run` function doing the
work); list it in `_subcommands`. A `run` function returns the exit status, or raises
`CommandError` (`pactmw.cli._common`) for a one-line message on stderr (exit 2 by default).
Exit statuses: 0 success, 1 the command ran and failed, 2 bad usage or configuration, 130
when interrupted (Ctrl-C), 141 when the output is a pipe the reader closed (`pactmw ... |
head -1`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from pactmw.cli._common import Command, Run

# Nothing of pactmw is imported here, only in `main`: the console script and `python -m
# pactmw` import this module before calling `main`, and Ctrl-C during an import that is not
# inside `main` is a KeyboardInterrupt traceback (pactmw's imports take ~0.4 s).

__all__ = ["build_parser", "main"]

#: The exit status when stdout is a pipe whose reader has gone: 128 + SIGPIPE, what a shell
#: reports for a program that a closed pipe ends (`yes | head -1`).
_CLOSED_OUTPUT = 141

#: The exit status after Ctrl-C: 128 + SIGINT, as a shell reports it.
_INTERRUPTED = 130


def _subcommands() -> tuple[Command, ...]:
    from pactmw.cli import (
        _agents,
        _card,
        _check,
        _cleanup,
        _demo,
        _grants,
        _keygen,
        _send,
        _serve,
        _token,
    )

    return (
        _serve.COMMAND,
        _grants.COMMAND,
        _agents.COMMAND,
        _cleanup.COMMAND,
        _demo.COMMAND,
        _keygen.COMMAND,
        _token.COMMAND,
        _card.COMMAND,
        _send.COMMAND,
        _check.COMMAND,
    )


def build_parser() -> argparse.ArgumentParser:
    """The `pactmw` argument parser with every subcommand."""
    import argparse

    from pactmw import __version__

    parser = argparse.ArgumentParser(
        prog="pactmw",
        description="Let a web app answer personal agents: PACT 1.0 over A2A HTTP+JSON.",
    )
    parser.add_argument("--version", action="version", version=f"pactmw {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _subcommands():
        command.add_to(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `pactmw` with `argv` (default: the process arguments); return the exit status."""
    try:
        try:
            return _main(argv)
        except KeyboardInterrupt:  # before a subcommand runs: while pactmw is imported
            print("pactmw: interrupted", file=sys.stderr)
            return _INTERRUPTED
        finally:
            if sys.stdout is not None:  # None: no stdout at all (`>&-`), nothing to flush
                sys.stdout.flush()  # a closed pipe fails here rather than when Python exits
    except BrokenPipeError:
        # Python's recipe: what is left to write goes nowhere, with no traceback at exit.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _CLOSED_OUTPUT


def _main(argv: Sequence[str] | None) -> int:
    from pactmw.cli._common import CommandError, one_line, reconfigure_output
    from pactmw.config import ConfigError

    reconfigure_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Run | None = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return run(args)
    except CommandError as exc:
        prefix = "" if exc.bare else f"pactmw {args.command}: error: "
        print(prefix + one_line(str(exc)), file=sys.stderr)
        return exc.status
    except ConfigError as exc:
        print(f"pactmw {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: said in one line, with the shell's status for it
        print(f"pactmw {args.command}: interrupted", file=sys.stderr)
        return _INTERRUPTED
