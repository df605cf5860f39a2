"""The two transports: move one request's bytes over a socket and back. Nothing else.

Both speak through the same sans-I/O codec (`pactmw.client.http`), open one connection per
request (`Connection: close`; no pool to go stale between a personal agent's turns) and bound
the whole exchange by one deadline, so a server that drips bytes cannot hold a caller.

* `SyncTransport`: a blocking socket (`ssl` for https).
* `AsyncTransport`: `asyncio.open_connection` with the same `ssl` context. Chosen over
  `asyncio.to_thread` around the blocking transport because it needs no worker thread per
  request (a personal agent platform may hold many conversations at once, and the default
  executor has only a few dozen threads) and because cancelling the awaiting task really
  stops the exchange: a thread blocked in `recv` cannot be cancelled and would run on until
  its timeout. The cost of native asyncio is an HTTP parser, which both transports share.

Failures become `NetworkError`: `maybe_delivered=False` when the connection (or the TLS
handshake) failed, so the request never left; True once any byte of it was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from typing import Protocol

from pactmw.client.errors import NetworkError
from pactmw.client.http import (
    DEFAULT_MAX_BODY,
    HttpRequest,
    HttpResponse,
    ProtocolViolation,
    ResponseParser,
    ResponseTooLarge,
    check_url,
    encode_request,
)

DEFAULT_TIMEOUT = 30.0
_READ_SIZE = 64 * 1024
_CLOSE_WAIT = 1.0  #: the longest an orderly TLS close is waited for


class Transport(Protocol):
    """What a blocking client needs: send one request, get one complete response."""

    def send(self, request: HttpRequest) -> HttpResponse: ...


class AsyncTransport(Protocol):
    """What an asyncio client needs: send one request, get one complete response."""

    async def send(self, request: HttpRequest) -> HttpResponse: ...


def _address(request: HttpRequest) -> tuple[str, int, bool]:
    parts = check_url(request.url)
    tls = parts.scheme == "https"
    assert parts.hostname is not None  # check_url guarantees a host
    return parts.hostname, parts.port or (443 if tls else 80), tls


#: OpenSSL's reason when the first bytes back are not a TLS record: the server answered
#: plain HTTP (an https URL to a development server, `pactmw serve` included).
_PLAIN_HTTP_REASON = "WRONG_VERSION_NUMBER"


def _not_sent(host: str, port: int, exc: OSError) -> NetworkError:
    """A connection or TLS failure: nothing was sent. A bad certificate, or a server that
    answers without TLS, is not retried: a resend cannot change either."""
    if isinstance(exc, ssl.SSLError) and exc.reason == _PLAIN_HTTP_REASON:
        # OpenSSL's own words ("wrong version number") do not say what happened.
        return NetworkError(
            f"cannot connect to {host}:{port}: it answers without TLS (plain http? try http://)",
            maybe_delivered=False,
            retryable=False,
        )
    return NetworkError(
        f"cannot connect to {host}:{port}: {exc}",
        maybe_delivered=False,
        retryable=not isinstance(exc, ssl.SSLCertVerificationError),
    )


def _failed(request: HttpRequest, exc: Exception) -> NetworkError:
    """A failure once the request may have been sent; a too-large answer is not retried (a
    resend would download it again)."""
    return NetworkError(
        f"{request.method} {request.url} failed: {type(exc).__name__}: {exc}",
        maybe_delivered=True,
        retryable=not isinstance(exc, ResponseTooLarge),
    )


def _too_long(request: HttpRequest, timeout: float, *, maybe_delivered: bool) -> NetworkError:
    """The exchange outlasted `timeout`, in both transports' words."""
    return NetworkError(
        f"{request.method} {request.url} took longer than {timeout} s",
        maybe_delivered=maybe_delivered,
    )


class _Settings:
    """What both transports are configured with."""

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        ssl_context: ssl.SSLContext | None = None,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.max_body = max_body


class SyncTransport(_Settings):
    """Blocking HTTP/1.1 over `socket` + `ssl`. Thread-safe (it holds no connection).

    `timeout` bounds the whole exchange (connect, send, every read); `ssl_context` defaults
    to `ssl.create_default_context()` (system trust store, or `SSL_CERT_FILE`).
    """

    def send(self, request: HttpRequest) -> HttpResponse:
        host, port, tls = _address(request)
        payload = encode_request(request)
        deadline = time.monotonic() + self.timeout
        try:
            sock = _connect(host, port, deadline)
        except TimeoutError as exc:
            raise _too_long(request, self.timeout, maybe_delivered=False) from exc
        except OSError as exc:
            raise _not_sent(host, port, exc) from exc
        try:
            if tls:
                context = self.ssl_context or ssl.create_default_context()
                try:
                    sock.settimeout(_time_left(deadline))
                    sock = context.wrap_socket(sock, server_hostname=host)
                except TimeoutError as exc:  # the handshake outlasted what was left
                    raise _too_long(request, self.timeout, maybe_delivered=False) from exc
                except OSError as exc:
                    raise _not_sent(host, port, exc) from exc
            parser = ResponseParser(method=request.method, max_body=self.max_body)
            try:
                sock.settimeout(_time_left(deadline))
                sock.sendall(payload)  # one timeout for the whole of it (Python 3.5+)
                while not parser.done:
                    sock.settimeout(_time_left(deadline))
                    parser.feed(sock.recv(_READ_SIZE))
            except TimeoutError as exc:  # the deadline, or the socket's timeout at it
                raise _too_long(request, self.timeout, maybe_delivered=True) from exc
            except (OSError, ProtocolViolation) as exc:
                raise _failed(request, exc) from exc
            return parser.response(request.url)
        finally:
            sock.close()


def _time_left(deadline: float) -> float:
    """The seconds left before `deadline`; TimeoutError once none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _connect(host: str, port: int, deadline: float) -> socket.socket:
    """`socket.create_connection` within what is left of `deadline`: it gives every address
    it tries a whole timeout, and the TLS handshake after it got one more. The name lookup
    is the system resolver's, bounded by its own timeouts (a blocking lookup cannot be cut
    short without a thread; the async transport's can)."""
    errors: list[OSError] = []
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(_time_left(deadline))
            sock.connect(address)
        except TimeoutError:
            sock.close()
            raise  # the deadline is spent: no time for the next address
        except OSError as exc:
            sock.close()
            errors.append(exc)
        else:
            return sock
    raise errors[0] if errors else OSError(f"{host} has no address")


class AsyncioTransport(_Settings):
    """HTTP/1.1 over `asyncio.open_connection` (TLS through the same `ssl` context).

    Same behaviour and limits as `SyncTransport`; cancelling the caller closes the connection.
    """

    async def send(self, request: HttpRequest) -> HttpResponse:
        host, port, tls = _address(request)
        payload = encode_request(request)
        progress = {"connected": False}
        deadline = time.monotonic() + self.timeout
        try:
            return await asyncio.wait_for(
                self._exchange(request, host, port, tls, payload, progress, deadline),
                self.timeout,
            )
        except asyncio.TimeoutError as exc:
            raise _too_long(request, self.timeout, maybe_delivered=progress["connected"]) from exc

    async def _exchange(
        self,
        request: HttpRequest,
        host: str,
        port: int,
        tls: bool,
        payload: bytes,
        progress: dict[str, bool],
        deadline: float,
    ) -> HttpResponse:
        context = (self.ssl_context or ssl.create_default_context()) if tls else None
        try:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=context, server_hostname=host if tls else None
            )
        except OSError as exc:
            raise _not_sent(host, port, exc) from exc
        progress["connected"] = True
        parser = ResponseParser(method=request.method, max_body=self.max_body)
        try:
            writer.write(payload)
            await writer.drain()
            while not parser.done:
                parser.feed(await reader.read(_READ_SIZE))
            return parser.response(request.url)
        except (OSError, ProtocolViolation) as exc:
            raise _failed(request, exc) from exc
        finally:
            writer.close()
            # A TLS peer that vanishes or stays silent can make the close handshake raise or
            # linger: it gets what is left of the deadline (a second at most), then the
            # connection is dropped. A timed-out exchange is not held past its `timeout`.
            closed = False
            wait = min(_CLOSE_WAIT, deadline - time.monotonic())
            with contextlib.suppress(Exception):
                if wait > 0:
                    await asyncio.wait_for(writer.wait_closed(), wait)
                    closed = True
            if not closed:
                writer.transport.abort()


__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncTransport",
    "AsyncioTransport",
    "SyncTransport",
    "Transport",
]
