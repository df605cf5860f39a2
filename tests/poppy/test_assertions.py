"""Client assertions (§4.1) and Session assertions (§4.2), verified against an agent whose
metadata and keys are served over real TLS, minted with the SDK's own claim builders and
signer, and mutated as each `security.client-assertion-*` / `security.session-assertion-*`
case of the SDK's conformance fixtures says."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from personal_agent_protocol.demo.kit import AgentIdentity
from personal_agent_protocol.sessions import (
    build_client_assertion_claims,
    build_session_assertion_claims,
)

from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.encoding import b64url_encode, json_dumps
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk, private_jwk_from_key
from pactmw.core.replay import MemoryReplayMemory, StoreReplayMemory
from pactmw.protocols.poppy import (
    CLIENT_ASSERTION_TYPE,
    AssertionVerifier,
    PoppyError,
    poppy_response,
)
from pactmw.store import SqliteStore
from tests.poppy.conftest import AGENT_DOMAIN, conformance_cases
from tests.support.clock import FakeClock
from tests.support.jwks_server import JwksServer, Mode
from tests.support.logs import HOSTILE, assert_logs_tame
from tests.support.tls import TestCA

ISSUER = "https://shop.example/poppy/shop"
TOKEN_ENDPOINT = "https://shop.example/poppy/shop/token"
NOW = 1_800_000_000.0
USER_ID = "usr_2b7f0d9c"
STRANGER = generate_private_jwk("ES256", kid="key-1")  # same kid, another key

CASES = conformance_cases("security", role="company")
CLIENT_CASES = [c for c in CASES if c.get("target") == "client_assertion"]
SESSION_CASES = [c for c in CASES if c.get("target") == "session_assertion"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def verifier(clients: ClientMetadataCache, clock: FakeClock) -> AssertionVerifier:
    return AssertionVerifier(
        issuer=ISSUER, clients=clients, replay=MemoryReplayMemory(), clock=clock
    )


def sdk_claims(agent: AgentIdentity, kind: str, now: float, lifetime: int = 60) -> dict[str, Any]:
    """Claims built by the SDK's own builders (what a real Poppy agent sends)."""
    when = datetime.fromtimestamp(now, timezone.utc)
    if kind == "client_assertion":
        return dict(
            build_client_assertion_claims(
                client_id=agent.client_id, issuer=ISSUER, now=when, lifetime_seconds=lifetime
            ).model_dump(mode="json")
        )
    return dict(
        build_session_assertion_claims(
            client_id=agent.client_id,
            pairwise_user_id=USER_ID,
            issuer=ISSUER,
            now=when,
            lifetime_seconds=lifetime,
        ).model_dump(mode="json")
    )


def sdk_signed(agent: AgentIdentity, claims: dict[str, Any]) -> str:
    """Signed by the SDK's own `JoseSigner` (header `typ: JWT`, its `kid`)."""
    token = asyncio.run(agent.signer().sign(claims, purpose="client_assertion"))
    return token.get_secret_value()


def mint(agent: AgentIdentity, target: str, mutation: dict[str, Any]) -> str:
    """An assertion with one conformance mutation applied. Unknown mutations fail the test,
    so a new kind of case in a later fixture file cannot pass unnoticed."""
    mutation = dict(mutation)
    claims = sdk_claims(agent, target, NOW + mutation.pop("iat_offset", 0))
    if "lifetime" in mutation:
        claims["exp"] = claims["iat"] + mutation.pop("lifetime")
    if "aud" in mutation:
        aud = mutation.pop("aud")
        claims["aud"] = TOKEN_ENDPOINT if aud == "token_endpoint" else aud
    if mutation.pop("aud_array", False):
        claims["aud"] = [ISSUER]
    if "iss" in mutation:
        claims["iss"] = mutation.pop("iss")
    mutation.pop("replay", None)  # the test sends it twice
    own = private_jwk_from_key(agent.private_key, kid=agent.kid)
    if "alg" in mutation:
        alg = mutation.pop("alg")
        header = {"alg": alg, "typ": "JWT", "kid": agent.kid}
        signing_input = f"{b64url_encode(json_dumps(header))}.{b64url_encode(json_dumps(claims))}"
        if alg == "none":
            return signing_input + "."
        if alg == "HS256":
            # The classic confusion: HMAC keyed with the agent's public JWK as published.
            secret = json.dumps(agent.jwks["keys"][0]).encode()
            mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
            return f"{signing_input}.{b64url_encode(mac)}"
        # RS256 in the header, an ES256 signature by the EC key.
        return sign_compact(claims, own, typ="JWT", extra_header={"alg": alg})
    if mutation.pop("signer", None) == "stranger":
        embed = mutation.pop("embed_jwk", False)
        public = {k: v for k, v in STRANGER.to_dict().items() if k in ("kty", "crv", "x", "y")}
        extra = {"jwk": public} if embed else {}
        return sign_compact(claims, STRANGER, typ="JWT", extra_header=extra)
    if "typ" in mutation:
        return sign_compact(claims, own, typ=mutation.pop("typ"))
    assert not mutation, f"unhandled mutation {mutation}"
    return sdk_signed(agent, claims)


def client_form(agent: AgentIdentity, assertion: str) -> dict[str, str]:
    return {
        "client_id": agent.client_id,
        "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": assertion,
    }


def run_case(case: dict[str, Any], agent: AgentIdentity, verifier: AssertionVerifier) -> None:
    target, expect = case["target"], case["expect"]
    assertion = mint(agent, target, case["mutation"])
    attempts = 2 if case["mutation"].get("replay") else 1

    def once() -> None:
        if target == "client_assertion":
            verifier.verify_client(client_form(agent, assertion))
        else:
            verifier.verify_session(assertion, client_id=agent.client_id)

    if expect["status"] == 200:
        once()
        return
    for _ in range(attempts - 1):
        once()
    with pytest.raises(PoppyError) as caught:
        once()
    assert (caught.value.status, caught.value.error) == (expect["status"], expect["error"])
    response = poppy_response(caught.value)
    assert assertion.encode() not in response.body  # security.refusals-disclose-no-credential
    assert assertion.split(".")[1].encode() not in response.body


@pytest.mark.parametrize("case", CLIENT_CASES, ids=[c["id"] for c in CLIENT_CASES])
def test_security_client_assertion_cases(
    case: dict[str, Any], agent: AgentIdentity, verifier: AssertionVerifier
) -> None:
    run_case(case, agent, verifier)


@pytest.mark.parametrize("case", SESSION_CASES, ids=[c["id"] for c in SESSION_CASES])
def test_security_session_assertion_cases(
    case: dict[str, Any], agent: AgentIdentity, verifier: AssertionVerifier
) -> None:
    run_case(case, agent, verifier)


def test_the_fixture_cases_are_the_ones_this_file_knows() -> None:
    """Every assertion case of the fixture file runs above; a renamed or new one shows here."""
    assert {c["id"] for c in CLIENT_CASES} == {
        "security.client-assertion-alg-none",
        "security.client-assertion-hs256-public-key",
        "security.client-assertion-rs256-header-on-ec-key",
        "security.client-assertion-embedded-key-ignored",
        "security.client-assertion-bad-audience",
        "security.client-assertion-audience-array",
        "security.client-assertion-token-endpoint-audience",
    }
    assert {c["id"] for c in SESSION_CASES} == {
        "security.session-assertion-bad-audience",
        "security.session-assertion-token-endpoint-audience",
        "security.session-assertion-five-minutes",
        "security.session-assertion-wrong-issuer",
        "security.session-assertion-clock-skew-tolerated",
        "security.session-assertion-from-the-future",
        "security.session-assertion-expired",
        "security.session-assertion-long-lived",
        "security.session-assertion-replay",
        "security.browser-assertion-at-token-endpoint",
    }


# -- beyond the fixtures ------------------------------------------------------------------


def test_a_good_client_assertion(agent: AgentIdentity, verifier: AssertionVerifier) -> None:
    verified = verifier.verify_client(client_form(agent, mint(agent, "client_assertion", {})))
    assert verified.client_id == verified.subject == agent.client_id
    assert verified.metadata.client_name == "Atlas"
    assert verified.metadata.extensions == {"operations": {"version": "1"}}


def test_a_good_session_assertion(agent: AgentIdentity, verifier: AssertionVerifier) -> None:
    verified = verifier.verify_session(
        mint(agent, "session_assertion", {}), client_id=agent.client_id
    )
    assert verified.subject == USER_ID
    assert verified.kind == "session"


def test_client_id_may_be_left_out_of_the_form(
    agent: AgentIdentity, verifier: AssertionVerifier
) -> None:
    form = client_form(agent, mint(agent, "client_assertion", {}))
    del form["client_id"]
    assert verifier.verify_client(form).client_id == agent.client_id


def test_the_form_client_id_must_be_the_assertions(
    agent: AgentIdentity, verifier: AssertionVerifier, agent_site: JwksServer
) -> None:
    form = client_form(agent, mint(agent, "client_assertion", {}))
    form["client_id"] = "https://stranger.example/agent.json"
    agent_site.set_json("/agent.json", agent.metadata)
    with pytest.raises(PoppyError) as caught:
        verifier.verify_client(form)
    assert caught.value.error == "invalid_client"


@pytest.mark.parametrize(
    "form",
    [
        {},
        {"client_assertion_type": "urn:other", "client_assertion": "a.b.c"},
        {"client_assertion_type": CLIENT_ASSERTION_TYPE},
    ],
)
def test_a_form_without_a_jwt_bearer_assertion(
    form: dict[str, str], verifier: AssertionVerifier
) -> None:
    with pytest.raises(PoppyError) as caught:
        verifier.verify_client(form)
    assert (caught.value.status, caught.value.error) == (401, "invalid_client")


def test_a_client_assertion_is_not_a_session_assertion(
    agent: AgentIdentity, verifier: AssertionVerifier
) -> None:
    # The client assertion's sub is the client_id: as a Session assertion it would name a
    # "user" that is the agent itself. It verifies as one, but the jti spaces are apart:
    assertion = mint(agent, "client_assertion", {})
    verifier.verify_client(client_form(agent, assertion))
    verifier.verify_session(assertion, client_id=agent.client_id)
    with pytest.raises(PoppyError):
        verifier.verify_session(assertion, client_id=agent.client_id)


def test_a_client_whose_metadata_cannot_be_had(
    verifier: AssertionVerifier, agent: AgentIdentity
) -> None:
    claims = sdk_claims(agent, "client_assertion", NOW)
    claims["iss"] = claims["sub"] = "https://agent.example/missing.json"
    form = {
        "client_id": "https://agent.example/missing.json",
        "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": sdk_signed(agent, claims),
    }
    with pytest.raises(PoppyError) as caught:
        verifier.verify_client(form)
    assert caught.value.error == "invalid_client"


def test_an_agent_whose_site_fails_for_a_moment_still_signs_in(
    ca: TestCA, agent_site: JwksServer, agent: AgentIdentity, clock: FakeClock
) -> None:
    # The agent's metadata and keys were verified, their cache time is over, and the agent's
    # site answers 500 on the refetch: the agent's assertions still verify (stale-if-error).
    cache_clock = FakeClock(1000.0)
    policy = ca.policy(agent_site.port, AGENT_DOMAIN, timeout=3.0)
    clients = ClientMetadataCache(policy, clock=cache_clock)
    verifier = AssertionVerifier(
        issuer=ISSUER, clients=clients, replay=MemoryReplayMemory(), clock=clock
    )
    verifier.verify_client(client_form(agent, mint(agent, "client_assertion", {})))
    cache_clock.advance(clients.cache_policy.max_ttl)
    agent_site.mode = Mode.FAIL
    try:
        verified = verifier.verify_client(client_form(agent, mint(agent, "client_assertion", {})))
    finally:
        agent_site.mode = Mode.OK  # the site is shared by the whole session
    assert verified.metadata.client_name == "Atlas"


@pytest.mark.parametrize(
    "changes",
    [
        {"jti": "short"},
        {"jti": None},
        {"iat": "1800000000"},
        {"exp": None},
        {"sub": ""},
        {"sub": "u" * 257},
    ],
)
def test_claims_have_their_types(
    agent: AgentIdentity, verifier: AssertionVerifier, changes: dict[str, Any]
) -> None:
    claims = sdk_claims(agent, "session_assertion", NOW)
    for name, value in changes.items():
        if value is None:
            del claims[name]
        else:
            claims[name] = value
    with pytest.raises(PoppyError) as caught:
        verifier.verify_session(sdk_signed(agent, claims), client_id=agent.client_id)
    assert caught.value.error == "invalid_grant"


def test_replay_is_refused_across_two_store_handles(
    agent: AgentIdentity, clients: ClientMetadataCache, tmp_path: Path
) -> None:
    def verifier_on(path: Path) -> AssertionVerifier:
        replay = StoreReplayMemory(SqliteStore(path), namespace="poppy.assertion")
        return AssertionVerifier(issuer=ISSUER, clients=clients, replay=replay, clock=lambda: NOW)

    one, two = verifier_on(tmp_path / "s.db"), verifier_on(tmp_path / "s.db")
    assertion = mint(agent, "session_assertion", {})
    one.verify_session(assertion, client_id=agent.client_id)
    with pytest.raises(PoppyError) as caught:
        two.verify_session(assertion, client_id=agent.client_id)
    assert caught.value.error == "invalid_grant"


def test_a_jti_is_remembered_through_the_last_instant_the_assertion_is_accepted(
    agent: AgentIdentity, verifier: AssertionVerifier, clock: FakeClock
) -> None:
    # `exp` + skew is still accepted, so the record must still hold then: a memory forgets
    # a record once `expires_at <= now`.
    assertion = mint(agent, "session_assertion", {})
    first = verifier.verify_session(assertion, client_id=agent.client_id)
    clock.now = first.expires_at + verifier.skew
    with pytest.raises(PoppyError) as caught:
        verifier.verify_session(assertion, client_id=agent.client_id)
    assert caught.value.error == "invalid_grant"
    assert caught.value.detail == "the jti was used before"


def test_async_drivers(agent: AgentIdentity, clients: ClientMetadataCache, tmp_path: Path) -> None:
    replay = StoreReplayMemory(SqliteStore(tmp_path / "a.db"), namespace="poppy.assertion")
    verifier = AssertionVerifier(issuer=ISSUER, clients=clients, replay=replay, clock=lambda: NOW)
    client_assertion = mint(agent, "client_assertion", {})
    session_assertion = mint(agent, "session_assertion", {})

    async def run() -> None:
        verified = await verifier.averify_client(client_form(agent, client_assertion))
        assert verified.client_id == agent.client_id
        session = await verifier.averify_session(session_assertion, client_id=agent.client_id)
        assert session.subject == USER_ID
        with pytest.raises(PoppyError):
            await verifier.averify_client(client_form(agent, client_assertion))

    asyncio.run(run())


def test_a_hostile_client_id_or_metadata_cannot_forge_hide_or_flood_a_log_line(
    verifier: AssertionVerifier,
    agent: AgentIdentity,
    agent_site: JwksServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The refusal names the client the caller claims and why: both the caller's text.
    caplog.set_level(logging.DEBUG, logger="pactmw")
    claims = sdk_claims(agent, "client_assertion", NOW)
    for client_id in (HOSTILE, f"https://{AGENT_DOMAIN}/{HOSTILE}", agent.client_id):
        form = {
            "client_id": client_id,
            "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": sdk_signed(agent, {**claims, "iss": client_id, "sub": HOSTILE}),
        }
        with pytest.raises(PoppyError):
            verifier.verify_client(form)
    # A document the agent's site serves: its text quoted in the refusal.
    hostile_site = f"https://{AGENT_DOMAIN}/hostile.json"
    agent_site.set_json("/hostile.json", {**agent.metadata, "client_id": HOSTILE})
    form = {
        "client_id": hostile_site,
        "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": sdk_signed(agent, {**claims, "iss": hostile_site, "sub": hostile_site}),
    }
    with pytest.raises(PoppyError):
        verifier.verify_client(form)
    messages = assert_logs_tame(caplog.records)
    assert sum(m.startswith("assertion refused: error=invalid_client") for m in messages) >= 4
    assert any(m.startswith("client metadata refused: reason=client_id_mismatch") for m in messages)
