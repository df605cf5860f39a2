"""The `pactmw` command: `serve` a Provider from a TOML file, list or revoke delegation
`grants` in its store, run the `demo`; and the personal agent's side: `keygen` a signing key,
sign a `token`, fetch a Brand's `card`, and `check` any Provider's PACT conformance.

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
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pactmw.config import ConfigError
from pactmw.store.base import StoreError

if TYPE_CHECKING:
    from pactmw.client import AgentSigner
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


# -- keygen --------------------------------------------------------------------------------

_KEYGEN_HELP = """\
Generate a personal agent's signing key: the private JWK goes to --out (mode 0600, never
publish it), the public JWKS to --jwks (publish it at the jwks_uri you register with each
Provider). Without --jwks the public JWKS is printed on stdout.

PACT personal-agent JWTs are ES256 (the reference) or RS256; EdDSA keys are for other uses
and `pactmw token` refuses them. The kid defaults to the key's RFC 7638 thumbprint. Existing
files are never replaced unless --force.
"""

KEY_ALGORITHMS = ("ES256", "RS256", "EdDSA")


def _add_keygen(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "keygen",
        help="generate a personal agent's signing key (private JWK) and its public JWKS",
        description=_KEYGEN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--alg", choices=KEY_ALGORITHMS, default="ES256", help="key algorithm (default: ES256)"
    )
    parser.add_argument("--kid", metavar="K", help="key id (default: the RFC 7638 thumbprint)")
    parser.add_argument(
        "--out", required=True, metavar="PRIVATE.jwk", help="where to write the private JWK"
    )
    parser.add_argument("--jwks", metavar="PUBLIC.json", help="where to write the public JWKS")
    parser.add_argument("--force", action="store_true", help="replace existing files")
    parser.set_defaults(run=_keygen)


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, readable by its owner only (0600 from creation)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".pactmw-key-", suffix=".tmp")
    try:
        os.chmod(temporary, 0o600)  # mkstemp already creates 0600; say it anyway
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _keygen(args: argparse.Namespace) -> int:
    from pactmw.client import write_jwks
    from pactmw.core.jwk import generate_private_jwk

    if args.kid is not None and not args.kid:
        raise CommandError("--kid must not be empty")
    out = Path(args.out)
    targets = [out] + ([Path(args.jwks)] if args.jwks else [])
    if args.jwks and out.resolve() == Path(args.jwks).resolve():
        raise CommandError("--out and --jwks must be different files")
    for target in targets:
        if target.exists() and not args.force:
            raise CommandError(f"{target} exists (--force replaces it)")
    key = generate_private_jwk(args.alg, kid=args.kid)
    public = {"keys": [{**key.public.to_dict(), "use": "sig"}]}
    try:
        _write_private(out, json.dumps(key.to_dict(), indent=2) + "\n")
        if args.jwks:
            write_jwks(public, args.jwks)
    except OSError as exc:
        raise CommandError(f"cannot write {exc.filename or out}: {exc.strerror}") from None
    info = sys.stdout if args.jwks else sys.stderr
    print(f"private key ({key.alg}, kid {key.kid}) written to {out} (mode 0600)", file=info)
    if args.jwks:
        print(f"public JWKS written to {args.jwks}: publish it at your registered jwks_uri")
    else:
        print(json.dumps(public, indent=2))
    if key.alg not in ("ES256", "RS256"):
        print(
            f"note: PACT personal-agent JWTs are ES256 or RS256; this {key.alg} key cannot "
            "sign them",
            file=sys.stderr,
        )
    return 0


# -- token ---------------------------------------------------------------------------------

_SIGN_HELP = """\
Print a PACT personal-agent JWT (PACT §3.2) signed with a private JWK (or PEM) file: header
{alg, kid, typ: JWT}, claims iss, sub, aud, iat, exp = iat + --ttl (at most 300 s) and a
random jti. --audience is the opaque audience the Provider assigned, not a card URL.
"""


def _add_token(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "token",
        help="print a personal-agent JWT signed with a private key",
        description=_SIGN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--key", required=True, metavar="PRIVATE.jwk", help="the private key")
    parser.add_argument("--issuer", required=True, metavar="ISS", help="the registered issuer")
    parser.add_argument("--sub", required=True, metavar="SUB", help="the user's stable id")
    parser.add_argument(
        "--audience", required=True, metavar="AUD", help="the audience the Provider assigned"
    )
    parser.add_argument(
        "--ttl", type=int, default=120, metavar="S", help="lifetime, 1 to 300 s (default: 120)"
    )
    parser.set_defaults(run=_token)


def _load_signer(path: str, issuer: str) -> AgentSigner:
    from pactmw.client import AgentSigner

    try:
        return AgentSigner.from_file(path, issuer=issuer)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CommandError(f"{path}: {exc}") from None


def _token(args: argparse.Namespace) -> int:
    signer = _load_signer(args.key, args.issuer)
    try:
        print(signer.sign(args.sub, args.audience, args.ttl))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return 0


# -- card ----------------------------------------------------------------------------------

_CARD_HELP = """\
Fetch a Brand's Agent Card the way a personal agent does, validate it and print a summary:
name, interface URL, identity scheme, and the delegation scopes when the Brand offers
PACT Delegated. URL is a card URL, or a Brand's domain (https://shop.example or
shop.example): its /.well-known/agent-card.json, which serves the card or redirects to the
Provider's (up to 5 redirects are followed). Plain http is allowed to loopback hosts only.
Exit status 0 for a valid PACT card, 1 when it cannot be fetched or is not valid.
"""


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _add_card(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "card",
        help="fetch, validate and summarize a Brand's Agent Card",
        description=_CARD_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", metavar="URL", help="the card URL or the Brand's domain")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=10.0,
        metavar="S",
        help="seconds to wait for each answer (default: 10)",
    )
    parser.set_defaults(run=_card)


def _card_url(text: str, what: str) -> str:
    from pactmw.check import card_url_from
    from pactmw.client import URLRefused

    try:
        return card_url_from(text)
    except URLRefused as exc:
        raise CommandError(f"{what}: {exc}") from None


def _card(args: argparse.Namespace) -> int:
    from pactmw.check import identity_scheme_name
    from pactmw.client import ClientError, SyncTransport, delegation_scheme, fetch_card
    from pactmw.client import interface_url as card_interface

    url = _card_url(args.url, "URL")
    try:
        card = fetch_card(url, transport=SyncTransport(timeout=args.timeout))
        interface = card_interface(card)
    except ClientError as exc:
        raise CommandError(f"{url}: {exc}", 1) from None
    identity = identity_scheme_name(card)
    scheme = delegation_scheme(card)
    delegation = (
        None
        if scheme is None
        else {
            "scheme": scheme.name,
            "device_authorization_url": scheme.device_authorization_url,
            "token_url": scheme.token_url,
            "metadata_url": scheme.metadata_url,
            "scopes": [{"id": s.id, "description": s.description} for s in scheme.scopes],
        }
    )
    if args.json:
        summary = {
            "name": card.name,
            "description": card.description,
            "card_url": card.url,
            "interface_url": interface,
            "identity_scheme": identity,
            "delegation": delegation,
            "skills": [dict(skill) for skill in card.skills],
        }
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        _reconfigure_output()
        print(card.name)
        if card.description:
            print(f"  {card.description}")
        print(f"card:        {card.url}")
        print(f"interface:   {interface}")
        print(f"identity:    {identity + ' (Bearer JWT)' if identity else 'none'}")
        if scheme is None:
            print("delegation:  none (PACT Identity only)")
        else:
            print(f"delegation:  {scheme.name} (OAuth device code), scopes:")
            width = max(len(s.id) for s in scheme.scopes) if scheme.scopes else 0
            for scope in scheme.scopes:
                print(f"  {scope.id.ljust(width)}  {scope.description}")
    if identity is None:
        raise CommandError(
            "not a PACT card: no httpAuthSecurityScheme Bearer listed alone in a "
            "securityRequirements entry",
            1,
        )
    return 0


def _reconfigure_output() -> None:
    """Never fail on a console that cannot show a character (names, arrows, ellipses)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


# -- check ---------------------------------------------------------------------------------

_CHECK_HELP = """\
Run the PACT 1.0 conformance checks against a Provider over HTTP, as a registered personal
agent: --issuer and --key are its registered issuer and private key (the public half served
at its registered jwks_uri), --audience the audience the Provider assigned. URL is a Brand's
card URL or domain (as for `pactmw card`).

PACT Identity (the ground of the public suite, e2e/pact.test.ts): the Agent Card, replies
and contextId, retries, foreign contexts, ListTasks, task and unsupported routes, header
tolerance, unmatched routes before authentication, every authentication refusal (including
iss {ISSUER}/disabled-pa, which should be registered disabled or not at all) and malformed
bodies. --other-brand names a second Brand of the same Provider for the cross-Brand checks.

PACT Delegated (--delegated): the card's device-code scheme and its RFC 8414 metadata, the
step-up task for --ask, then the device flow: the checker prints the Brand's login link, a
person opens it, signs in and approves, and the checker checks the token, a delegated reply's
signed receipt and the refresh.

Output: one line per check (PASS or FAIL, its name, and for a failure what was expected and
what came back), then `N passed, M failed`; --json prints one JSON document instead.
Progress goes to stderr. Exit status 0 when every check passes, 1 when any fails, 2 for bad
usage (unreadable key, bad URL).
"""


def _add_check(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "check",
        help="run the PACT conformance checks against a Provider",
        description=_CHECK_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", metavar="URL", help="the Brand's card URL or domain")
    parser.add_argument("--issuer", required=True, metavar="ISS", help="the registered issuer")
    parser.add_argument("--key", required=True, metavar="PRIVATE.jwk", help="its private key")
    parser.add_argument(
        "--audience", required=True, metavar="AUD", help="the audience the Provider assigned"
    )
    parser.add_argument(
        "--other-brand", metavar="CARD_URL", help="another Brand of the same Provider"
    )
    parser.add_argument(
        "--delegated", action="store_true", help="also check PACT Delegated (needs a person)"
    )
    parser.add_argument(
        "--ask",
        metavar="TEXT",
        default=None,
        help="with --delegated: a message that needs delegated scopes "
        "(default: 'Can you show my orders and my account?')",
    )
    parser.add_argument(
        "--scope",
        action="append",
        default=[],
        metavar="ID",
        help="with --delegated: a scope to request (repeatable; default: every scope on the card)",
    )
    parser.add_argument(
        "--approval-timeout",
        type=_positive_seconds,
        metavar="S",
        help="with --delegated: how long to wait for the person (default: until the code expires)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=10.0,
        metavar="S",
        help="seconds to wait for each answer (default: 10)",
    )
    parser.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    from pactmw.check import (
        DEFAULT_ASK,
        Checker,
        CheckResult,
        Progress,
        results_json,
        summary_line,
    )

    signer = _load_signer(args.key, args.issuer)
    url = _card_url(args.url, "URL")
    other = _card_url(args.other_brand, "--other-brand") if args.other_brand else None
    if not args.delegated and (args.ask is not None or args.scope or args.approval_timeout):
        raise CommandError("--ask, --scope and --approval-timeout go with --delegated")
    _reconfigure_output()

    def report(result: CheckResult) -> None:
        if not args.json:
            print(result.line(), flush=True)

    checker = Checker(
        url,
        signer,
        args.audience,
        other_card_url=other,
        delegated=args.delegated,
        ask=args.ask if args.ask is not None else DEFAULT_ASK,
        scopes=args.scope,
        approval_timeout=args.approval_timeout,
        timeout=args.timeout,
        report=report,
        progress=Progress(sys.stderr),
    )
    results = checker.run()
    if args.json:
        print(json.dumps(results_json(url, results), indent=2, ensure_ascii=False))
    else:
        print(summary_line(results), flush=True)
    return 0 if results and all(result.passed for result in results) else 1


# -- the parser ----------------------------------------------------------------------------

SUBCOMMANDS: tuple[Callable[[SubParsers], None], ...] = (
    _add_serve,
    _add_grants,
    _add_demo,
    _add_keygen,
    _add_token,
    _add_card,
    _add_check,
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
