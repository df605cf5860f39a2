"""What the `pactmw` subcommands share: how they fail, how they write, and the few helpers
more than one of them needs.

A `run` function returns the exit status, or raises `CommandError` for a one-line message on
stderr (exit 2 by default). Exit statuses: 0 success, 1 the command ran and failed, 2 bad
usage or configuration.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pactmw.core.errors import PactmwError

if TYPE_CHECKING:
    from pactmw.client import AgentSigner

Run = Callable[[argparse.Namespace], int]
SubParsers = Any  # argparse's `_SubParsersAction` is private; its only use here is add_parser


class CommandError(PactmwError):
    """A failure to report as one line on stderr, with `status` as the exit status.

    The line is `pactmw COMMAND: error: MESSAGE`, or MESSAGE alone when `bare`.
    """

    def __init__(self, message: str, status: int = 2, *, bare: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.bare = bare


def one_line(text: str) -> str:
    return " ".join(text.split())


def add_command(
    subparsers: SubParsers, name: str, *, summary: str, description: str, **options: Any
) -> argparse.ArgumentParser:
    """Declare a (sub)command: `summary` for the list of commands, `description` for its
    --help, shown as written (line breaks kept)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **options,
    )
    return parser


def reconfigure_output() -> None:
    """Never fail on a console that cannot show a character (names, arrows, ellipses)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


class _UvicornStyle(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname + ':':<9} {record.name}: {super().format(record)}"


def log_to_stderr(name: str, level: str) -> None:
    """Send the `name` logger to stderr in uvicorn's style (uvicorn configures only its own)."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(_UvicornStyle("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def import_from_cwd() -> None:
    """Make import paths of the configuration (handlers, tools) resolve from the current
    directory first.

    `python -m pactmw` puts the current directory on sys.path, the `pactmw` console script
    puts its own bin directory there instead. Insert the current directory so a handler like
    `examples.bots:order_bot` imports the same way under both (uvicorn's --app-dir does too).
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def add_timeout_option(parser: argparse.ArgumentParser) -> None:
    """`--timeout S`: how long to wait for each answer of a Provider."""
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=10.0,
        metavar="S",
        help="seconds to wait for each answer (default: 10)",
    )


def load_signer(path: str, issuer: str) -> AgentSigner:
    from pactmw.client import AgentSigner

    try:
        return AgentSigner.from_file(path, issuer=issuer)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CommandError(f"{path}: {exc}") from None


def card_url(text: str, what: str) -> str:
    from pactmw.check import card_url_from
    from pactmw.client import URLRefused

    try:
        return card_url_from(text)
    except URLRefused as exc:
        raise CommandError(f"{what}: {exc}") from None


__all__ = [
    "CommandError",
    "Run",
    "SubParsers",
    "add_command",
    "add_timeout_option",
    "card_url",
    "import_from_cwd",
    "load_signer",
    "log_to_stderr",
    "one_line",
    "positive_seconds",
    "reconfigure_output",
]
