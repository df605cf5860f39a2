"""Client assertions naming fresh `client_id` URLs, one after another or all at once.

A Poppy `client_id` is a URL the caller picks, and each new one costs a metadata fetch and a
cache entry (and its `jwks_uri` a key-set fetch and another). Such a stream must neither push
out the metadata and keys of an agent that really authenticates, nor hold more than
`MAX_NEW_FETCHES` outbound fetches at once per cache: the excess is refused at once, as an
`unfetchable` client (401 `invalid_client`), and said once in the log.

The agent's website is a real https server on 127.0.0.1 that counts what it is asked for.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from personal_agent_protocol.demo.kit import AgentIdentity

from pactmw.core._shared_fetch import MAX_NEW_FETCHES
from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, private_jwk_from_key
from pactmw.core.keys import CachePolicy
from pactmw.core.replay import MemoryReplayMemory
from pactmw.protocols.poppy import CLIENT_ASSERTION_TYPE, AssertionVerifier, PoppyError
from tests.poppy.conftest import AGENT_DOMAIN
from tests.support.clock import FakeClock
from tests.support.jwks_server import JwksServer, Mode
from tests.support.tls import TestCA

ISSUER = "https://shop.example/poppy/shop"
NOW = 1_800_000_000.0
#: Small caches, so that overflowing them takes a few hundred fetches: the rule under test
#: does not depend on the size.
CACHE_SIZE = 40
FLOOD = 3 * CACHE_SIZE
#: More callers at once than fetches may run for new keys.
CROWD = MAX_NEW_FETCHES + 24


@pytest.fixture
def site(ca: TestCA, agent: AgentIdentity) -> Iterator[JwksServer]:
    """The agent's website, this test's own (its counts start at zero)."""
    context = ca.server_context(AGENT_DOMAIN)
    with JwksServer(agent.jwks, jwks_path="/jwks.json", server_context=context) as server:
        server.set_json(agent.path, agent.metadata)
        yield server


def _verifier(ca: TestCA, site: JwksServer, clock: FakeClock) -> AssertionVerifier:
    # A held fetch is ended by stopping its server, not by the deadline.
    policy = ca.policy(site.port, AGENT_DOMAIN, timeout=60.0)
    clients = ClientMetadataCache(policy, CachePolicy(max_uris=CACHE_SIZE), clock=clock)
    return AssertionVerifier(
        issuer=ISSUER, clients=clients, replay=MemoryReplayMemory(), clock=clock
    )


def _form(client_id: str, key: PrivateJWK, jti: str) -> dict[str, str]:
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": ISSUER,
        "iat": NOW,
        "exp": NOW + 60,
        "jti": jti.rjust(16, "0"),
    }
    return {
        "client_id": client_id,
        "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": sign_compact(claims, key, typ="JWT"),
    }


def _publish(site: JwksServer, agent: AgentIdentity, name: str) -> str:
    """Serve a metadata document and key set at fresh URLs, as an attacker could; its
    client_id."""
    client_id = f"https://{AGENT_DOMAIN}/{name}.json"
    jwks_uri = f"https://{AGENT_DOMAIN}/{name}-jwks.json"
    site.set_json(f"/{name}.json", {**agent.metadata, "client_id": client_id, "jwks_uri": jwks_uri})
    site.set_json(f"/{name}-jwks.json", agent.jwks)
    return client_id


def _error(verifier: AssertionVerifier, form: dict[str, str]) -> str:
    try:
        verifier.verify_client(form)
    except PoppyError as exc:
        return f"{exc.error}: {exc.detail}"
    return "accepted"


def test_fresh_client_ids_do_not_push_out_an_agent_that_authenticates(
    ca: TestCA, agent: AgentIdentity, site: JwksServer
) -> None:
    verifier = _verifier(ca, site, FakeClock(NOW))
    own = private_jwk_from_key(agent.private_key, kid=agent.kid)
    stranger = generate_private_jwk("ES256", kid=agent.kid)  # same kid, another key
    assert verifier.verify_client(_form(agent.client_id, own, "first")).client_id == (
        agent.client_id
    )
    fresh = [_publish(site, agent, f"fresh-{n}") for n in range(FLOOD)]
    for n, client_id in enumerate(fresh):
        assert _error(verifier, _form(client_id, stranger, f"f{n}")) == (
            "invalid_client: the signature does not verify"
        )
    assert site.hits["/fresh-0-jwks.json"] == 1  # every fresh client_id did cost its fetches
    again = verifier.verify_client(_form(agent.client_id, own, "second"))
    assert again.client_id == agent.client_id
    assert site.hits[agent.path] == 1
    assert site.hits["/jwks.json"] == 1


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for `condition`, which the code under test makes true either way."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_fresh_client_ids_get_a_bounded_number_of_outbound_fetches(
    ca: TestCA, agent: AgentIdentity, site: JwksServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pactmw")
    verifier = _verifier(ca, site, FakeClock(NOW))
    own = private_jwk_from_key(agent.private_key, kid=agent.kid)
    fresh = [_publish(site, agent, f"fresh-{n}") for n in range(CROWD)]
    paths = [f"/fresh-{n}.json" for n in range(CROWD)]
    errors: list[str] = []

    def call(client_id: str) -> None:
        errors.append(_error(verifier, _form(client_id, own, "crowd")))

    site.delay = 120.0  # held until the server stops
    site.mode = Mode.SLOW
    threads = [threading.Thread(target=call, args=(c,), daemon=True) for c in fresh]
    try:
        for thread in threads:
            thread.start()
        # Every caller either reached the slow server or was refused; the server counts.
        _until(
            lambda: sum(site.hits[p] for p in paths) + len(errors) >= CROWD,
            "callers neither fetched nor were refused",
        )
        assert sum(site.hits[p] for p in paths) <= MAX_NEW_FETCHES
        assert set(errors) <= {"invalid_client: no key for the client: unfetchable"}
    finally:
        site.close()  # wakes the held handlers: their fetches fail at once
    for thread in threads:
        thread.join(timeout=30)
    limit_lines = [r for r in caplog.records if "reason=fetch_limit" in r.getMessage()]
    assert len(limit_lines) == 1, [r.getMessage() for r in limit_lines]


def test_fresh_client_ids_get_a_bounded_number_of_outbound_fetches_under_asyncio(
    ca: TestCA, agent: AgentIdentity, site: JwksServer
) -> None:
    verifier = _verifier(ca, site, FakeClock(NOW))
    own = private_jwk_from_key(agent.private_key, kid=agent.kid)
    fresh = [_publish(site, agent, f"fresh-{n}") for n in range(CROWD)]
    errors: list[str] = []

    async def call(client_id: str) -> None:
        try:
            await verifier.averify_client(_form(client_id, own, "crowd"))
        except PoppyError as exc:
            errors.append(f"{exc.error}: {exc.detail}")

    async def main() -> None:
        tasks = [asyncio.create_task(call(c)) for c in fresh]
        try:
            # The fetches that got a slot wait on the executor or the held server; the
            # others are refused without waiting for anything.
            deadline = time.monotonic() + 60
            while len(errors) < CROWD - MAX_NEW_FETCHES:
                assert time.monotonic() < deadline, "no fetch was refused"
                await asyncio.sleep(0.01)
            assert set(errors) == {"invalid_client: no key for the client: unfetchable"}
            assert site.total_hits <= MAX_NEW_FETCHES
        finally:
            site.close()  # wakes the held handlers: their fetches fail at once
            await asyncio.gather(*tasks)

    site.delay = 120.0  # held until the server stops
    site.mode = Mode.SLOW
    asyncio.run(main())
