"""`pactmw serve`: a Provider from a TOML configuration, on uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import ipaddress
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pactmw.cli._admin import STORE_OPEN_ERRORS, load_settings
from pactmw.cli._common import CONFIG, Command, CommandError, log_to_stderr, option
from pactmw.config import ConfigError
from pactmw.core.errors import MissingExtra

if TYPE_CHECKING:
    from pactmw.provider import ProviderSettings

_SERVE_HELP = """\
Serve the Brands of a TOML configuration as a PACT 1.0 Provider (A2A HTTP+JSON) on uvicorn.

The TOML file holds the same keys as Django's PACTMW setting: base_url, audience, agents,
brands, store, ... (see the documentation's Configuration and CLI pages, or
examples/pactmw.toml in the source distribution). Brand handlers are import paths
('package.module:function') resolved from the current directory first, so run the command
from the directory that holds your bot's package. A relative sqlite store path
(sqlite:///.pactmw/pactmw.db, the default) is relative to the current directory too.

--host and --port say where to listen; the URLs in the Agent Cards come from base_url, which
must be the address personal agents reach (a proxy's, if there is one). Behind a proxy, name
it in --forwarded-allow-ips so that the per-address limits (the consent pages) see each
client's address, not the proxy's; a client that is not a trusted proxy cannot pick its
address with X-Forwarded-For. Needs uvicorn and Starlette: pip install "pactmw[serve]".
"""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def require_serve_extra(command: str) -> None:
    """Fail with one line naming the `serve` extra unless uvicorn and Starlette import.

    Neither is a dependency of pactmw: only `pactmw serve` (and the demo, which runs it) needs
    them, so the other subcommands work from a bare `pip install pactmw`. Importing them,
    rather than only looking for them, also catches an installation too broken to import.
    """
    missing = []
    for name in ("uvicorn", "starlette"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        needs = " and ".join(missing)
        raise CommandError(str(MissingExtra(command, needs, "serve")), bare=True)


def port_number(text: str) -> int:
    """`--port`: a TCP port, checked as an argument (the socket would fail with a traceback)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 0 to 65535: {text!r}")
    return port


def proxy_addresses(text: str) -> str:
    """`--forwarded-allow-ips`: '*', or IP addresses and networks separated by commas.

    Checked as an argument: uvicorn keeps any other entry as a name that no TCP peer has, so
    a typo (a host name, a network with host bits set) would trust no proxy, silently, and
    the per-address limits would count every client as the proxy.
    """
    if text.strip() == "*":
        return text
    for entry in (part.strip() for part in text.split(",")):
        try:
            if "/" in entry:
                ipaddress.ip_network(entry)
            elif entry:  # an empty entry matches nothing, as uvicorn reads it
                ipaddress.ip_address(entry)
        except ValueError:
            problem = f"not an IP address or network: {entry!r}"
            if entry == "*":
                problem += " ('*' alone trusts every peer)"
            with contextlib.suppress(ValueError):
                network = ipaddress.ip_network(entry, strict=False)
                problem = f"{entry!r} has host bits set (the network is {network})"
            raise argparse.ArgumentTypeError(problem) from None
    return text


def run(args: argparse.Namespace) -> int:
    require_serve_extra("pactmw serve")
    if args.forwarded_allow_ips is None and "FORWARDED_ALLOW_IPS" in os.environ:
        try:  # uvicorn's default for the option: the option's check
            proxy_addresses(os.environ["FORWARDED_ALLOW_IPS"])
        except argparse.ArgumentTypeError as exc:
            raise CommandError(f"FORWARDED_ALLOW_IPS: {exc}") from None
    settings = load_settings(args.config)
    if not settings.brands:
        raise CommandError(f"{args.config}: no [brands.ID] table, so there is nothing to serve")
    listeners = _listen(args.host, args.port)
    try:
        return _serve(args, settings, listeners)
    finally:
        for listener in listeners:  # uvicorn closes them too, once it has started
            listener.close()


def _serve(
    args: argparse.Namespace, settings: ProviderSettings, listeners: list[socket.socket]
) -> int:
    # Imported here: the other subcommands must not need the Provider's dependencies loaded.
    import uvicorn

    from pactmw.adapters.asgi import A2AProviderApp
    from pactmw.cli._listening_server import ListeningServer
    from pactmw.provider import Provider, card_url
    from pactmw.provider.app import warn_if_signed_in_user_unknown
    from pactmw.store import parse_store_url

    try:
        provider = Provider.from_settings(settings)
    except ConfigError:
        raise  # it names its key (signing_keys, data_dir): not a store error
    except STORE_OPEN_ERRORS as exc:
        raise CommandError(f"store: {exc}") from None

    level = "DEBUG" if args.log_level == "trace" else args.log_level.upper()
    log_to_stderr("pactmw", level)
    log = logging.getLogger("pactmw.cli")
    log.info("store: %s", parse_store_url(settings.store).label)
    for brand in settings.brands:
        log.info("brand %r: card at %s", brand.id, card_url(settings.base_url, brand.id))
    # The ports bound, not --port: `--port 0` has the system choose one (per address).
    _check_base_url(settings.base_url, {listener.getsockname()[1] for listener in listeners}, log)

    # No app of the operator's is served here, so nobody is ever signed in through one: said
    # once, in words for serve (the app's own warning would ask for a current_user).
    warn_if_signed_in_user_unknown(
        provider,
        "current_user",
        reason="pactmw serve serves no app of yours to say who is signed in",
        remedy="Mount the Provider in your app instead (a2a_routes(provider, current_user=...))",
    )
    config = uvicorn.Config(
        A2AProviderApp(provider, current_user=_nobody_signed_in),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        # uvicorn formats each request's access line (client address, quoted path) before
        # its logger drops it below `info`: above that level, nothing would be logged anyway.
        access_log=LOG_LEVELS.index(args.log_level) >= LOG_LEVELS.index("info"),
        lifespan="on",
        # The client address (request.client) is the peer's, or the last address in
        # X-Forwarded-For that a trusted proxy added: what the per-address limits count.
        proxy_headers=True,
        forwarded_allow_ips=args.forwarded_allow_ips,
    )
    server = ListeningServer(
        config, log, [_address(listener.getsockname()) for listener in listeners]
    )
    try:
        with _stop_signals():
            server.run(sockets=listeners)
    except _Stopped as stopped:
        log.info("stopped by %s", signal.Signals(stopped.signum).name)
        return 0
    except SystemExit as exc:  # uvicorn exits (status 3) when the app's startup fails
        return 0 if exc.code in (0, None) else 1
    finally:
        provider.close()
    return 0 if server.started else 1


#: What to say, and which option to change, for a socket that cannot listen; any other error
#: says the system's words and names both options.
_LISTEN_PROBLEMS = {
    errno.EADDRINUSE: ("address already in use", "--port chooses another"),
    errno.EADDRNOTAVAIL: (
        "no interface of this machine has this address",
        "--host chooses another",
    ),
    errno.EACCES: (
        "permission denied (a port below 1024 needs privileges)",
        "--port chooses another",
    ),
}


def _listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address `host` resolves to ('' for all interfaces), as
    uvicorn's own would (asyncio's `create_server`), for `uvicorn.Server.run(sockets=...)`.

    Bound here, before anything else starts, so that an address that cannot be had is one
    line naming it and the option that changes it (exit status 1); uvicorn would log it amid
    its startup lines and exit. Bound, not listening: uvicorn listens once it serves, so a
    connection is refused until the Provider is built and can answer it (a readiness probe
    that connects, the demo's included, does not pass early), as without these sockets.
    """
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        unknown = exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None))
        problem = "unknown host" if unknown else exc.strerror
        raise CommandError(
            f"cannot listen on {host}: {problem} (--host chooses another)", 1
        ) from None
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            listener = socket.socket(family, kind, proto)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio: one socket per family, not dual stack
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                listener.bind(address)
            except OSError as exc:
                problem, option = _LISTEN_PROBLEMS.get(
                    exc.errno or 0, (exc.strerror or str(exc), "--host and --port choose another")
                )
                where = _address((address[0], port))
                raise CommandError(f"cannot listen on {where}: {problem} ({option})", 1) from None
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    return listeners


def _address(sockname: tuple[Any, ...]) -> str:
    """`host:port` of a socket address, an IPv6 host in brackets."""
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Stopped(BaseException):
    """SIGTERM or SIGINT after uvicorn's graceful shutdown (see `_stop_signals`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _nobody_signed_in(connection: object) -> None:
    """The signed-in user of the app `pactmw serve` serves: there is none."""
    return None


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


def _check_base_url(base_url: str, ports: set[int], log: logging.Logger) -> None:
    """Warn when a loopback base_url names another port than those served (a likely typo).

    A public base_url (behind a proxy) legitimately differs from --host/--port.
    """
    url = urlsplit(base_url)
    if url.hostname not in ("127.0.0.1", "localhost", "::1"):
        return
    advertised = url.port or (443 if url.scheme == "https" else 80)
    if advertised not in ports:
        log.warning(
            "base_url %s names port %d but this server listens on %s: "
            "the Agent Cards send personal agents to port %d",
            base_url,
            advertised,
            ", ".join(str(port) for port in sorted(ports)),
            advertised,
        )


COMMAND = Command(
    "serve",
    "serve a Provider from a TOML configuration (needs uvicorn)",
    _SERVE_HELP,
    run,
    options=(
        CONFIG,
        option("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)"),
        option(
            "--port",
            type=port_number,
            default=8000,
            help="TCP port to listen on (default: %(default)s)",
        ),
        option(
            "--forwarded-allow-ips",
            type=proxy_addresses,
            default=None,
            metavar="ADDRESSES",
            help="comma-separated addresses or networks of the proxies trusted to report the "
            "client's address in X-Forwarded-For; '*' trusts every peer, so only when nothing "
            "but the proxy can reach this port (default: $FORWARDED_ALLOW_IPS, else "
            "127.0.0.1,::1, as uvicorn)",
        ),
        option(
            "--log-level",
            default="info",
            choices=LOG_LEVELS,
            help="uvicorn's and pactmw's log level (default: %(default)s)",
        ),
    ),
)


__all__ = [
    "COMMAND",
    "LOG_LEVELS",
    "port_number",
    "proxy_addresses",
    "require_serve_extra",
    "run",
]
