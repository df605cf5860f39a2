"""Open mode under a flood of tokens naming fresh issuers (SECURITY.md, "Key fetching").

In open mode any issuer whose OIDC discovery serves a JWKS is accepted, so every unknown
`iss` costs a discovery fetch and a cache entry, and a discovered `jwks_uri` a JWKS fetch and
another. A stream of fresh issuers must neither push out the entries of agents that really
verify (each of their requests would fetch again, from hosts that may be slow) nor make the
server hold an unbounded number of outbound fetches: fetches for keys that never verified
anything are limited (`MAX_NEW_FETCHES` at once per cache), the excess refused at once.

Documents come from real https servers on 127.0.0.1 that count what they are asked for.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pactmw.core._shared_fetch import MAX_NEW_FETCHES
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import CachePolicy, DiscoveryCache, JwksCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from tests.advisories.support import NOW
from tests.support.clock import FakeClock
from tests.support.jwks_server import JwksServer, Mode
from tests.support.tls import LOOPBACK_NETWORK, TestCA

AUD = "urn:provider:flood"
#: Small caches, so that a flood that overflows them is a few hundred fetches, not thousands:
#: the rule under test does not depend on the size.
CACHE_SIZE = 40
FLOOD = 3 * CACHE_SIZE
#: More callers at once than fetches may run for new keys.
CROWD = MAX_NEW_FETCHES + 24
CONFIG = "/.well-known/openid-configuration"
AGENTS, KEYS, CONFIGURED = "agents.example", "keys.example", "configured.example"


@pytest.fixture(scope="module")
def ca() -> TestCA:
    return TestCA()


@pytest.fixture(scope="module")
def agent_key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="k1")


@pytest.fixture(scope="module")
def attacker_key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="k1")  # same kid, another key


@pytest.fixture
def agents(ca: TestCA) -> Iterator[JwksServer]:
    """The discovery documents of every issuer, good or fresh."""
    with JwksServer(server_context=ca.server_context(AGENTS)) as server:
        yield server


@pytest.fixture
def keys(ca: TestCA) -> Iterator[JwksServer]:
    """The key sets every discovery document points to."""
    with JwksServer(server_context=ca.server_context(KEYS, CONFIGURED)) as server:
        yield server


def _policy(ca: TestCA, agents: JwksServer, keys: JwksServer) -> FetchPolicy:
    return FetchPolicy(
        tls_context=ca.client_context(),
        connect_to={
            AGENTS: ("127.0.0.1", agents.port),
            KEYS: ("127.0.0.1", keys.port),
            CONFIGURED: ("127.0.0.1", keys.port),
        },
        allowed_networks=(LOOPBACK_NETWORK,),
        timeout=60.0,  # a held fetch is ended by stopping its server, not by the deadline
    )


def _verifier(policy: FetchPolicy, registry: AgentRegistry | None = None) -> IdentityVerifier:
    clock = FakeClock(5000.0)  # no entry expires while a test runs
    return IdentityVerifier(
        audience=AUD,
        registry=registry or AgentRegistry(),
        keys=JwksCache(policy, CachePolicy(max_uris=CACHE_SIZE), clock=clock),
        open_mode=True,
        discovery=DiscoveryCache(policy, clock=clock, max_issuers=CACHE_SIZE),
        clock=lambda: NOW,
    )


def _publish(agents: JwksServer, keys: JwksServer, name: str, key: PrivateJWK) -> str:
    """Serve issuer `name`'s discovery document and key set; its issuer URL."""
    issuer = f"https://{AGENTS}/{name}"
    jwks_uri = f"https://{KEYS}/{name}.json"
    agents.set_json(f"/{name}{CONFIG}", {"issuer": issuer, "jwks_uri": jwks_uri})
    keys.set_json(f"/{name}.json", public_key_set([key]).to_dict())
    return issuer


def _token(issuer: str, key: PrivateJWK, jti: str) -> str:
    claims = {"iss": issuer, "sub": "u1", "aud": AUD, "iat": NOW, "exp": NOW + 120, "jti": jti}
    return "Bearer " + sign_compact(claims, key, typ="JWT")


def _reason(verify: Callable[[str], Any], header: str) -> str:
    try:
        verify(header)
    except AuthenticationFailed as exc:
        return exc.reason
    return "accepted"


@pytest.mark.parametrize("driver", ["verify", "averify"])
def test_fresh_issuers_do_not_push_out_an_agent_that_verifies(
    ca: TestCA,
    agents: JwksServer,
    keys: JwksServer,
    agent_key: PrivateJWK,
    attacker_key: PrivateJWK,
    driver: str,
) -> None:
    verifier = _verifier(_policy(ca, agents, keys))
    verify: Callable[[str], Any] = verifier.verify
    if driver == "averify":
        verify = lambda header: asyncio.run(verifier.averify(header))  # noqa: E731
    good = _publish(agents, keys, "good", agent_key)
    assert verify(_token(good, agent_key, "first")).issuer == good
    # Each fresh issuer has a discovery document and a key set, as an attacker's would; its
    # tokens never verify (signed with a key the set does not hold).
    fresh = [_publish(agents, keys, f"fresh-{n}", agent_key) for n in range(FLOOD)]
    for n, issuer in enumerate(fresh):
        assert _reason(verify, _token(issuer, attacker_key, f"f{n}")) == "bad_signature"
    assert keys.hits["/fresh-0.json"] == 1  # every fresh issuer did cost its fetches
    # A new token of the good agent: its discovery answer and keys are still held.
    assert verify(_token(good, agent_key, "second")).issuer == good
    assert agents.hits[f"/good{CONFIG}"] == 1
    assert keys.hits["/good.json"] == 1


def _crowd(verify: Callable[[str], Any], headers: list[str]) -> tuple[list[str], list[Any]]:
    """Send `headers` at once from threads; (the reasons of the calls that returned so far,
    the threads)."""
    reasons: list[str] = []

    def call(header: str) -> None:
        reasons.append(_reason(verify, header))

    threads = [threading.Thread(target=call, args=(h,), daemon=True) for h in headers]
    for thread in threads:
        thread.start()
    return reasons, threads


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for `condition`, which the code under test makes true either way."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.parametrize("slow", ["discovery", "jwks"])
def test_fresh_issuers_get_a_bounded_number_of_outbound_fetches(
    ca: TestCA,
    agents: JwksServer,
    keys: JwksServer,
    agent_key: PrivateJWK,
    caplog: pytest.LogCaptureFixture,
    slow: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="pactmw")
    configured = RegisteredAgent(
        issuer="https://configured.example", jwks_uri=f"https://{CONFIGURED}/configured.json"
    )
    registry = AgentRegistry([configured])
    keys.set_json("/configured.json", public_key_set([agent_key]).to_dict())
    verifier = _verifier(_policy(ca, agents, keys), registry)
    fresh = [_publish(agents, keys, f"fresh-{n}", agent_key) for n in range(CROWD)]
    held = agents if slow == "discovery" else keys
    paths = [
        f"/fresh-{n}{CONFIG}" if slow == "discovery" else f"/fresh-{n}.json" for n in range(CROWD)
    ]
    held.delay = 120.0  # held until the server stops
    held.mode = Mode.SLOW
    try:
        headers = [_token(issuer, agent_key, "crowd") for issuer in fresh]
        reasons, threads = _crowd(verifier.verify, headers)
        # Every caller either reached the slow server or was refused; the server counts.
        _until(
            lambda: sum(held.hits[p] for p in paths) + len(reasons) >= CROWD,
            "callers neither fetched nor were refused",
        )
        assert sum(held.hits[p] for p in paths) <= MAX_NEW_FETCHES
        assert set(reasons) <= {"unknown_issuer", "jwks_unavailable"}
        # While the slots are taken, a configured agent is served as always: its key set
        # is not a new key of the request's choosing.
        if slow == "discovery":
            token = _token(configured.issuer, agent_key, "configured")
            assert verifier.verify(token).issuer == configured.issuer
    finally:
        held.close()  # wakes the held handlers: their fetches fail at once
    for thread in threads:
        thread.join(timeout=30)
    # Said once per burst, by each cache that refused (discovery may refuse too while the
    # key sets are held: its fetches then crowd in as well).
    caches = [
        r.getMessage().split(" fetch refused:")[0]
        for r in caplog.records
        if "reason=fetch_limit" in r.getMessage()
    ]
    assert sorted(set(caches)) == sorted(caches), caches
    assert ("OIDC discovery" if slow == "discovery" else "JWKS") in caches
