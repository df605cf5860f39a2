"""The registry's runtime part: agents a store added at runtime are verified like configured
ones (keys from their `jwks_uri`, under the same fetch policy), every issuer's block holds,
and each lookup costs one store read (issue 14, runtime agent registry).

The store is a real `MemoryStore`; `CountingStore` only counts the registry's calls to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pactmw.core.errors import AuthenticationFailed
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import JwksCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.store import MemoryStore, StoredAgent

NOW = 1_800_000_000
AUD = "pactmw-runtime-registry"
CONFIGURED = "https://configured.example"
RUNTIME = "https://runtime.example"
LOOPBACK_HTTP = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)


class CountingStore(MemoryStore):
    """A memory store that counts the reads the registry makes."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def agent_enabled(self, issuer: str) -> bool | None:
        self.reads.append("agent_enabled")
        return super().agent_enabled(issuer)

    def lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        self.reads.append("lookup_agent")
        return super().lookup_agent(issuer)


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="k-1")


@pytest.fixture
def jwks(key: PrivateJWK) -> Iterator[str]:
    from tests.support.jwks_server import JwksServer

    with JwksServer(public_key_set([key])) as server:
        yield server.url


def _token(key: PrivateJWK, issuer: str) -> str:
    claims = {"iss": issuer, "sub": "user-1", "aud": AUD, "iat": NOW, "exp": NOW + 120}
    return "Bearer " + sign_compact(claims, key, typ="JWT")


def _verifier(
    store: MemoryStore,
    jwks_uri: str,
    *,
    policy: FetchPolicy = LOOPBACK_HTTP,
    open_mode: bool = False,
) -> IdentityVerifier:
    registry = AgentRegistry(
        [RegisteredAgent(issuer=CONFIGURED, jwks_uri=jwks_uri)], overrides=store, runtime=store
    )
    return IdentityVerifier(
        audience=AUD,
        registry=registry,
        keys=JwksCache(policy),
        open_mode=open_mode,
        clock=lambda: NOW,
    )


def _reason(verifier: IdentityVerifier, header: str, mode: str = "sync") -> str:
    try:
        if mode == "sync":
            verifier.verify(header)
        else:
            asyncio.run(verifier.averify(header))
    except AuthenticationFailed as exc:
        return exc.reason
    return "accepted"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_runtime_agent_is_verified_like_a_configured_one(
    key: PrivateJWK, jwks: str, mode: str
) -> None:
    store = MemoryStore()
    verifier = _verifier(store, jwks)
    header = _token(key, RUNTIME)
    assert _reason(verifier, header, mode) == "unknown_issuer"
    store.add_agent(issuer=RUNTIME, name="Runtime PA", jwks_uri=jwks, now=NOW)
    assert _reason(verifier, header, mode) == "accepted"
    agent = verifier.verify(header)
    assert (agent.issuer, agent.name, agent.audience) == (RUNTIME, "Runtime PA", AUD)
    # A token of the wrong key, or for another audience, is refused as for any agent.
    stranger = generate_private_jwk("ES256", kid="k-1")
    assert _reason(verifier, _token(stranger, RUNTIME), mode) == "bad_signature"
    # Block and allow apply to it; removing it makes it unknown, cached token or not.
    store.set_agent_enabled(RUNTIME, False)
    assert _reason(verifier, header, mode) == "disabled_issuer"
    store.set_agent_enabled(RUNTIME, True)
    assert _reason(verifier, header, mode) == "accepted"
    store.remove_agent(RUNTIME)
    assert _reason(verifier, header, mode) == "unknown_issuer"


def test_each_lookup_is_one_store_read(key: PrivateJWK, jwks: str) -> None:
    store = CountingStore()
    verifier = _verifier(store, jwks)
    store.add_agent(issuer=RUNTIME, name="", jwks_uri=jwks, now=NOW)
    for issuer in (CONFIGURED, RUNTIME):
        header = _token(key, issuer)
        for _ in range(2):  # the first verification and a cached one
            store.reads.clear()
            assert _reason(verifier, header) == "accepted"
            # A configured agent asks for its switch only; any other issuer asks once for
            # both its runtime record and its switch.
            expected = "agent_enabled" if issuer == CONFIGURED else "lookup_agent"
            assert store.reads == [expected], issuer
    store.reads.clear()
    assert _reason(verifier, _token(key, "https://unknown.example")) == "unknown_issuer"
    assert store.reads == ["lookup_agent"]


def test_a_resolver_agent_takes_its_switch_from_the_same_read(key: PrivateJWK, jwks: str) -> None:
    store = CountingStore()
    resolved = RegisteredAgent(issuer="https://resolved.example", jwks_uri=jwks)
    registry = AgentRegistry(
        overrides=store,
        runtime=store,
        resolver=lambda issuer: resolved if issuer == resolved.issuer else None,
    )
    store.set_agent_enabled(resolved.issuer, False)
    store.reads.clear()
    agent = registry.lookup(resolved.issuer)
    assert agent is not None
    assert agent.enabled is False
    assert store.reads == ["lookup_agent"]


def test_a_runtime_agents_keys_follow_the_fetch_policy(key: PrivateJWK) -> None:
    """The store may hold a jwks_uri another process's policy allowed: it is fetched only
    under this verifier's policy (https only; no private addresses)."""
    from tests.support.jwks_server import JwksServer

    with JwksServer(public_key_set([key])) as server:
        store = MemoryStore()
        verifier = _verifier(store, "https://configured.example/jwks", policy=FetchPolicy())
        store.add_agent(issuer=RUNTIME, name="", jwks_uri=server.url, now=NOW)  # plain http
        store.add_agent(
            issuer="https://private.example", name="", jwks_uri="https://10.1.2.3/jwks", now=NOW
        )
        assert _reason(verifier, _token(key, RUNTIME)) == "jwks_unavailable"
        assert _reason(verifier, _token(key, "https://private.example")) == "jwks_unavailable"
        assert server.total_hits == 0


def test_an_unregistered_issuer_blocked_in_open_mode_stays_refused(key: PrivateJWK) -> None:
    store = MemoryStore()
    verifier = _verifier(store, "https://configured.example/jwks", open_mode=True)
    store.set_agent_enabled("https://open.example", False)
    # Refused before discovery could look the issuer up (it does not even resolve).
    assert _reason(verifier, _token(key, "https://open.example")) == "disabled_issuer"
    assert _reason(verifier, _token(key, "https://open.example"), "async") == "disabled_issuer"
