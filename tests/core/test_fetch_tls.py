"""`FetchPolicy.tls_context` and `connect_to`: https to made-up names served on 127.0.0.1 by
a real TLS server with a trustme CA, verification kept whole."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pactmw.core.errors import FetchError, MalformedInput
from pactmw.core.fetch import FetchPolicy, http_get
from tests.support.jwks_server import JwksServer
from tests.support.tls import LOOPBACK_NETWORK, TestCA

DOCUMENT: dict[str, list[object]] = {"keys": []}


@pytest.fixture(scope="module")
def ca() -> TestCA:
    return TestCA()


@pytest.fixture(scope="module")
def server(ca: TestCA) -> Iterator[JwksServer]:
    with JwksServer(DOCUMENT, server_context=ca.server_context("agent.example")) as server:
        yield server


def test_https_to_a_name_through_connect_to_with_the_ca(ca: TestCA, server: JwksServer) -> None:
    server.reset_hits()
    policy = ca.policy(server.port, "agent.example")
    response = http_get("https://agent.example/.well-known/jwks.json", policy)
    assert json.loads(response.body) == DOCUMENT
    assert server.hits["/.well-known/jwks.json"] == 1


def test_host_names_match_case_insensitively(ca: TestCA, server: JwksServer) -> None:
    policy = ca.policy(server.port, "Agent.Example")
    assert http_get("https://AGENT.example/.well-known/jwks.json", policy).status == 200


def test_without_the_ca_the_certificate_is_refused(ca: TestCA, server: JwksServer) -> None:
    policy = FetchPolicy(
        connect_to={"agent.example": ("127.0.0.1", server.port)},
        allowed_networks=(LOOPBACK_NETWORK,),
    )
    with pytest.raises(FetchError, match="SSL"):
        http_get("https://agent.example/.well-known/jwks.json", policy)


def test_the_certificate_must_name_the_url_host(ca: TestCA, server: JwksServer) -> None:
    # Same CA, same socket: only the name differs, and the leaf does not carry it.
    policy = ca.policy(server.port, "other.example")
    with pytest.raises(FetchError, match="SSL"):
        http_get("https://other.example/.well-known/jwks.json", policy)


def test_a_mapped_address_must_still_be_allowed(ca: TestCA, server: JwksServer) -> None:
    server.reset_hits()
    policy = FetchPolicy(
        tls_context=ca.client_context(), connect_to={"agent.example": ("127.0.0.1", server.port)}
    )
    with pytest.raises(FetchError, match="may not be fetched"):
        http_get("https://agent.example/.well-known/jwks.json", policy)
    assert server.total_hits == 0


def test_unmapped_names_still_resolve(ca: TestCA, server: JwksServer) -> None:
    # `localhost` is not in the map: DNS answers loopback, which this policy allows, and the
    # certificate (for agent.example only) is then refused, proving the map was not used.
    policy = ca.policy(server.port, "agent.example")
    with pytest.raises(FetchError):
        http_get(f"https://localhost:{server.port}/.well-known/jwks.json", policy)


@pytest.mark.parametrize(
    "target", [("agent.internal", 443), ("127.0.0.1", 0), ("127.0.0.1", 70000), ("127.0.0.1",)]
)
def test_connect_to_targets_are_checked(target: tuple[object, ...]) -> None:
    with pytest.raises(MalformedInput, match=r"FetchPolicy.connect_to\['agent.example'\]"):
        FetchPolicy(connect_to={"agent.example": target})  # type: ignore[dict-item]


def test_policies_stay_hashable_values(ca: TestCA) -> None:
    one = FetchPolicy(connect_to={"a.example": ("127.0.0.1", 1), "b.example": ("::1", 2)})
    two = FetchPolicy(connect_to={"b.example": ("::1", 2), "a.example": ("127.0.0.1", 1)})
    assert one == two
    assert hash(one) == hash(two)
