"""The `pactmw` command: `serve` a Provider from a TOML file, list or revoke delegation
`grants` in its store, manage the personal `agents` it accepts, `cleanup` its store, run the
`demo`; and the personal agent's side: `keygen` a signing key, sign a `token`, fetch a Brand's
`card`, and `check` any Provider's PACT conformance.

Each subcommand is a private module `pactmw.cli._<name>` whose `COMMAND` declares it (a
`Command` of `pactmw.cli._common`: its name, help, arguments and the `run` function doing the
work); list it in `SUBCOMMANDS`. A `run` function returns the exit status, or raises
`CommandError` (`pactmw.cli._common`) for a one-line message on stderr (exit 2 by default).
Exit statuses: 0 success, 1 the command ran and failed, 2 bad usage or configuration, 130
when interrupted (Ctrl-C), 141 when the output is a pipe the reader closed (`pactmw ... |
head -1`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from pactmw.cli import _agents, _card, _check, _cleanup, _demo, _grants, _keygen, _serve, _token
from pactmw.cli._common import Command, CommandError, Run, one_line, reconfigure_output
from pactmw.config import ConfigError

__all__ = ["build_parser", "main"]

#: The exit status when stdout is a pipe whose reader has gone: 128 + SIGPIPE, what a shell
#: reports for a program that a closed pipe ends (`yes | head -1`).
_CLOSED_OUTPUT = 141

SUBCOMMANDS: tuple[Command, ...] = (
    _serve.COMMAND,
    _grants.COMMAND,
    _agents.COMMAND,
    _cleanup.COMMAND,
    _demo.COMMAND,
    _keygen.COMMAND,
    _token.COMMAND,
    _card.COMMAND,
    _check.COMMAND,
)


def build_parser() -> argparse.ArgumentParser:
    """The `pactmw` argument parser with every subcommand of `SUBCOMMANDS`."""
    from pactmw import __version__

    parser = argparse.ArgumentParser(
        prog="pactmw",
        description="Let a web app answer personal agents: PACT 1.0 over A2A HTTP+JSON.",
    )
    parser.add_argument("--version", action="version", version=f"pactmw {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.add_to(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `pactmw` with `argv` (default: the process arguments); return the exit status."""
    try:
        try:
            return _main(argv)
        finally:
            if sys.stdout is not None:  # None: no stdout at all (`>&-`), nothing to flush
                sys.stdout.flush()  # a closed pipe fails here rather than when Python exits
    except BrokenPipeError:
        # Python's recipe: what is left to write goes nowhere, with no traceback at exit.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _CLOSED_OUTPUT


def _main(argv: Sequence[str] | None) -> int:
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
        return 130
