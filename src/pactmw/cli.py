"""The `pactmw` command: `serve` a Provider from a TOML file, list or revoke delegation
`grants` in its store, or run the `demo`.

Each subcommand is one `_add_<name>(subparsers)` function that declares its arguments and sets
`run` to the function doing the work; list it in `SUBCOMMANDS`. A `run` function returns the
exit status, or raises `CommandError` for a one-line message on stderr (exit 2 by default).
Exit statuses: 0 success, 1 the command ran and failed, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pactmw.config import ConfigError
from pactmw.store.base import StoreError

if TYPE_CHECKING:
    from pactmw.provider import Provider, ProviderSettings
    from pactmw.store.base import Grant, Store

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


def _import_from_cwd() -> None:
    """Make import paths of the configuration (handlers, tools) resolve from the current
    directory first.

    `python -m pactmw` puts the current directory on sys.path, the `pactmw` console script
    puts its own bin directory there instead. Insert the current directory so a handler like
    `examples.bots:order_bot` imports the same way under both (uvicorn's --app-dir does too).
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


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

    _import_from_cwd()
    data = load_toml(args.config)
    settings = ProviderSettings.from_mapping(data)
    if not settings.brands:
        raise CommandError(f"{args.config}: no [brands.ID] table, so there is nothing to serve")
    try:
        provider = Provider.from_settings(settings)
    except (ValueError, StoreError, OSError, sqlite3.Error, ImportError) as exc:
        # open_store's messages never repeat the URL, which may hold a password. OSError and
        # sqlite3.Error: SqliteStore lets some of them through (unusable path or file).
        # ImportError: a PostgreSQL URL without psycopg installed (the message says so).
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


# -- grants --------------------------------------------------------------------------------

_GRANTS_HELP = """\
List or revoke the delegation grants of the PACT Delegated profile: what each user let a
personal agent do on their account at a Brand. The grants are read from the store of a TOML
configuration (the file `pactmw serve` uses); run the command from the directory pactmw serve
runs in, since a relative sqlite store path (the default) is relative to the current directory.
"""

_GRANTS_LIST_HELP = """\
List the live delegation grants (newest first) as a table: grant id, Brand, account, agent
issuer, scopes, expiry and status. --all adds revoked and expired grants; --json prints a JSON
array instead (times in ISO 8601 UTC). Exit status 0, or 2 for a bad configuration or store.
"""

_GRANTS_REVOKE_HELP = """\
Revoke one grant by id, or every live grant of an account (at one Brand with --brand). The
grant's delegation tokens are refused (401 invalid_token) on their next use and its refresh
tokens stop working. Revocation goes through the Provider, which emits the
agent.grant_revoked audit event (logged on stderr here). Exit status 0 when something was
revoked, 1 when nothing was (unknown id, already revoked or expired, no live grant of the
account), 2 for bad usage or configuration.
"""

#: How `grants list` shows times.
_TABLE_TIME = "%Y-%m-%d %H:%M UTC"
_JSON_TIME = "%Y-%m-%dT%H:%M:%SZ"


def _add_grants(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "grants",
        help="list or revoke the delegation grants in a Provider's store",
        description=_GRANTS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="grants_command", metavar="ACTION")

    def usage(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    parser.set_defaults(run=usage)

    listing = actions.add_parser(
        "list",
        help="list the grants",
        description=_GRANTS_LIST_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    listing.add_argument("--config", required=True, metavar="FILE", help="the TOML file")
    listing.add_argument("--brand", metavar="B", help="only the grants at Brand B")
    listing.add_argument("--account", metavar="A", help="only the grants of account A")
    listing.add_argument("--all", action="store_true", help="also list revoked and expired grants")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=_grants_list, command="grants list")

    revoke = actions.add_parser(
        "revoke",
        help="revoke a grant, or every grant of an account",
        description=_GRANTS_REVOKE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="pactmw grants revoke [-h] --config FILE (GRANT_ID | --account A [--brand B])",
    )
    revoke.add_argument("--config", required=True, metavar="FILE", help="the TOML file")
    revoke.add_argument("grant_id", nargs="?", metavar="GRANT_ID", help="the grant to revoke")
    revoke.add_argument("--account", metavar="A", help="revoke every live grant of account A")
    revoke.add_argument("--brand", metavar="B", help="with --account: only the grants at Brand B")
    revoke.set_defaults(run=_grants_revoke, command="grants revoke")


def _grant_settings(path: str) -> ProviderSettings:
    from pactmw.provider import ProviderSettings, load_toml

    _import_from_cwd()  # handlers and tools are imported by path, as `serve` does
    return ProviderSettings.from_mapping(load_toml(path))


def _open_grant_store(url: str) -> Store:
    """The configured store, refusing what another process cannot share with `serve`."""
    from pactmw.store import open_store

    scheme = url.partition("://")[0].lower()
    if scheme == "memory":
        raise CommandError(
            "store: memory:// lives inside the serving process; "
            "grants can only be managed in a sqlite or PostgreSQL store"
        )
    prefix = "sqlite:///"
    if url.lower().startswith(prefix):
        path = url[len(prefix) :]
        if path and not os.path.isfile(path):
            # Opening it would create an empty database and report no grants.
            raise CommandError(
                f"store: no database at {os.path.abspath(path)} "
                "(run this from the directory pactmw serve runs in)"
            )
    try:
        return open_store(url)
    except (ValueError, StoreError, OSError, sqlite3.Error, ImportError) as exc:
        raise CommandError(f"store: {exc}") from None


def _status(grant: Grant, now: float) -> str:
    if grant.revoked_at is not None:
        return "revoked"
    return "live" if grant.is_live(now) else "expired"


def _time(value: float | None, pattern: str) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, tz=timezone.utc).strftime(pattern)


def _grant_json(grant: Grant, now: float) -> dict[str, Any]:
    return {
        "grant_id": grant.grant_id,
        "brand_id": grant.brand_id,
        "account": grant.account,
        "client_id": grant.client_id,
        "pa_sub": grant.pa_sub,
        "scopes": list(grant.scopes),
        "created_at": _time(grant.created_at, _JSON_TIME),
        "updated_at": _time(grant.updated_at, _JSON_TIME),
        "expires_at": _time(grant.expires_at, _JSON_TIME),
        "revoked_at": _time(grant.revoked_at, _JSON_TIME),
        "status": _status(grant, now),
    }


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _grants_list(args: argparse.Namespace) -> int:
    settings = _grant_settings(args.config)
    store = _open_grant_store(settings.store)
    now = time.time()
    try:
        grants = store.list_grants(
            brand_id=args.brand, account=args.account, include_inactive=args.all, now=now
        )
    except (StoreError, sqlite3.Error) as exc:
        raise CommandError(f"store: {exc}", 1) from None
    finally:
        store.close()
    if args.json:
        print(json.dumps([_grant_json(grant, now) for grant in grants], indent=2))
        return 0
    if not grants:
        which = "grants" if args.all else "live grants (--all also lists revoked and expired ones)"
        print(f"no {which}")
        return 0
    header = ("GRANT", "BRAND", "ACCOUNT", "AGENT", "SCOPES", "EXPIRES", "STATUS")
    rows = [
        (
            grant.grant_id,
            grant.brand_id,
            grant.account,
            grant.client_id,
            " ".join(grant.scopes),
            _time(grant.expires_at, _TABLE_TIME) or "",
            _status(grant, now),
        )
        for grant in grants
    ]
    print(_table([header, *rows]))
    return 0


def _revoking_provider(settings: ProviderSettings, store: Store, config: str) -> Provider:
    """A Provider over `store` for its revocation API (which emits the audit events)."""
    from pactmw.core.jwk import generate_private_jwk
    from pactmw.protocols.delegation import SigningKeys
    from pactmw.provider import Provider

    if not any(brand.delegation is not None for brand in settings.brands):
        raise CommandError(
            f"{config}: no [brands.ID.delegation] table, so no Brand has grants to revoke"
        )
    # Revocation signs nothing. `Provider.from_settings` would load the Provider's private
    # signing keys (or, in development, create one under data_dir): a throwaway key spares
    # this command both.
    return Provider(
        base_url=settings.base_url,
        verifier=settings.identity.build_verifier(overrides=store),
        store=store,
        brands=settings.brands,
        identity_scheme=settings.identity_scheme,
        organization=settings.organization,
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
    )


def _grants_revoke(args: argparse.Namespace) -> int:
    if (args.grant_id is None) == (args.account is None):
        raise CommandError("give either a GRANT_ID or --account A")
    if args.brand is not None and args.account is None:
        raise CommandError("--brand goes with --account (a GRANT_ID names one grant)")
    settings = _grant_settings(args.config)
    store = _open_grant_store(settings.store)
    try:
        provider = _revoking_provider(settings, store, args.config)
        _log_to_stderr("pactmw.audit", "INFO")
        if args.grant_id is not None:
            grant_id: str = args.grant_id
            if provider.revoke_grant(grant_id):
                grant = store.get_grant(grant_id)
                detail = (
                    f" (brand {grant.brand_id}, account {grant.account}, agent {grant.client_id})"
                    if grant is not None
                    else ""
                )
                print(f"revoked {grant_id}{detail}")
                return 0
            grant = store.get_grant(grant_id)
            if grant is None:
                reason = "no such grant"
            elif grant.revoked_at is not None:
                reason = f"already revoked at {_time(grant.revoked_at, _TABLE_TIME)}"
            else:
                reason = f"expired at {_time(grant.expires_at, _TABLE_TIME)}"
            raise CommandError(f"nothing revoked: {grant_id}: {reason}", 1)
        revoked = provider.revoke_account(args.account, brand_id=args.brand)
        if not revoked:
            where = f" at brand {args.brand}" if args.brand is not None else ""
            raise CommandError(
                f"nothing revoked: account {args.account} has no live grant{where}", 1
            )
        for grant_id in revoked:
            print(f"revoked {grant_id}")
        return 0
    except (StoreError, sqlite3.Error) as exc:
        raise CommandError(f"store: {exc}", 1) from None
    finally:
        store.close()


# -- demo ----------------------------------------------------------------------------------

_DEMO_HELP = """\
Run the whole story on this machine, in a temporary directory, on 127.0.0.1 only:
a personal agent (its own key and JWKS server) talks to `pactmw serve` (a real subprocess,
embedded sqlite store).

PACT Identity: Agent Card, a signed multi-turn conversation, an idempotent retry and two
refusals. PACT Delegated: an account question gets a step-up; the personal agent runs the
device flow; the person (played by the demo) signs in at the Brand's own login (a development
Brand login, pactmw.brand_login), unticks a scope on the consent page and allows; the
delegated reply carries a receipt the personal agent verifies; a turn needing the unticked
scope gets a step-up; the token is refreshed; `pactmw grants revoke` revokes the grant and
the token is refused (401 invalid_token).

Exits 0 when every step behaves as PACT 1.0 says. Needs uvicorn.
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

SUBCOMMANDS: tuple[Callable[[SubParsers], None], ...] = (_add_serve, _add_grants, _add_demo)


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
