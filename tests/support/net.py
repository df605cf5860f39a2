"""Ports on 127.0.0.1: a free one, one where nothing listens, one slow to accept and silent,
waiting for a listener, an HTTP client that never reuses a connection the server may be
closing, and a POST on a connection of its own for a body the server may leave unread."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

__all__ = [
    "aunread_body_post",
    "closed_port_url",
    "free_port",
    "loopback_async_client",
    "loopback_client",
    "slow_then_silent_port",
    "unread_body_post",
    "wait_for_port",
]

# Servers here (uvicorn, gunicorn, Werkzeug) close a keep-alive connection after about 5 s idle.
# A client that reuses a connection idle that long can send into the server's close and get
# "connection reset by peer" (the race that failed CI once). Dropping idle connections after
# 1 s on our side keeps every test clear of it.
CLIENT_KEEPALIVE_EXPIRY = 1.0


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (nothing listens on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def closed_port_url(scheme: str = "http") -> str:
    """A URL on 127.0.0.1 where nothing listens (connections are refused)."""
    return f"{scheme}://127.0.0.1:{free_port()}"


@contextmanager
def slow_then_silent_port(accept_after: float = 0.5) -> Iterator[int]:
    """A port on 127.0.0.1 whose connect takes about a second, then that never says a word
    (no TLS handshake, no answer): for deadlines that must span connect and what follows.

    Its accept queue is full, so the kernel drops a client's SYN until, after `accept_after`
    seconds, the queue is emptied; the client's SYN sent again (Linux: ~1 s later) then
    connects, and that connection is held open, unread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port: int = listener.getsockname()[1]
    fillers = [socket.socket() for _ in range(3)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
    listener.settimeout(5)
    held: list[socket.socket] = []

    def accept_late() -> None:
        time.sleep(accept_after)
        for _ in range(len(fillers) + 1):  # the fillers, then the client
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept_late, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        thread.join(timeout=10)
        for sock in [*fillers, *held, listener]:
            sock.close()


def wait_for_port(
    port: int, timeout: float = 30.0, process: subprocess.Popen[Any] | None = None
) -> None:
    """Wait until 127.0.0.1:`port` accepts connections; fail after `timeout` seconds.

    With `process`, fail at once when that process exits first.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server process exited with {process.returncode}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


#: The options of `loopback_client` that belong to its transport, where the connection pool is.
_TRANSPORT_OPTIONS = frozenset({"verify", "cert", "local_address", "uds", "retries"})


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the client's options, its transport's), the pool's limits added to the transport's.

    An httpx client given a `transport` ignores its own `limits`, so the limits must go on
    the transport itself, and a caller's `transport` is refused."""
    if "transport" in options or "limits" in options:
        raise TypeError("give loopback_client the transport's options, not a transport or limits")
    transport = {name: options.pop(name) for name in _TRANSPORT_OPTIONS & options.keys()}
    transport["limits"] = httpx.Limits(keepalive_expiry=CLIENT_KEEPALIVE_EXPIRY)
    return options, transport


def loopback_client(**options: Any) -> httpx.Client:
    """An `httpx.Client` for servers the tests start: idle connections are dropped after
    `CLIENT_KEEPALIVE_EXPIRY` seconds, well before any server closes them. `options` are
    `httpx.Client`'s and `httpx.HTTPTransport`'s (`verify`, `local_address`, ...).
    """
    client, transport = _split(options)
    return httpx.Client(transport=httpx.HTTPTransport(**transport), **client)


def loopback_async_client(**options: Any) -> httpx.AsyncClient:
    """`loopback_client` for asyncio (an SDK's `httpx.AsyncClient`)."""
    client, transport = _split(options)
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(**transport), **client)


def unread_body_post(client: httpx.Client, url: str, **options: Any) -> httpx.Response:
    """POST on a connection of its own, closed after the answer: for a body the server may
    answer before reading it (411 or 413 on its length, 401 before a large upload).

    Such an answer leaves the rest of the body on the connection, and the server may close
    it or read that rest as the next request: Django's runserver answers a chunked body 411
    with the connection kept open and the chunks unread, so a pooled connection reused for
    the next request is "disconnected without sending a response" (CI, django-wsgi). Out of
    `client`'s pool, that connection cannot reach another request. `options` are
    `httpx.Client.post`'s; the new client has `client`'s base URL, headers, cookies, timeout
    and redirect choice (cookies it is sent back stay with it); plain HTTP only, as a
    transport's options (`verify`) cannot be read back from `client`.
    """
    with loopback_client(
        base_url=client.base_url,
        headers=client.headers,
        cookies=client.cookies,
        timeout=client.timeout,
        follow_redirects=client.follow_redirects,
    ) as own:
        return own.post(url, **options)


async def aunread_body_post(
    new_client: Callable[[], httpx.AsyncClient], url: str, **options: Any
) -> httpx.Response:
    """`unread_body_post` for asyncio, on a client `new_client` makes for this POST alone and
    closed after the answer (e.g. `PoppyWorld.http`): an async client's transport (its TLS
    trust, a test world's dialer) cannot be copied from another client, so the caller names
    how a new one is made. `options` are `httpx.AsyncClient.post`'s."""
    async with new_client() as own:
        return await own.post(url, **options)
