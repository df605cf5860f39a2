"""Advisory: HTTP header numbers checked with `str.isdigit()`, then parsed with `int`/`float`.

`"²".isdigit()` is True (so are `"¹"` and `"³"`, all three in latin-1, the charset HTTP header
values are decoded with), but `int("²")` and `float("²")` raise `ValueError`. Wherever a header
number was vetted with `isdigit()` alone, one such byte turned a refusal into an exception:

* `core.fetch.max_age` (a JWKS server's `Cache-Control: max-age=²`): the exception escaped
  `JwksCache` outside its error handling, so the request that fetched got a 500, and the
  shared in-flight fetch was never completed nor removed: every later request for that
  agent waited 2 x the fetch timeout (10 s by default) and was refused, until a restart.
  A registered agent's key server (or anyone's, in open mode) could lock that agent out.
* `core.fetch.http_get` (`Content-Length: ²` from a key or discovery server): a `ValueError`
  instead of a `FetchError`; OIDC discovery in open mode let it through, a 500 on a token
  whose issuer anyone can choose.

Both are fixed in `core/fetch.py` (ASCII digits only) and tested here. The same pattern in the
adapters' body readers and in the client is fixed the same way, with
`pactmw.core.encoding.is_ascii_digits`, and tested below.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import pytest

from pactmw.core.errors import FetchError
from pactmw.core.fetch import FetchPolicy, http_get, max_age
from pactmw.core.http import Request
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk, parse_jwks, public_key_set
from pactmw.core.keys import DiscoveryCache, JwksCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.store import open_store
from tests.advisories.support import NOW
from tests.support.jwks_server import JwksServer, Mode
from tests.support.parties import AUDIENCE, ISSUER

KEY = generate_private_jwk("ES256", kid="k1")
NOT_ASCII_DIGITS = ["²", "³", "¹", "1²", "²0", "١٢٣"]  # the last: Arabic-Indic, isdecimal too
POLICY = FetchPolicy(allow_http_on_loopback=True, timeout=1.0)


def bearer(issuer: str = ISSUER) -> str:
    claims = {"iss": issuer, "sub": "u1", "aud": AUDIENCE, "iat": NOW, "exp": NOW + 120}
    return "Bearer " + sign_compact(claims, KEY, typ="JWT")


@pytest.fixture
def jwks() -> Iterator[JwksServer]:
    with JwksServer(public_key_set([KEY])) as server:
        yield server


def verifier_for(server: JwksServer) -> IdentityVerifier:
    registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=server.url)])
    return IdentityVerifier(
        audience=AUDIENCE, registry=registry, keys=JwksCache(POLICY), clock=lambda: NOW
    )


# -- fixed: core.fetch ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", NOT_ASCII_DIGITS)
def test_max_age_ignores_numbers_that_are_not_ascii_digits(value: str) -> None:
    for header in (f"max-age={value}", f'max-age="{value}"', f"public, max-age={value}"):
        assert max_age({"cache-control": header}) is None
    assert max_age({"cache-control": "max-age=60"}) == 60.0  # the control


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_key_server_sending_max_age_superscript_neither_crashes_nor_wedges_the_cache(
    jwks: JwksServer, driver: str
) -> None:
    jwks.extra_headers = {"Cache-Control": "max-age=²"}
    verifier = verifier_for(jwks)

    def verify() -> Any:
        if driver == "sync":
            return verifier.verify(bearer())
        return asyncio.run(verifier.averify(bearer()))

    for _ in range(3):
        started = time.monotonic()
        assert verify().sub == "u1"
        # A wedged in-flight fetch made every later call wait 2 x timeout (2 s here).
        assert time.monotonic() - started < 1.0
    assert jwks.total_hits == 1  # the keys were cached, with the default lifetime


def test_a_provider_behind_such_a_key_server_answers_200_not_500(jwks: JwksServer) -> None:
    jwks.extra_headers = {"Cache-Control": "max-age=²"}
    provider = Provider(
        base_url="https://provider.example",
        verifier=verifier_for(jwks),
        store=open_store("memory://"),
        brands=[Brand(id="acme", name="Acme", handler=lambda turn: "hi")],
        clock=lambda: NOW,
    )
    try:
        for _ in range(2):
            request = Request("GET", "/a2a/acme/tasks", headers=(("authorization", bearer()),))
            started = time.monotonic()
            assert provider.handle(request, lambda limit: b"").status == 200
            assert time.monotonic() - started < 1.0
    finally:
        provider.close()


@pytest.mark.parametrize("value", ["²", "¹²³"])
def test_a_content_length_superscript_from_a_key_server_is_not_an_exception(
    jwks: JwksServer, value: str
) -> None:
    # The server closes the connection after the body (HTTP/1.0), so the body is still whole.
    jwks.send_content_length = False
    jwks.extra_headers = {"Content-Length": value}
    fetched = http_get(jwks.url, POLICY)
    assert parse_jwks(fetched.body).keys[0].kid == "k1"


def test_open_mode_discovery_with_a_content_length_superscript_is_not_a_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with JwksServer(public_key_set([KEY]), tls=True) as tls:
        monkeypatch.setenv("SSL_CERT_FILE", tls.ca_file)
        issuer = tls.base_url
        tls.set_json("/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": tls.url})
        tls.send_content_length = False
        tls.extra_headers = {"Content-Length": "²"}
        verifier = IdentityVerifier(
            audience=AUDIENCE,
            registry=AgentRegistry(),
            keys=JwksCache(POLICY),
            open_mode=True,
            discovery=DiscoveryCache(POLICY),
            clock=lambda: NOW,
        )
        assert verifier.verify(bearer(issuer)).issuer == issuer


# -- not fixed here: the same pattern in the adapters and the client -------------------------------

MESSAGE = b'{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}'


def _provider() -> Provider:
    registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks=public_key_set([KEY]))])
    return Provider(
        base_url="https://provider.example",
        verifier=IdentityVerifier(audience=AUDIENCE, registry=registry, clock=lambda: NOW),
        store=open_store("memory://"),
        brands=[Brand(id="acme", name="Acme", handler=lambda turn: "hi")],
        clock=lambda: NOW,
    )


@pytest.mark.parametrize("length", [b"\xb2", b"0x10", b"+5"])
def test_asgi_body_reader_with_a_content_length_superscript_is_a_400(length: bytes) -> None:
    # Called directly, not behind uvicorn (which refuses such framing itself): an ASGI server
    # that passes it on gets the WSGI adapters' answer, a 400 (adapters._common).
    from pactmw.adapters.asgi import A2AProviderApp

    provider = _provider()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/a2a/acme/message:send",
        "query_string": b"",
        "headers": [(b"authorization", bearer().encode()), (b"content-length", length)],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": MESSAGE, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    try:
        asyncio.run(A2AProviderApp(provider)(scope, receive, send))
    finally:
        provider.close()
    assert sent[0]["status"] == 400


def test_wsgi_body_reader_with_a_content_length_superscript_is_a_400() -> None:
    from pactmw.adapters.wsgi import A2AProviderApp
    from tests.support.servers import werkzeug_server

    provider = _provider()
    try:
        with werkzeug_server(A2AProviderApp(provider)) as base:
            parts = urlsplit(base)
            with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
                sock.sendall(
                    b"POST /a2a/acme/message:send HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    b"Authorization: " + bearer().encode() + b"\r\n"
                    b"Content-Length: \xb2\r\n\r\n" + MESSAGE
                )
                answer = sock.recv(65536)
    finally:
        provider.close()
    assert int(answer.split(b" ", 2)[1]) == 400, answer[:200]


def test_client_response_parser_refuses_a_content_length_superscript() -> None:
    from pactmw.client.http import ProtocolViolation, ResponseParser

    parser = ResponseParser()
    with pytest.raises(ProtocolViolation):
        parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\nab")


def test_client_retry_after_ignores_a_superscript() -> None:
    from pactmw.client.http import HttpResponse

    assert HttpResponse(status=429, headers=(("Retry-After", "²"),)).retry_after() is None


def test_the_fixed_helpers_still_read_ordinary_numbers(jwks: JwksServer) -> None:
    """The control: plain ASCII numbers still work where the superscripts are now ignored."""
    jwks.extra_headers = {"Cache-Control": "max-age=120"}
    assert max_age(http_get(jwks.url, POLICY).headers) == 120.0
    # A declared Content-Length over the cap is still refused before the body is read.
    jwks.oversized_bytes = 70_000
    jwks.mode = Mode.OVERSIZED
    with pytest.raises(FetchError, match="larger than"):
        http_get(jwks.url, POLICY)
