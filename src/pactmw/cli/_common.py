"""What the `pactmw` subcommands share: how they fail, how they write, and the few helpers
more than one of them needs.

A `run` function returns the exit status, or raises `CommandError` for a one-line message on
stderr (exit 2 by default). Exit statuses: 0 success, 1 the command ran and failed, 2 bad
usage or configuration.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from attrs import frozen

from pactmw.core.encoding import printable, printable_json
from pactmw.core.errors import PactmwError
from pactmw.core.files import stage_file

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
    """A message as the one line a terminal shows as written: an error may quote a Provider
    (its refusal's message, a redirect's target), whose controls are shown as escapes."""
    return printable(" ".join(text.split()))


def not_utf8(exc: UnicodeDecodeError) -> str:
    """What a file that is not UTF-8 is, in errors: `not UTF-8 text (byte 0xf6 at offset 22)`."""
    return f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"


@frozen
class Option:
    """One argument of a command: what `argparse.ArgumentParser.add_argument` takes."""

    flags: tuple[str, ...]
    settings: Mapping[str, Any]


def option(*flags: str, **settings: Any) -> Option:
    return Option(flags, settings)


@frozen
class Command:
    """A (sub)command, declared: `summary` for the list of commands, `description` for its
    --help, shown as written (line breaks kept), `options` its arguments in order, `run` the
    work. A command with `actions` (subcommands of its own) and no `run` prints its help."""

    name: str
    summary: str
    description: str
    run: Run | None = None
    options: tuple[Option, ...] = ()
    actions: tuple[Command, ...] = ()
    usage: str | None = None

    def add_to(self, subparsers: SubParsers, parent: str = "") -> None:
        """Declare this command, and its actions below it, in `subparsers`; `args.command`
        names it the way error messages do (`grants list`)."""
        parser: argparse.ArgumentParser = subparsers.add_parser(
            self.name,
            help=self.summary,
            description=self.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            usage=self.usage,
        )
        for argument in self.options:
            parser.add_argument(*argument.flags, **argument.settings)
        if self.actions:
            actions = parser.add_subparsers(dest=f"{self.name}_command", metavar="ACTION")
            for action in self.actions:
                action.add_to(actions, parent=f"{parent}{self.name} ")
        parser.set_defaults(run=self.run or _help_of(parser), command=parent + self.name)


def _help_of(parser: argparse.ArgumentParser) -> Run:
    def usage(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return usage


@frozen
class OutputFile:
    """A file a command writes: `name` as the user gave it (errors repeat it), the `text`,
    and the permission `mode` it has from the moment it appears under that name."""

    name: str
    text: str
    mode: int


def write_all(files: Sequence[OutputFile], *, force: bool, parents: bool) -> None:
    """Write every file of `files` or none of them, or raise `CommandError` naming the path
    the user gave.

    Everything that can be checked is checked before anything is written: an existing file
    (replaced only with `force`), a missing folder (created only with `parents`, and removed
    again if the writing fails). Each file is written whole to a temporary file beside it,
    then renamed into place, so no one ever reads half a file; if one rename fails, the
    files already renamed are put back as they were.
    """
    for file in files:
        target = Path(file.name)
        if target.is_dir():
            raise CommandError(f"{file.name} is a directory")
        if target.exists() and not target.is_file():
            # A device, a named pipe, a socket: the rename would put a file in its place.
            raise CommandError(f"{file.name} is not a regular file (--force replaces files only)")
        if target.exists() and not force:
            raise CommandError(f"{file.name} exists (--force replaces it)")
        _check_folder(file.name, target.parent, parents)
    created: list[Path] = []
    staged: list[tuple[OutputFile, Path]] = []
    written = False
    try:
        for file in files:
            try:
                created += _make_folders(Path(file.name).parent)
                staged.append((file, stage_file(file.name, file.text, file.mode)))
            except OSError as exc:
                raise CommandError(f"cannot write {file.name}: {exc.strerror}") from None
        _rename_all(staged)
        written = True
    finally:
        if not written:
            for _, temporary in staged:
                temporary.unlink(missing_ok=True)
            for folder in created:  # innermost first
                folder.rmdir()


def _folder_name(name: str) -> str:
    return os.path.dirname(name) or "."


def _check_folder(name: str, folder: Path, parents: bool) -> None:
    existing = next(f for f in (folder, *folder.parents) if f.exists())
    if not existing.is_dir():
        raise CommandError(f"{_folder_name(name)}: not a directory")
    if existing != folder and not parents:
        raise CommandError(f"{_folder_name(name)}: no such directory (--parents creates it)")


def _make_folders(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; return those created, innermost first."""
    missing = [f for f in (folder, *folder.parents) if not f.exists()]
    for each in reversed(missing):
        each.mkdir()
    return missing


def _rename_all(staged: Sequence[tuple[OutputFile, Path]]) -> None:
    """Rename each temporary file onto its target; if one fails, undo the renames done."""
    kept: dict[Path, Path] = {}  # target -> a hard link to the file it replaces
    done: list[Path] = []
    try:
        for file, temporary in staged:
            target = Path(file.name)
            try:
                if target.exists():
                    kept[target] = temporary.with_name(temporary.name + ".old")
                    os.link(target, kept[target])
                os.replace(temporary, target)
            except OSError as exc:
                raise CommandError(f"cannot write {file.name}: {exc.strerror}") from None
            done.append(target)
    except CommandError:
        for target in reversed(done):
            if target in kept:
                os.replace(kept.pop(target), target)
            else:
                target.unlink()
        raise
    finally:
        for link in kept.values():
            link.unlink(missing_ok=True)


def reconfigure_output() -> None:
    """Never fail on a console that cannot show a character (names, arrows, ellipses): it
    shows a backslash escape instead (`main` sets this up for every subcommand)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def print_json(document: Any) -> None:
    """Print `document` as JSON on stdout, its text as it is when stdout can encode it, else
    with JSON's own escapes (`\\u00e9`): a backslash escape of the console's would not be
    JSON. The controls a terminal acts on are JSON escapes either way (`printable_json`)."""
    text = printable_json(json.dumps(document, indent=2, ensure_ascii=False))
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")  # None: no stdout
    except (UnicodeEncodeError, LookupError):
        text = json.dumps(document, indent=2)
    print(text)


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


#: `--timeout S`: how long to wait for each answer of a Provider. Each attempt: a request
#: safe to resend (a card, a key) is resent twice after a network failure (`RetryPolicy`),
#: so a server that hangs takes about three times as long, which the help says.
TIMEOUT = option(
    "--timeout",
    type=positive_seconds,
    default=10.0,
    metavar="S",
    help="seconds to wait for each answer (default: 10); a fetch safe to resend is tried "
    "up to 3 times",
)
#: The options more than one command takes, alike.
CONFIG = option("--config", required=True, metavar="FILE", help="the TOML file")
ISSUER = option("--issuer", required=True, metavar="ISS", help="the registered issuer")
#: `--key`: the personal agent's private key, a JWK or PEM file (`load_signer` reads it).
KEY = option("--key", required=True, metavar="PRIVATE.jwk", help="the agent's private key")
#: `--sub`: the user a personal agent speaks for, in its tokens' `sub`.
SUB = option("--sub", required=True, metavar="SUB", help="the user's stable id")
AUDIENCE = option(
    "--audience", required=True, metavar="AUD", help="the audience the Provider assigned"
)
#: `--json` of the commands that list rows (`agents list`, `grants list`).
JSON_TABLE = option("--json", action="store_true", help="print JSON instead of a table")


def refuse_empty(args: argparse.Namespace, *names: str) -> None:
    """Refuse an option given as "" (an empty shell variable, most likely) by its flag, before
    it is taken for a value: `--issuer must not be empty`. `names` are argparse dests."""
    for name in names:
        if getattr(args, name) == "":
            raise CommandError(f"--{name.replace('_', '-')} must not be empty")


def load_signer(path: str, issuer: str) -> AgentSigner:
    from pactmw.client import AgentSigner

    try:
        return AgentSigner.from_file(path, issuer=issuer)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def naming(url: str, exc: Exception) -> str:
    """A client error's text naming `url` once: most errors name the URL they are about
    (escaped, as `printable` shows it), so it goes in front only when the error does not."""
    said = str(exc)
    return said if printable(url) in said else f"{url}: {said}"


def card_failure(url: str, exc: Exception) -> CommandError:
    """The one line (exit 1) for the card at `url` that a client error kept from being used."""
    from pactmw.check._wire import CARD_PATH
    from pactmw.client import HTTPError

    said = naming(url, exc)
    if isinstance(exc, HTTPError) and exc.status == 401:
        # A card is public: a URL that wants a token is some other route (an app's API).
        said += (
            " (an Agent Card is public and fetched without a token: is this the card's URL? "
            f"A Provider serves each Brand's card at /a2a/{{brand}}{CARD_PATH})"
        )
    elif isinstance(exc, HTTPError) and exc.status == 404 and urlsplit(url).path == CARD_PATH:
        # A domain's root card is missing: often a Provider's root, given for a Brand's.
        said += (
            f" (a Brand's domain serves {CARD_PATH} or redirects to its card; a Provider "
            f"serves each Brand's card at /a2a/{{brand}}{CARD_PATH})"
        )
    elif type(exc) is HTTPError and exc.status == 404 and not url.endswith(CARD_PATH):
        # Most often the Brand's interface URL (its card's `supportedInterfaces` URL). A bare
        # 404 only: an A2A error says what it is about itself.
        said += (
            f" (is this the card's URL? A Brand's card is at its interface URL + {CARD_PATH}: "
            f"/a2a/{{brand}}{CARD_PATH})"
        )
    return CommandError(said, 1)


def card_url(text: str, what: str) -> str:
    from pactmw.check import card_url_from
    from pactmw.client import URLRefused

    try:
        return card_url_from(text)
    except URLRefused as exc:
        raise CommandError(f"{what}: {exc}") from None


__all__ = [
    "AUDIENCE",
    "CONFIG",
    "ISSUER",
    "JSON_TABLE",
    "KEY",
    "SUB",
    "TIMEOUT",
    "Command",
    "CommandError",
    "Option",
    "OutputFile",
    "Run",
    "SubParsers",
    "card_failure",
    "card_url",
    "import_from_cwd",
    "load_signer",
    "log_to_stderr",
    "naming",
    "not_utf8",
    "one_line",
    "option",
    "positive_seconds",
    "print_json",
    "printable",
    "reconfigure_output",
    "refuse_empty",
    "write_all",
]
