"""The sans-I/O HTTP codec and the URL rule every request obeys."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable

import pytest

from pactmw.client import (
    HTTPError,
    HttpRequest,
    NetworkError,
    SyncTransport,
    URLRefused,
    afetch_card,
    fetch_card,
)
from pactmw.client.errors import ERROR_TEXT_LIMIT
from pactmw.client.http import ProtocolViolation, ResponseParser, check_url, encode_request
from pactmw.client.transport import AsyncioTransport
from tests.client.support import RawServer, Route, StaticServer
from tests.support.jwks_server import JwksServer, Mode
from tests.support.net import closed_port_url, slow_then_silent_port
from tests.support.tls import TestCA


def parse(*chunks: bytes, method: str = "GET", max_body: int = 1024) -> ResponseParser:
    parser = ResponseParser(method=method, max_body=max_body)
    for chunk in chunks:
        parser.feed(chunk)
    return parser


@pytest.mark.parametrize(
    "url",
    [
        "https://shop.example/a2a/x",
        "http://127.0.0.1:8000/a",
        "http://127.5.0.1/a",
        "http://localhost:3000/a",
        "http://api.localhost/a",
        "http://[::1]:8000/a",
    ],
)
def test_allowed_urls(url: str) -> None:
    check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://shop.example/a",  # clear text across a network
        "http://10.0.0.5/a",
        "ftp://shop.example/a",
        "/relative/path",
        "https://user:pw@shop.example/a",
        "https://shop.example:99999/a",
        "https://[::1/a",
        "https://" + "a" * 64 + ".example/a",  # no resolver takes a 64-character label
        "https://shop..example/a",
        "https://shop.example/\ud800",  # a lone surrogate: no UTF-8 bytes to send
        "http://127.0.0.1:0/a",  # port 0 was taken as no port: the request went to port 80
    ],
)
def test_refused_urls(url: str) -> None:
    with pytest.raises(URLRefused):
        check_url(url)


def test_encode_request() -> None:
    request = HttpRequest(
        "POST",
        "https://shop.example/a2a/b%20c/message:send?x=1",
        headers=(("Authorization", "Bearer t"),),
        body=b"{}",
    )
    wire = encode_request(request)
    head, body = wire.split(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /a2a/b%20c/message:send?x=1 HTTP/1.1"
    assert "Host: shop.example" in lines
    assert "Connection: close" in lines
    assert "Content-Length: 2" in lines
    assert "Authorization: Bearer t" in lines
    assert body == b"{}"
    assert b"Host: 127.0.0.1:8080" in encode_request(HttpRequest("GET", "http://127.0.0.1:8080/"))
    assert b"Host: [::1]:8080" in encode_request(HttpRequest("GET", "http://[::1]:8080/"))
    # A card's URL may hold any text: the wire gets ASCII only (IDNA host, UTF-8 escapes).
    wire = encode_request(HttpRequest("GET", "https://bücher.example/a b/€?q=é"))
    assert wire.startswith(b"GET /a%20b/%E2%82%AC?q=%C3%A9 HTTP/1.1\r\n")
    assert b"\r\nHost: xn--bcher-kva.example\r\n" in wire


@pytest.mark.parametrize(
    "headers",
    [
        (("X-Evil", "a\r\nInjected: 1"),),
        (("Bad Name", "v"),),
        (("Host", "other.example"),),
        (("Content-Length", "5"),),
    ],
)
def test_header_injection_refused(headers: tuple[tuple[str, str], ...]) -> None:
    with pytest.raises(ValueError, match="header"):
        encode_request(HttpRequest("GET", "https://shop.example/", headers=headers))


def test_repr_hides_tokens() -> None:
    request = HttpRequest("GET", "https://x.example/", headers=(("Authorization", "Bearer s3"),))
    assert "s3" not in repr(request)


def test_content_length_body_in_pieces() -> None:
    parser = parse(b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: 5\r\nX-A: b\r\n\r\nhe", b"llo")
    response = parser.response("u")
    assert (response.status, response.body, response.header("x-a")) == (200, b"hello", "b")


def test_chunked_body_with_extensions_and_trailers() -> None:
    parser = parse(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n",
        b"0\r\nTrailer: x\r\n\r\n",
    )
    assert parser.done
    assert parser.body == b"Wikipedia"


def test_read_to_close_and_interim_responses() -> None:
    parser = parse(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\nall of it")
    assert not parser.done
    parser.feed(b"")
    assert parser.done
    assert (parser.status, parser.body) == (200, b"all of it")


def test_no_body_statuses() -> None:
    assert parse(b"HTTP/1.1 204 No Content\r\n\r\n").done
    assert parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", method="HEAD").done


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ((b"",), "before any response"),
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b""), "middle"),
        ((b"SMTP ready\r\n\r\n",), "status line"),
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n",), "too large"),
        ((b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 2000,), "too large"),
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",), "length"),
        ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",), "transfer-encoding"),
        ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",), "chunk size"),
        ((b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000,), "headers too large"),
        # More digits than int() converts (4300): it raised a bare ValueError.
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 1" + b"0" * 5000 + b"\r\n\r\n",), "too large"),
    ],
)
def test_malformed_answers(chunks: tuple[bytes, ...], message: str) -> None:
    with pytest.raises(ProtocolViolation, match=message):
        parse(*chunks)


def test_connection_refused_was_not_delivered() -> None:
    request = HttpRequest("GET", f"{closed_port_url()}/")
    with pytest.raises(NetworkError) as caught:
        SyncTransport(timeout=2).send(request)
    assert caught.value.maybe_delivered is False
    with pytest.raises(NetworkError) as acaught:
        asyncio.run(AsyncioTransport(timeout=2).send(request))
    assert acaught.value.maybe_delivered is False


def test_silent_server_times_out_as_maybe_delivered() -> None:
    """A server that accepts and never answers: the whole exchange is bounded by `timeout`."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    accepted: list[socket.socket] = []

    def accept_two() -> None:
        for _ in range(2):
            accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept_two)
    thread.start()
    request = HttpRequest("GET", f"http://127.0.0.1:{listener.getsockname()[1]}/")
    try:
        # The same words in both (the blocking one said "failed: TimeoutError: timed out").
        took_too_long = f"GET {request.url} took longer than 0.3 s"
        with pytest.raises(NetworkError, match=f"^{re.escape(took_too_long)}$") as caught:
            SyncTransport(timeout=0.3).send(request)
        assert caught.value.maybe_delivered is True
        with pytest.raises(NetworkError, match=f"^{re.escape(took_too_long)}$") as acaught:
            asyncio.run(AsyncioTransport(timeout=0.3).send(request))
        assert acaught.value.maybe_delivered is True
    finally:
        thread.join(timeout=5)
        listener.close()
        for sock in accepted:
            sock.close()


def test_a_slow_connect_leaves_the_tls_handshake_only_what_is_left() -> None:
    """`timeout` bounds connect and TLS handshake together, as it bounds the rest: a connect
    that took most of it left the handshake a whole `timeout` more."""
    with slow_then_silent_port() as port:
        request = HttpRequest("GET", f"https://127.0.0.1:{port}/")
        started = time.monotonic()
        with pytest.raises(NetworkError) as caught:
            SyncTransport(timeout=1.6).send(request)
        took = time.monotonic() - started
    assert caught.value.maybe_delivered is False
    assert str(caught.value) == f"GET {request.url} took longer than 1.6 s"
    assert took < 1.6 + 0.5, took  # it was connect (~1 s) plus a whole 1.6 s handshake


def test_a_silent_tls_server_holds_neither_transport_past_its_timeout() -> None:
    """After the handshake the server reads the request and says nothing, not even the TLS
    close: the async transport waited a second more for that close after its timeout."""
    authority = TestCA()
    server_side = authority.server_context("127.0.0.1")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    held: list[socket.socket] = []

    def read_then_say_nothing() -> None:
        for _ in range(2):
            try:
                connection = server_side.wrap_socket(listener.accept()[0], server_side=True)
                connection.recv(65536)
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=read_then_say_nothing)
    thread.start()
    request = HttpRequest("GET", f"https://127.0.0.1:{listener.getsockname()[1]}/")
    trusted = authority.client_context()
    try:
        asynchronous = AsyncioTransport(timeout=0.5, ssl_context=trusted)
        sends: dict[str, Callable[[], object]] = {
            "async": lambda: asyncio.run(asynchronous.send(request)),
            "blocking": lambda: SyncTransport(timeout=0.5, ssl_context=trusted).send(request),
        }
        for name, send in sends.items():
            started = time.monotonic()
            with pytest.raises(NetworkError) as caught:
                send()
            took = time.monotonic() - started
            assert str(caught.value) == f"GET {request.url} took longer than 0.5 s"
            assert caught.value.maybe_delivered is True
            assert took < 0.5 + 0.4, (name, took)
    finally:
        thread.join(timeout=10)
        for sock in [*held, listener]:
            sock.close()


def test_https_in_both_transports() -> None:
    """TLS with the same `ssl` context in both transports; an untrusted certificate fails at
    once, without resends (a resend cannot fix it)."""
    card = {
        "name": "TLS Shop",
        "description": "",
        "supportedInterfaces": [
            {
                "url": "https://127.0.0.1/a2a/x",
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": "1.0",
            }
        ],
        "version": "1",
        "capabilities": {},
        "defaultInputModes": [],
        "defaultOutputModes": [],
        "skills": [],
    }
    with JwksServer(tls=True) as server:
        server.set_json("/.well-known/agent-card.json", card)
        url = server.url_for("/.well-known/agent-card.json")
        trusted = ssl.create_default_context(cafile=server.ca_file)
        assert fetch_card(url, transport=SyncTransport(ssl_context=trusted)).name == "TLS Shop"
        fetched = asyncio.run(afetch_card(url, transport=AsyncioTransport(ssl_context=trusted)))
        assert fetched.name == "TLS Shop"

        slept: list[float] = []
        with pytest.raises(NetworkError) as caught:
            fetch_card(url, transport=SyncTransport(), sleep=slept.append)
        assert (caught.value.retryable, caught.value.maybe_delivered, slept) == (False, False, [])

        async def asleep(seconds: float) -> None:
            slept.append(seconds)

        with pytest.raises(NetworkError) as acaught:
            asyncio.run(afetch_card(url, transport=AsyncioTransport(), sleep=asleep))
        assert (acaught.value.retryable, slept) == (False, [])
        assert server.hits["/.well-known/agent-card.json"] == 2


def test_https_to_a_plain_http_server_says_so_in_both_transports() -> None:
    """`pactmw card 127.0.0.1:8765` (https by default) against `pactmw serve` said only
    "[SSL: WRONG_VERSION_NUMBER] wrong version number". The server answers without TLS: the
    text says so and names the http URL to try; a resend cannot fix it, so there is none."""
    with JwksServer() as server:
        server.set_json("/.well-known/agent-card.json", {})
        plain = server.url_for("/.well-known/agent-card.json")
        assert plain.startswith("http://127.0.0.1:")
        url = "https://" + plain.removeprefix("http://")
        netloc = plain.removeprefix("http://").split("/", 1)[0]
        said = f"cannot connect to {netloc}: it answers without TLS (plain http? try http://)"
        slept: list[float] = []
        with pytest.raises(NetworkError) as caught:
            fetch_card(url, transport=SyncTransport(), sleep=slept.append)
        assert said in str(caught.value)
        assert (caught.value.retryable, caught.value.maybe_delivered, slept) == (False, False, [])

        async def asleep(seconds: float) -> None:
            slept.append(seconds)

        with pytest.raises(NetworkError) as acaught:
            asyncio.run(afetch_card(url, transport=AsyncioTransport(), sleep=asleep))
        assert said in str(acaught.value)
        assert (acaught.value.retryable, slept) == (False, [])
        assert server.hits.get("/.well-known/agent-card.json", 0) == 0


def test_cancelling_an_async_send_closes_the_connection() -> None:
    """Why the async transport is native asyncio: cancellation stops the exchange at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    request = HttpRequest("GET", f"http://127.0.0.1:{listener.getsockname()[1]}/")

    async def run() -> None:
        task = asyncio.create_task(AsyncioTransport(timeout=30).send(request))
        server_side, _ = await asyncio.to_thread(listener.accept)
        with server_side:
            server_side.settimeout(5)
            assert (await asyncio.to_thread(server_side.recv, 4096)).startswith(b"GET / HTTP/1.1")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await asyncio.to_thread(server_side.recv, 4096) == b""  # closed by the client

    try:
        asyncio.run(asyncio.wait_for(run(), 10))
    finally:
        listener.close()


def test_a_content_length_of_thousands_of_digits_over_both_transports() -> None:
    """Past 4300 digits `int()` refuses to convert (a bare ValueError escaped every client):
    too large is too large, and leading zeros still say the length they mean."""
    too_large = RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: 1" + b"0" * 5000 + b"\r\n\r\n{}")
    zeros = RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: " + b"0" * 5000 + b"2\r\n\r\n{}")
    try:
        refused = HttpRequest("GET", too_large.base + "/")
        with pytest.raises(NetworkError, match="too large"):
            SyncTransport(timeout=10).send(refused)
        with pytest.raises(NetworkError, match="too large"):
            asyncio.run(AsyncioTransport(timeout=10).send(refused))
        taken = HttpRequest("GET", zeros.base + "/")
        assert SyncTransport(timeout=10).send(taken).body == b"{}"
        assert asyncio.run(AsyncioTransport(timeout=10).send(taken)).body == b"{}"
    finally:
        too_large.close()
        zeros.close()


@pytest.mark.parametrize(
    "url",
    [
        "ftp://alice:s3cret@shop.example/",
        "https://alice:s3cret@[::1/x",
        "https://alice:s3cret@shop.example:99999/",
        "http://alice:s3cret@10.0.0.1/",
    ],
)
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    """URLs are refused with credentials in them; the ones refused for another reason first
    (not http, unparsable) were quoted whole in the message, password included."""
    with pytest.raises(URLRefused) as caught:
        check_url(url)
    assert "s3cret" not in str(caught.value)


def test_an_answer_over_the_body_cap_fails_at_once_without_resends() -> None:
    """A too-large answer is what the Provider answers, not a passing failure: it was resent
    (and its body downloaded again) as often as the retry policy allows. It fails at once,
    in both transports, whether the length is announced or the body just goes on."""
    with JwksServer() as server:
        server.set_body("/card", b"{}")
        server.mode = Mode.OVERSIZED
        server.oversized_bytes = 4096
        url = server.url_for("/card")
        slept: list[float] = []

        async def asleep(seconds: float) -> None:
            slept.append(seconds)

        for announced in (True, False):
            server.send_content_length = announced
            server.reset_hits()
            with pytest.raises(NetworkError, match="too large") as caught:
                fetch_card(url, transport=SyncTransport(max_body=1024), sleep=slept.append)
            assert (caught.value.retryable, slept, server.hits["/card"]) == (False, [], 1)
            transport = AsyncioTransport(max_body=1024)
            with pytest.raises(NetworkError, match="too large") as acaught:
                asyncio.run(afetch_card(url, transport=transport, sleep=asleep))
            assert (acaught.value.retryable, slept, server.hits["/card"]) == (False, [], 2)


def test_an_answer_cut_short_is_still_resent() -> None:
    """What stays retryable: a connection closed before the whole answer arrived."""
    cut = RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
    try:
        slept: list[float] = []
        with pytest.raises(NetworkError, match="closed in the middle") as caught:
            fetch_card(cut.base + "/card", sleep=slept.append)
        assert caught.value.retryable
        assert len(slept) == 2  # the policy's two resends
    finally:
        cut.close()


def test_an_http_error_names_the_url_it_came_from() -> None:
    """`HTTPError.url` is the URL whose answer it is (after redirects), and its text says so,
    escaped and cut like the rest of what a server controls."""
    site = StaticServer()
    try:
        missing = site.url("/nowhere")
        with pytest.raises(HTTPError) as caught:
            fetch_card(missing)
        assert (caught.value.url, caught.value.status) == (missing, 404)
        assert str(caught.value) == f"{missing}: HTTP 404"
        # A redirect's target is the server's text: escaped, and cut so that the status stays.
        moved = site.redirect("/moved", "/x\x1b[2J" + "y" * 5000)
        with pytest.raises(HTTPError) as redirected:
            fetch_card(moved)
    finally:
        site.close()
    assert redirected.value.url == site.url("/x\x1b[2J" + "y" * 5000)
    text = str(redirected.value)
    assert "\x1b" not in text
    assert text.startswith(site.url("/x\\x1b[2Jyyy"))
    assert text.endswith(": HTTP 404")
    assert len(text) < ERROR_TEXT_LIMIT


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"Retry-After": "30"}, "HTTP 503: the server cannot answer now; retry after 30 s"),
        ({}, "HTTP 503: the server cannot answer now"),
        # A Retry-After that is no number of seconds (a date, or the server's text) is not
        # quoted: the part that is said stays the client's own.
        (
            {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"},
            "HTTP 503: the server cannot answer now",
        ),
    ],
)
def test_a_503_says_the_server_cannot_answer_now(headers: dict[str, str], said: str) -> None:
    """A bare "HTTP 503" did not tell an operator's `pactmw send` a store outage (503 with
    `Retry-After`, the Provider's answer while its database is down) from a broken server."""
    site = StaticServer()
    try:
        down = site.route("/card", Route(503, b"", headers))
        with pytest.raises(HTTPError) as caught:
            fetch_card(down)
    finally:
        site.close()
    assert caught.value.status == 503
    assert str(caught.value) == f"{down}: {said}"
