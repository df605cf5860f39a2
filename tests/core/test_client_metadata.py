"""Client metadata documents (Poppy §4.1, PAP-4.1-02/03, PAP-3-07) fetched over real TLS from
a server on 127.0.0.1 that answers for `agent.example` with a trustme CA's certificate."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pactmw.core.client_metadata import (
    ClientMetadataCache,
    ClientMetadataError,
    parse_client_metadata,
)
from pactmw.core.errors import KeyUnavailable
from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.core.keys import CachePolicy
from tests.support.clock import FakeClock
from tests.support.jwks_server import JwksServer, Mode
from tests.support.tls import TestCA

CLIENT_ID = "https://agent.example/agent.json"
KEY = generate_private_jwk("ES256", kid="k1")


def metadata(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "client_id": CLIENT_ID,
        "client_name": "Atlas",
        "jwks_uri": "https://agent.example/jwks.json",
        "redirect_uris": ["https://agent.example/callback"],
        "token_endpoint_auth_method": "private_key_jwt",
        "extensions": {"operations": {"version": "1"}},
    }
    document.update(changes)
    return {k: v for k, v in document.items() if v is not None}


@pytest.fixture(scope="module")
def ca() -> TestCA:
    return TestCA()


@pytest.fixture(scope="module")
def module_server(ca: TestCA) -> Iterator[JwksServer]:
    context = ca.server_context("agent.example", "other.example")
    with JwksServer(public_key_set([KEY]), jwks_path="/jwks.json", server_context=context) as s:
        yield s


@pytest.fixture
def server(module_server: JwksServer) -> JwksServer:
    module_server.reset()
    module_server.set_json("/agent.json", metadata())
    return module_server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def cache(ca: TestCA, server: JwksServer, clock: FakeClock) -> ClientMetadataCache:
    policy = ca.policy(server.port, "agent.example", "other.example", timeout=2.0)
    return ClientMetadataCache(policy, clock=clock)


def refused(cache: ClientMetadataCache, code: str, client_id: str = CLIENT_ID) -> None:
    with pytest.raises(ClientMetadataError) as caught:
        cache.get(client_id)
    assert caught.value.code == code


def test_metadata_and_keys_over_tls(cache: ClientMetadataCache, server: JwksServer) -> None:
    server.set_json("/agent.json", metadata(support_hours="9-17"))
    found, keys = cache.get_keys(CLIENT_ID, "k1", "ES256")
    assert found.client_name == "Atlas"
    assert found.jwks_uri == "https://agent.example/jwks.json"
    assert found.redirect_uris == ("https://agent.example/callback",)
    assert found.extensions == {"operations": {"version": "1"}}
    assert found.document["support_hours"] == "9-17"  # unknown members kept (PAP-3.3-03)
    assert [key.thumbprint for key in keys] == [public_key_set([KEY]).keys[0].thumbprint]
    assert server.hits["/agent.json"] == 1
    assert server.hits["/jwks.json"] == 1


def test_pap_4_1_02_client_id_must_equal_the_url(
    cache: ClientMetadataCache, server: JwksServer
) -> None:
    server.set_json("/agent.json", metadata(client_id="https://agent.example/other.json"))
    refused(cache, "client_id_mismatch")
    # Character for character: a trailing slash or another case is another URL.
    server.set_json("/agent.json", metadata(client_id="https://AGENT.example/agent.json"))
    cache.failure_ttl = 0.0
    refused(cache, "client_id_mismatch")


def test_pap_4_1_02_redirects_are_not_followed(
    cache: ClientMetadataCache, server: JwksServer
) -> None:
    server.mode = Mode.REDIRECT
    server.redirect_location = "https://agent.example/moved.json"
    server.set_json("/moved.json", metadata())
    refused(cache, "unfetchable")
    assert server.hits["/moved.json"] == 0


@pytest.mark.parametrize(
    "changes",
    [
        {"jwks_uri": "https://other.example/jwks.json"},
        {"jwks_uri": "http://agent.example/jwks.json"},
        {"jwks_uri": None},
        {"redirect_uris": ["https://agent.example/cb", "https://other.example/cb"]},
        {"redirect_uris": ["http://agent.example/cb"]},
        {"redirect_uris": "https://agent.example/cb"},
        {"logo_uri": "http://agent.example/logo.png"},
        {"client_name": ""},
        {"token_endpoint_auth_method": "client_secret_basic"},
        {"extensions": ["operations"]},
    ],
    ids=lambda changes: ",".join(f"{k}={v}" for k, v in changes.items()),
)
def test_pap_4_1_03_security_urls_on_the_client_id_host(
    cache: ClientMetadataCache, server: JwksServer, changes: dict[str, Any]
) -> None:
    server.set_json("/agent.json", metadata(**changes))
    refused(cache, "invalid_client_metadata")
    assert server.hits["/jwks.json"] == 0


def test_a_foreign_jwks_uri_is_never_fetched(
    cache: ClientMetadataCache, server: JwksServer
) -> None:
    server.set_json("/agent.json", metadata(jwks_uri="https://other.example/jwks.json"))
    with pytest.raises(ClientMetadataError):
        cache.get_keys(CLIENT_ID, "k1", "ES256")
    assert server.hits["/jwks.json"] == 0


def test_oversized_documents_are_refused(ca: TestCA, server: JwksServer) -> None:
    policy = ca.policy(server.port, "agent.example", max_bytes=4096)
    server.set_json("/agent.json", metadata(padding="x" * 5000))
    refused(ClientMetadataCache(policy), "unfetchable")


def test_the_content_type_must_be_json(cache: ClientMetadataCache, server: JwksServer) -> None:
    server.set_body("/agent.json", b'{"client_id": "x"}', "text/html")
    refused(cache, "invalid_content_type")


def test_plus_json_types_are_json() -> None:
    body = b'{"client_id":"%s","client_name":"A","jwks_uri":"https://agent.example/j"}' % (
        CLIENT_ID.encode()
    )
    assert parse_client_metadata(CLIENT_ID, body, "application/x+json; charset=utf-8").client_name


def test_duplicate_members_are_refused(cache: ClientMetadataCache, server: JwksServer) -> None:
    body = (
        b'{"client_id":"%s","client_name":"A","client_name":"B",'
        b'"jwks_uri":"https://agent.example/jwks.json"}' % CLIENT_ID.encode()
    )
    server.set_body("/agent.json", body)
    refused(cache, "invalid_client_metadata")


@pytest.mark.parametrize(
    "client_id",
    [
        "http://agent.example/agent.json",
        "https://user:pw@agent.example/agent.json",
        "https://agent.example/agent.json#frag",
        "https://agent.example:99999/agent.json",
        "agent.json",
    ],
)
def test_pap_3_07_only_https_client_ids_are_fetched(
    cache: ClientMetadataCache, server: JwksServer, client_id: str
) -> None:
    refused(cache, "invalid_client_id", client_id)
    assert server.total_hits == 0


def test_answers_are_cached_by_cache_control_within_bounds(
    cache: ClientMetadataCache, server: JwksServer, clock: FakeClock
) -> None:
    server.extra_headers = {"Cache-Control": "max-age=5"}  # below the 60 s floor
    cache.get(CLIENT_ID)
    clock.advance(59)
    cache.get(CLIENT_ID)
    assert server.hits["/agent.json"] == 1
    clock.advance(2)
    cache.get(CLIENT_ID)
    assert server.hits["/agent.json"] == 2


def test_failures_are_remembered_briefly(
    cache: ClientMetadataCache, server: JwksServer, clock: FakeClock
) -> None:
    server.mode = Mode.FAIL
    refused(cache, "unfetchable")
    refused(cache, "unfetchable")
    assert server.hits["/agent.json"] == 1
    server.mode = Mode.OK
    clock.advance(cache.failure_ttl)
    assert cache.get(CLIENT_ID).client_name == "Atlas"
    assert server.hits["/agent.json"] == 2


def test_concurrent_misses_share_one_fetch(cache: ClientMetadataCache, server: JwksServer) -> None:
    server.mode = Mode.SLOW
    server.delay = 0.3
    names: list[str] = []
    threads = [
        threading.Thread(target=lambda: names.append(cache.get(CLIENT_ID).client_name))
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert names == ["Atlas"] * 5
    assert server.hits["/agent.json"] == 1


def test_async_get_and_keys(cache: ClientMetadataCache, server: JwksServer) -> None:
    async def run() -> None:
        found, keys = await cache.aget_keys(CLIENT_ID, "k1", "ES256")
        assert found.client_id == CLIENT_ID
        assert len(keys) == 1
        assert (await cache.aget(CLIENT_ID)).client_name == "Atlas"
        with pytest.raises(KeyUnavailable):
            await cache.aget_keys(CLIENT_ID, "unknown", "ES256")

    asyncio.run(run())
    assert server.hits["/agent.json"] == 1


# -- a refetch that fails keeps the last good document (stale-if-error) ---------------------

DEFAULT_TTL = CachePolicy().default_ttl
STALE_IF_ERROR = CachePolicy().stale_if_error


@pytest.mark.parametrize("mode", [Mode.FAIL, Mode.DOWN], ids=["http-500", "unreachable"])
def test_a_failed_refetch_keeps_the_last_good_document(
    cache: ClientMetadataCache, server: JwksServer, clock: FakeClock, mode: Mode
) -> None:
    assert cache.get_keys(CLIENT_ID, "k1", "ES256")[0].client_name == "Atlas"
    server.mode = mode
    clock.advance(DEFAULT_TTL)
    # The agent's host failing for a moment must not fail every request of that agent.
    assert cache.get(CLIENT_ID).client_name == "Atlas"
    assert asyncio.run(cache.aget(CLIENT_ID)).client_name == "Atlas"
    found, keys = cache.get_keys(CLIENT_ID, "k1", "ES256")
    assert found.client_name == "Atlas"
    assert len(keys) == 1
    # The failure is remembered like any other: no fetch per request while the host is down.
    server.mode = Mode.OK
    hits = server.hits["/agent.json"]
    assert cache.get(CLIENT_ID).client_name == "Atlas"
    assert server.hits["/agent.json"] == hits
    # Once it answers again, its new document is the one used.
    server.set_json("/agent.json", metadata(client_name="Atlas 2"))
    clock.advance(cache.failure_ttl)
    assert cache.get(CLIENT_ID).client_name == "Atlas 2"
    assert server.hits["/agent.json"] == hits + 1


def serve_another_answer(server: JwksServer, answer: str) -> None:
    if answer == "redirect":
        server.mode = Mode.REDIRECT
        server.redirect_location = "https://agent.example/moved.json"
    elif answer == "not-json":
        server.mode = Mode.GARBAGE
    elif answer == "oversized":
        server.mode = Mode.OVERSIZED
    elif answer == "html":
        server.set_body("/agent.json", b"<html>maintenance</html>", "text/html")
    elif answer == "mismatch":
        server.set_json("/agent.json", metadata(client_id="https://agent.example/other.json"))
    else:
        server.set_json("/agent.json", metadata(jwks_uri="https://other.example/jwks.json"))


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("invalid", "invalid_client_metadata"),
        ("mismatch", "client_id_mismatch"),
        ("not-json", "invalid_client_metadata"),
        ("html", "invalid_content_type"),
        ("redirect", "unfetchable"),
        ("oversized", "unfetchable"),
    ],
)
def test_a_refetch_that_answers_otherwise_wins_over_the_cached_document(
    cache: ClientMetadataCache, server: JwksServer, clock: FakeClock, answer: str, code: str
) -> None:
    assert cache.get(CLIENT_ID).client_name == "Atlas"
    serve_another_answer(server, answer)
    clock.advance(DEFAULT_TTL)
    # The host answered, and its answer is not a valid document for this client_id: the
    # document verified before is no longer what the agent says, so it is not served.
    refused(cache, code)
    assert cache.last_verified(CLIENT_ID) is None


def test_the_last_good_document_is_kept_no_longer_than_stale_if_error(
    cache: ClientMetadataCache, server: JwksServer, clock: FakeClock
) -> None:
    cache.get(CLIENT_ID)  # verified at 1000
    server.mode = Mode.FAIL
    clock.advance(STALE_IF_ERROR)  # exactly the bound: still served
    assert cache.get(CLIENT_ID).client_name == "Atlas"
    clock.advance(cache.failure_ttl / 2)  # past it, though the failure is only 15 s old
    refused(cache, "unfetchable")
    assert cache.last_verified(CLIENT_ID) is None


def test_a_short_stale_if_error_is_honoured_between_refetches(
    ca: TestCA, server: JwksServer, clock: FakeClock
) -> None:
    policy = ca.policy(server.port, "agent.example", timeout=2.0)
    cache = ClientMetadataCache(policy, CachePolicy(stale_if_error=700.0), clock=clock)
    cache.get(CLIENT_ID)  # verified at 1000, fresh until 1600
    server.mode = Mode.FAIL
    clock.advance(DEFAULT_TTL)  # 1600: the refetch fails, the document is served
    assert cache.get(CLIENT_ID).client_name == "Atlas"
    clock.advance(cache.failure_ttl * 3)  # 1690: two more failed refetches, still within 700
    assert cache.get(CLIENT_ID).client_name == "Atlas"
    clock.advance(11)  # 1701: one second past the bound
    refused(cache, "unfetchable")
