"""The `pactmw` command: `serve` a Provider from a TOML file, or run the `demo`.

Each subcommand is one `_add_<name>(subparsers)` function that declares its arguments and sets
`run` to the function doing the work; list it in `SUBCOMMANDS`. A `run` function returns the
exit status, or raises `CommandError` for a one-line message on stderr (exit 2 by default).
Exit statuses: 0 success, 1 the command ran and failed, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from pactmw.config import ConfigError
from pactmw.store.base import StoreError

Run = Callable[[argparse.Namespace], int]
SubParsers = Any  # argparse's `_SubParsersAction` is private; its only use here is add_parser


class CommandError(Exception):
    """A failure to report as one line on stderr, with `status` as the exit status.

    The line is `pactmw COMMAND: error: MESSAGE`, or MESSAGE alone when `bare`.
    """

    def __init__(self, message: str, status: int = 2, *, bare: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.bare = bare


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- serve ---------------------------------------------------------------------------------

_SERVE_HELP = """\
Serve the Brands of a TOML configuration as a PACT 1.0 Provider (A2A HTTP+JSON) on uvicorn.

The TOML file holds the same keys as Django's PACTMW setting: base_url, audience, agents,
brands, store, ... (see examples/pactmw.toml). Brand handlers are import paths
('package.module:function') resolved from the current directory first, so run the command
from the directory that holds your bot's package. A relative sqlite store path
(sqlite:///.pactmw/pactmw.db, the default) is relative to the current directory too.

--host and --port say where to listen; the URLs in the Agent Cards come from base_url, which
must be the address personal agents reach (a proxy's, if there is one). Needs uvicorn
(pip install uvicorn).
"""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def _add_serve(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a Provider from a TOML configuration (needs uvicorn)",
        description=_SERVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="the TOML file")
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="TCP port to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="uvicorn's and pactmw's log level (default: %(default)s)",
    )
    parser.set_defaults(run=_serve)


def _store_label(url: str) -> str:
    """Where the store lives, for the startup line; never repeats a database URL (password)."""
    prefix = "sqlite:///"
    if url.lower().startswith(prefix):
        return "sqlite " + os.path.abspath(url[len(prefix) :])
    return url.partition("://")[0] or "?"


def _serve(args: argparse.Namespace) -> int:
    # Imported here: the other subcommands must not need the Provider's dependencies loaded.
    from pactmw.adapters.asgi import A2AProviderApp
    from pactmw.provider import Provider, ProviderSettings, card_url, load_toml

    try:
        import uvicorn
    except ImportError:
        # uvicorn is not a runtime dependency of pactmw: only this command needs it.
        raise CommandError(
            "pactmw serve needs uvicorn: pip install 'pactmw[serve]'", bare=True
        ) from None

    # `python -m pactmw` puts the current directory on sys.path, the `pactmw` console script
    # puts its own bin directory there instead. Insert the current directory so a handler like
    # `examples.bots:order_bot` imports the same way under both (uvicorn's --app-dir does too).
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)

    data = load_toml(args.config)
    settings = ProviderSettings.from_mapping(data)
    if not settings.brands:
        raise CommandError(f"{args.config}: no [brands.ID] table, so there is nothing to serve")
    try:
        provider = Provider.from_settings(settings)
    except (ValueError, StoreError, OSError, sqlite3.Error) as exc:
        # open_store's messages never repeat the URL, which may hold a password. OSError and
        # sqlite3.Error: SqliteStore lets some of them through (unusable path or file).
        raise CommandError(f"store: {exc}") from None

    level = "DEBUG" if args.log_level == "trace" else args.log_level.upper()
    _log_to_stderr("pactmw", level)
    log = logging.getLogger("pactmw.cli")
    log.info("store: %s", _store_label(settings.store))
    for brand in settings.brands:
        log.info("brand %r: card at %s", brand.id, card_url(settings.base_url, brand.id))
    _check_base_url(settings.base_url, args.port, log)

    config = uvicorn.Config(
        A2AProviderApp(provider),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    try:
        with _stop_signals():
            server.run()
    except _Stopped as stopped:
        log.info("stopped by %s", signal.Signals(stopped.signum).name)
        return 0
    except SystemExit as exc:  # uvicorn exits (status 3) when it cannot bind the port
        return 0 if exc.code in (0, None) else 1
    finally:
        provider.close()
    return 0 if server.started else 1


class _Stopped(BaseException):
    """SIGTERM or SIGINT after uvicorn's graceful shutdown (see `_stop_signals`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, frame: object) -> None:
    raise _Stopped(signum)


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """Turn SIGTERM/SIGINT into `_Stopped` so `serve` closes the store and exits 0.

    uvicorn shuts down gracefully on these signals, then restores the previous handlers and
    raises the signal again; with the default handlers the process would die right there
    (SIGTERM) or with a KeyboardInterrupt, before the store is closed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _check_base_url(base_url: str, port: int, log: logging.Logger) -> None:
    """Warn when a loopback base_url names another port than the one served (a likely typo).

    A public base_url (behind a proxy) legitimately differs from --host/--port.
    """
    url = urlsplit(base_url)
    if url.hostname not in ("127.0.0.1", "localhost", "::1"):
        return
    advertised = url.port or (443 if url.scheme == "https" else 80)
    if advertised != port:
        log.warning(
            "base_url %s names port %d but this server listens on %d: "
            "the Agent Cards send personal agents to port %d",
            base_url,
            advertised,
            port,
            advertised,
        )


class _UvicornStyle(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname + ':':<9} {record.name}: {super().format(record)}"


def _log_to_stderr(name: str, level: str) -> None:
    """Send the `name` logger to stderr in uvicorn's style (uvicorn configures only its own)."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(_UvicornStyle("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


# -- demo ----------------------------------------------------------------------------------

_DEMO_HELP = """\
Run the whole story on this machine, in a temporary directory, on 127.0.0.1 only:
a personal agent (its own key and JWKS server) talks to `pactmw serve` (a real subprocess,
embedded sqlite store): Agent Card, a signed multi-turn conversation, an idempotent retry and
two refusals. Exits 0 when every step behaves as PACT 1.0 says. Needs uvicorn.
"""


def _add_demo(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run a personal agent against a local Provider and print the transcript",
        description=_DEMO_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary directory (config, sqlite database, server log)",
    )
    parser.set_defaults(run=_demo)


def _demo(args: argparse.Namespace) -> int:
    from pactmw.demo import run_demo

    # The transcript has arrows and quotes; never fail on a console that cannot show them.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    return run_demo(keep=args.keep)


# -- the parser ----------------------------------------------------------------------------

SUBCOMMANDS: tuple[Callable[[SubParsers], None], ...] = (_add_serve, _add_demo)


def build_parser() -> argparse.ArgumentParser:
    """The `pactmw` argument parser with every subcommand of `SUBCOMMANDS`."""
    from pactmw import __version__

    parser = argparse.ArgumentParser(
        prog="pactmw",
        description="Let a web app answer personal agents: PACT 1.0 over A2A HTTP+JSON.",
    )
    parser.add_argument("--version", action="version", version=f"pactmw {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `pactmw` with `argv` (default: the process arguments); return the exit status."""
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
        print(prefix + _one_line(str(exc)), file=sys.stderr)
        return exc.status
    except ConfigError as exc:
        print(f"pactmw {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
