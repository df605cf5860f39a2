"""Bounded, SSRF-aware HTTP GET for key material (JWKS, OIDC discovery, DID documents).

Verifiers fetch URLs that come from configuration or from token issuers, so the fetch is
deliberately narrow: https only (http only to loopback when allowed), every resolved address
checked and then connected to directly (no second DNS lookup an attacker could rebind),
no redirects, a total deadline and a body cap.

Two hooks exist for deployments and tests that must reach a known host at a known place
without weakening any of that: `FetchPolicy.tls_context` (the trust store to verify servers
with, e.g. a private CA) and `FetchPolicy.connect_to` (host name -> address and port, as
curl's `--connect-to`: the URL, the `Host` header and TLS SNI and certificate checks keep the
name; only the socket goes elsewhere, and the address must still pass the policy).
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from attrs import field, frozen

from pactmw.core.encoding import is_ascii_digits
from pactmw.core.errors import FetchError, MalformedInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: `FetchPolicy.connect_to` as stored: (lower-cased host name, (address, port)) pairs.
ConnectTo = tuple[tuple[str, tuple[IPAddress, int]], ...]


def _connect_to(value: Mapping[str, tuple[str, int]]) -> ConnectTo:
    """Check and freeze a `connect_to` map: each target an IP literal and a TCP port.

    A name is not allowed as a target: the point of the map is a fixed address, and a name
    would bring back the DNS lookup (and its rebinding) that the fetch otherwise avoids.
    """
    pairs: list[tuple[str, tuple[IPAddress, int]]] = []
    for host, target in value.items():
        try:
            address_text, port = target
            address = ipaddress.ip_address(address_text)
        except (TypeError, ValueError) as exc:
            raise MalformedInput(
                f"FetchPolicy.connect_to[{host!r}] must be (IP address, port), got {target!r}"
            ) from exc
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise MalformedInput(f"FetchPolicy.connect_to[{host!r}] has an invalid port {port!r}")
        pairs.append((host.lower(), (address, port)))
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def parse_networks(value: Iterable[IPNetwork | str]) -> tuple[IPNetwork, ...]:
    """Check and freeze `FetchPolicy.allowed_networks`: networks, or their CIDR text (as the
    `allowed_jwks_networks` setting writes them). Checked here, as the policy is made: a
    string left in the tuple would raise `TypeError` inside every fetch instead."""
    if isinstance(value, (str, bytes)):
        raise MalformedInput(
            f"FetchPolicy.allowed_networks must be a list of networks, not {value!r}"
        )
    parsed: list[IPNetwork] = []
    for item in value:
        if isinstance(item, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
            parsed.append(item)
            continue
        try:
            if not isinstance(item, str):
                raise TypeError
            parsed.append(ipaddress.ip_network(item))
        except (TypeError, ValueError) as exc:
            raise MalformedInput(
                f"FetchPolicy.allowed_networks: {item!r} is not a network (CIDR, e.g. '10.0.0.0/8')"
            ) from exc
    return tuple(parsed)


@frozen
class FetchPolicy:
    """Where and how key material may be fetched from.

    `allow_http_on_loopback` is for local development and tests: plain http to 127.0.0.0/8 or
    ::1. `allowed_networks` lists non-public networks that may be reached (for example an
    internal JWKS host), as networks or CIDR text (`["10.0.0.0/8"]`); everything else that is
    not a public address is refused.

    `tls_context` is the `ssl.SSLContext` https servers are verified with (default: the
    system's trust store, a fresh `ssl.create_default_context()`); give one that trusts a
    private CA rather than turning verification off. `connect_to` maps a host name to the
    `(IP address, port)` to connect to instead of resolving it; the address must still be
    allowed by this policy (`allowed_networks` for a private or loopback one).
    """

    timeout: float = 5.0
    max_bytes: int = 64 * 1024
    allow_http_on_loopback: bool = False
    allowed_networks: tuple[IPNetwork, ...] = field(default=(), converter=parse_networks)
    user_agent: str = "pactmw"
    tls_context: ssl.SSLContext | None = field(default=None, repr=False)
    connect_to: ConnectTo = field(factory=dict, converter=_connect_to)

    def address_allowed(self, address: IPAddress) -> bool:
        """Whether a fetch may connect to `address`: one of `allowed_networks`, loopback when
        `allow_http_on_loopback`, else a public (global) address only."""
        if any(address in network for network in self.allowed_networks):
            return True
        if address.is_loopback:
            return self.allow_http_on_loopback
        return address.is_global

    def target(self, host: str, port: int) -> tuple[list[IPAddress], int]:
        """The addresses to connect to for `host` and the port: `connect_to`'s, or DNS's."""
        lowered = host.lower()
        for name, (address, mapped_port) in self.connect_to:
            if name == lowered:
                return [address], mapped_port
        return _resolve(host, port), port


@frozen
class FetchResponse:
    """An HTTP answer: status, lower-cased headers, body (at most the policy's cap)."""

    body: bytes = field(repr=False)
    headers: Mapping[str, str]
    status: int = 200


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:  # UnicodeError: the name fails IDNA encoding
        raise FetchError(f"cannot resolve {host}") from exc
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP connection to an address chosen in advance, optionally wrapped in TLS."""

    def __init__(
        self,
        host: str,
        port: int,
        address: tuple[IPAddress, int],
        timeout: float,
        tls: ssl.SSLContext | None,
    ) -> None:
        # `port` is the URL's (it goes into the Host header); `address` is where to connect.
        super().__init__(host, port, timeout=timeout)
        self._address = address
        self._tls = tls
        self._deadline = time.monotonic() + timeout

    def connect(self) -> None:
        # Connect and TLS handshake keep to the exchange's deadline themselves: the watchdog
        # can cut a connection only once there is one, and each step given a whole timeout
        # let a slow connect and a silent handshake hold the caller for two.
        address, port = self._address
        sock = socket.create_connection((str(address), port), self._time_left())
        if self._tls is not None:
            try:
                sock.settimeout(self._time_left())
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        self.sock = self.kept_socket = sock

    def _time_left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left

    kept_socket: socket.socket | None = None  # http.client drops `sock` once a response starts

    aborted = False

    def abort(self) -> None:
        """Cut the connection from another thread, waking any blocked read.

        `aborted` is set before the cut, so a read that fails because of it sees the flag.
        """
        self.aborted = True
        if self.kept_socket is not None:
            with contextlib.suppress(OSError):
                self.kept_socket.shutdown(socket.SHUT_RDWR)


def http_request(
    method: str,
    url: str,
    policy: FetchPolicy,
    *,
    body: bytes | None = None,
    content_type: str = "application/json",
    accept: str = "application/json",
    headers: Mapping[str, str] | None = None,
) -> FetchResponse:
    """One request under `policy`; any status is returned, `FetchError` when there is none.

    `headers` are added to the request (for example `Authorization` for a broker call).

    Every resolved address is checked against the policy and then connected to directly (no
    second DNS lookup), https only (plain http to loopback when allowed), no redirects
    followed, one deadline for the whole exchange, a body cap. Blocking: async callers run it
    in a worker thread.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:  # e.g. an unbalanced bracketed IPv6 host, a bad port
        raise FetchError("invalid URL") from exc
    if not host or parts.username is not None or parts.password is not None:
        raise FetchError("URL must name a host and carry no credentials")
    if parts.scheme not in ("https", "http"):
        raise FetchError("only https URLs may be fetched")
    tls = parts.scheme == "https"
    port = port or (443 if tls else 80)
    addresses, connect_port = policy.target(host, port)
    if not addresses or not all(policy.address_allowed(a) for a in addresses):
        raise FetchError(f"{host} resolves to an address that may not be fetched")
    if not tls and not all(a.is_loopback for a in addresses):
        raise FetchError("plain http is allowed only to loopback")
    context = (policy.tls_context or ssl.create_default_context()) if tls else None
    connection = _PinnedConnection(
        host, port, (addresses[0], connect_port), policy.timeout, context
    )
    # One deadline for the whole exchange: per-read socket timeouts alone would let a server
    # that drips the status line, headers or body a byte at a time hold this thread forever.
    watchdog = threading.Timer(policy.timeout, connection.abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        sent = {"Accept": accept, "User-Agent": policy.user_agent}
        if body is not None:
            sent["Content-Type"] = content_type
        sent.update(headers or {})
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        declared = response.getheader("Content-Length")
        # ASCII digits only: "²" (latin-1 0xB2) passes `isdigit()` but not `int()`.
        if declared is not None and is_ascii_digits(declared) and int(declared) > policy.max_bytes:
            raise FetchError(
                f"{url} body larger than {policy.max_bytes} bytes", status=response.status
            )
        chunks: list[bytes] = []
        received = 0
        while chunk := response.read1(16 * 1024):
            received += len(chunk)
            if received > policy.max_bytes:
                raise FetchError(
                    f"{url} body larger than {policy.max_bytes} bytes", status=response.status
                )
            chunks.append(chunk)
        if connection.aborted:
            # The watchdog fired: what was read may be cut short, so none of it is trusted.
            raise _failure(url, policy, None, aborted=True)
        return FetchResponse(
            body=b"".join(chunks),
            headers={name.lower(): value for name, value in response.getheaders()},
            status=response.status,
        )
    except (OSError, http.client.HTTPException) as exc:
        raise _failure(url, policy, exc, aborted=connection.aborted) from exc
    finally:
        watchdog.cancel()
        connection.close()


def _failure(
    url: str, policy: FetchPolicy, exc: BaseException | None, *, aborted: bool
) -> FetchError:
    """What a failed exchange is called. A timeout is one whichever clock ran out first: the
    watchdog's deadline (`aborted`) or the socket's own timeout (`TimeoutError`), both
    `policy.timeout`; on a loaded machine either can."""
    if aborted or isinstance(exc, TimeoutError):
        return FetchError(f"{url} took longer than {policy.timeout} s")
    return FetchError(f"{url} could not be fetched: {type(exc).__name__}")


def http_get(url: str, policy: FetchPolicy, *, accept: str = "application/json") -> FetchResponse:
    """GET `url` under `policy` (see `http_request`); only a 200 answer is returned.

    Anything else, redirects included (the configured URL is the one that is trusted), is a
    `FetchError`.
    """
    response = http_request("GET", url, policy, accept=accept)
    if response.status != 200:
        raise FetchError(f"{url} answered HTTP {response.status}", status=response.status)
    return response


def max_age(headers: Mapping[str, str]) -> float | None:
    """The `max-age` of a `Cache-Control` header, if any (`no-store`/`no-cache` give 0)."""
    value = headers.get("cache-control")
    if not value:
        return None
    seconds: float | None = None
    for directive in value.split(","):
        name, _, arg = directive.strip().partition("=")
        name = name.strip().lower()
        if name in ("no-store", "no-cache"):
            return 0.0
        if name == "max-age" and is_ascii_digits(arg.strip().strip('"')):
            seconds = float(arg.strip().strip('"'))
    return seconds


def retry_after(
    value: str | None, *, date: str | None = None, now: float | None = None
) -> float | None:
    """A `Retry-After` header in seconds: delta-seconds or an HTTP-date, or None when absent
    or unreadable (RFC 9110 §10.2.3).

    An HTTP-date is measured against the answer's own `Date` header when given, so the
    caller's clock skew does not matter; otherwise against `now` (default: the wall clock).
    """
    text = (value or "").strip()
    if not text:
        return None
    if is_ascii_digits(text):
        return float(text)
    target = _http_date(text)
    if target is None:
        return None
    reference = _http_date(date) if date else None
    if reference is None:
        reference = time.time() if now is None else now
    return max(0.0, target - reference)


def _http_date(text: str) -> float | None:
    try:
        return parsedate_to_datetime(text).timestamp()
    # OverflowError: a year past what `datetime` holds (a sender's choice, not our bug).
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


__all__ = [
    "ConnectTo",
    "FetchPolicy",
    "FetchResponse",
    "IPAddress",
    "IPNetwork",
    "http_get",
    "http_request",
    "max_age",
    "parse_networks",
    "retry_after",
]
