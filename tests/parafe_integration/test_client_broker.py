"""The personal agent's own broker credential (`pactmw.client.parafe`), against a stand-in
broker on 127.0.0.1 in @getparafe/sdk 0.5's wire format: register, claim link, claim status
(and waiting for the claim), renewal, filing its receipt copies with acknowledgments
verified, and what is tried again. The SDK's tests/claim-links, audience-and-renewal and
http-retry tests are the model."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from pactmw.client import (
    AsyncParafeBrokerClient,
    BrokerCredential,
    BrokerRefused,
    NetworkError,
    ParafeBrokerClient,
    ResponseInvalid,
    SyncTransport,
)
from pactmw.client.http import HttpResponse
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    Ap2Outcome,
    BrokerRetry,
    ParafeError,
    ReceiptSigner,
    agent_did,
    receipt_hash,
)
from tests.parafe.support import decode
from tests.parafe_integration.agent_broker import AgentBroker
from tests.parafe_integration.broker import DROP

FAST = BrokerRetry(backoff=0.01)
MANDATE = "eyJhbGciOiJFUzI1NiJ9.eyJfc2RfYWxnIjoic2hhLTI1NiJ9.c2ln~WyJzIiwiYSIsMV0~"


@pytest.fixture
def broker() -> Iterator[AgentBroker]:
    with AgentBroker() as broker:
        yield broker


def client(broker: AgentBroker, **options: Any) -> ParafeBrokerClient:
    return ParafeBrokerClient(broker.url, retry=FAST, **options)


def registered(broker: AgentBroker, alg: str = "ES256") -> ParafeBrokerClient:
    agent = client(broker)
    agent.register(generate_private_jwk(alg))
    return agent


def calls(broker: AgentBroker, action: str) -> list[dict[str, Any]]:
    return [r for r in broker.agent_requests if r["path"].endswith("/" + action)]


# -- registration ------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_register_without_an_api_key_gives_a_credential_and_a_claim_link(
    broker: AgentBroker, alg: str
) -> None:
    key = generate_private_jwk(alg)
    agent = client(broker)
    registration = agent.register(key, name="alex-assistant", principal_name="Alex")
    held = registration.credential
    assert agent.credential == held
    assert held.agent_id in broker.agents
    assert held.credential == broker.agents[held.agent_id]["credential"]
    assert held.key == key
    assert (registration.identity_assurance, registration.verification_tier) == (
        "self_registered",
        "unverified",
    )
    assert registration.did == agent_did(held.agent_id)
    link = registration.claim_link
    assert link is not None
    assert link.url == f"https://platform.parafe.ai/claim?code={link.code}"
    (call,) = calls(broker, "register")
    assert call["authorization"] is None  # no API key: the broker's keyless path
    assert call["body"]["agent_type"] == "personal"
    assert (call["body"]["agent_name"], call["body"]["principal_name"]) == (
        "alex-assistant",
        "Alex",
    )
    spki = key.public.key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert base64.b64decode(call["body"]["public_key"]) == spki
    header, claims = decode(call["pop"])
    assert header == {"alg": alg, "typ": "parafe-pop+jwt"}
    assert set(claims) == {"htm", "htu", "jti", "iat"}
    assert (claims["htm"], claims["htu"]) == ("POST", broker.url + "/agents/register")


def test_register_sends_only_what_is_given_and_is_never_tried_again(broker: AgentBroker) -> None:
    agent = client(broker)
    agent.register(generate_private_jwk("EdDSA"), agent_type="enterprise")
    (call,) = calls(broker, "register")
    assert set(call["body"]) == {"agent_type", "public_key"}
    broker.failures = [(503, {"error": "unavailable"}, {})]
    with pytest.raises(BrokerRefused) as refused:
        agent.register(generate_private_jwk("EdDSA"))
    assert (refused.value.status, refused.value.code) == (503, "unavailable")
    assert len(calls(broker, "register")) == 2  # one more request, not retried
    with pytest.raises(ValueError, match="agent_type"):
        agent.register(generate_private_jwk("EdDSA"), agent_type="robot")
    with pytest.raises(ValueError, match="Ed25519 or P-256"):
        agent.register(generate_private_jwk("RS256"))


def test_calls_as_the_agent_need_a_credential_first(broker: AgentBroker) -> None:
    with pytest.raises(RuntimeError, match="register"):
        client(broker).claim_status()
    assert broker.agent_requests == []


# -- claim links and claim status ----------------------------------------------------------------


def test_a_new_claim_link_authenticates_as_the_agent_and_replaces_the_last(
    broker: AgentBroker,
) -> None:
    agent = registered(broker)
    held = agent.credential
    assert held is not None
    first = broker.agents[held.agent_id]["code"]
    link = agent.create_claim_link()
    assert link.code == broker.agents[held.agent_id]["code"] != first
    (call,) = calls(broker, "claim-link")
    assert call["method"] == "POST"
    assert call["authorization"] == f"Bearer {held.credential}"
    claims = decode(call["pop"])[1]
    assert claims["agent_id"] == held.agent_id
    assert claims["htu"] == f"{broker.url}/agents/{held.agent_id}/claim-link"
    broker.approve(link.code)
    with pytest.raises(BrokerRefused) as refused:
        agent.create_claim_link()
    assert (refused.value.status, refused.value.code) == (409, "already_claimed")


def test_claim_status_before_and_after_the_person_approves(broker: AgentBroker) -> None:
    agent = registered(broker)
    held = agent.credential
    assert held is not None
    before = agent.claim_status()
    assert (before.claimed, before.credential_current) == (False, True)
    assert before.identity_assurance == "self_registered"
    broker.approve(broker.agents[held.agent_id]["code"])
    after = agent.claim_status(wait=3)
    assert (after.claimed, after.credential_current) == (True, False)
    assert (after.identity_assurance, after.principal_tier) == ("claimed", "email_verified")
    assert after.parties == {"principal_type": "personal"}
    # The proof is bound to the URL without its query (the stand-in checks it).
    waited = calls(broker, "claim-status")[-1]
    assert waited["query"] == "wait=3"
    assert decode(waited["pop"])[1]["htm"] == "GET"
    for bad in (-1, 61):
        with pytest.raises(ValueError, match="0 to 60"):
            agent.claim_status(wait=bad)
    with pytest.raises(TypeError):
        agent.claim_status(wait=1.5)  # type: ignore[arg-type]


def test_wait_for_claim_asks_again_with_a_new_proof_until_approved(broker: AgentBroker) -> None:
    agent = registered(broker)
    held = agent.credential
    assert held is not None
    code = broker.agents[held.agent_id]["code"]
    timer = threading.Timer(1.5, broker.approve, args=(code,))
    timer.start()
    try:
        status = agent.wait_for_claim(timeout=20, wait=1)
    finally:
        timer.cancel()
    assert status.claimed
    asked = calls(broker, "claim-status")
    assert len(asked) >= 2
    assert len({decode(r["pop"])[1]["jti"] for r in asked}) == len(asked)
    assert all(r["query"] == "wait=1" for r in asked)


def test_wait_for_claim_gives_up_after_its_timeout_and_on_refusals(broker: AgentBroker) -> None:
    agent = registered(broker)
    assert not agent.wait_for_claim(timeout=0.1, wait=1).claimed
    with pytest.raises(ValueError, match="at least 1"):
        agent.wait_for_claim(wait=0)
    broker.failures = [(401, {"error": "agent_inactive", "message": "Agent is revoked"}, {})]
    with pytest.raises(BrokerRefused, match="revoked"):
        agent.wait_for_claim(timeout=5, wait=1)


# -- renewal -----------------------------------------------------------------------------------


def test_renewal_after_a_claim_replaces_the_credential_and_the_old_one_is_refused(
    broker: AgentBroker, tmp_path: Path
) -> None:
    agent = registered(broker)
    old = agent.credential
    assert old is not None
    unchanged = agent.renew()
    assert not unchanged.renewed
    assert unchanged.credential == agent.credential == old
    broker.approve(broker.agents[old.agent_id]["code"])
    renewal = agent.renew()
    assert renewal.renewed
    assert (renewal.reason, renewal.current_tier) == ("identity_changed", "email_verified")
    assert agent.credential == renewal.credential
    assert renewal.credential.credential != old.credential
    assert renewal.credential.key == old.key  # renewal keeps the registered key
    assert renewal.credential.expires_at == "2026-12-29T13:00:00.000Z"
    assert agent.claim_status().credential_current
    stale = ParafeBrokerClient(broker.url, credential=old)
    with pytest.raises(BrokerRefused) as refused:
        stale.claim_status()
    assert (refused.value.status, refused.value.code) == (401, "invalid_credential")
    # The held credential survives a restart, its key readable by the owner only.
    path = tmp_path / "parafe-credential.json"
    renewal.credential.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert BrokerCredential.load(path).to_dict() == renewal.credential.to_dict()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "JSON object"),
        ({"credential": "c", "key": {}}, "agent_id"),
        ({"agent_id": "a", "key": {}}, "credential"),
        ({"agent_id": "a", "credential": "c", "key": {"kty": "EC"}}, "private key"),
    ],
)
def test_a_saved_credential_that_is_not_one_is_refused(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BrokerCredential.from_dict(data)


def test_a_file_that_is_not_a_credential_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("not json")
    with pytest.raises(ValueError, match="not a saved broker credential"):
        BrokerCredential.load(path)


# -- what is tried again -----------------------------------------------------------------------


def test_claim_status_rides_out_failures_with_a_fresh_proof_each_time(
    broker: AgentBroker,
) -> None:
    agent = registered(broker)
    broker.failures = [(503, {"error": "unavailable"}, {"Retry-After": "0"}), DROP, (500, {}, {})]
    assert not agent.claim_status().claimed
    asked = calls(broker, "claim-status")
    assert len(asked) == 4
    # The stand-in refuses a replayed jti: the last answer proves every proof was new.
    assert len({decode(r["pop"])[1]["jti"] for r in asked}) == 4


def test_a_claim_link_or_a_renewal_is_not_resent_after_it_may_have_run(
    broker: AgentBroker,
) -> None:
    agent = registered(broker)
    broker.failures = [DROP]
    with pytest.raises(NetworkError):
        agent.create_claim_link()
    assert len(calls(broker, "claim-link")) == 1
    broker.failures = [(504, {"error": "timeout"}, {})]
    with pytest.raises(BrokerRefused):
        agent.renew()
    assert len(calls(broker, "renew")) == 1
    # The edge refused it before it ran (503): sent again, with a new proof.
    broker.failures = [(503, {"error": "unavailable"}, {})]
    agent.create_claim_link()
    assert len(calls(broker, "claim-link")) == 3
    # A 4xx is never tried again.
    broker.failures = [(400, {"error": "validation_error", "message": "no"}, {})]
    with pytest.raises(BrokerRefused, match="no"):
        agent.renew()
    assert len(calls(broker, "renew")) == 2


def test_a_refused_handshake_carries_the_claim_link_and_the_hint() -> None:
    answer: dict[str, Any] = {
        "error": "tier_insufficient",
        "message": "Scope 'place-order' requires verification_tier 'email_verified'",
        "claim": {
            "claim_url": "https://platform.parafe.ai/claim?code=7KQ2-M9XD-4H",
            "code": "7KQ2-M9XD-4H",
            "expires_at": "2026-09-30T12:30:00.000Z",
        },
        "hint": "Ask the person you act for to open this link to verify you.",
    }
    response = HttpResponse(403, body=json.dumps(answer).encode(), url="https://b/x")
    refused = BrokerRefused(response, response.json())
    assert refused.code == "tier_insufficient"
    assert refused.claim_link is not None
    assert refused.claim_link.code == "7KQ2-M9XD-4H"
    assert refused.hint == answer["hint"]
    phishy = {**answer, "claim": {**answer["claim"], "claim_url": "http://evil.example/c"}}
    other = HttpResponse(403, body=json.dumps(phishy).encode(), url="https://b/x")
    assert BrokerRefused(other, other.json()).claim_link is None


def test_a_claim_link_that_is_not_https_is_not_passed_on(broker: AgentBroker) -> None:
    agent = registered(broker)
    broker.failures = [
        (201, {"claim_url": "http://evil.example/claim", "code": "A", "expires_at": "x"}, {})
    ]
    with pytest.raises(ResponseInvalid, match="not a claim link"):
        agent.create_claim_link()


# -- filing the agent's copies -----------------------------------------------------------------


def test_the_agent_files_its_receipt_copies_and_gets_verified_acknowledgments(
    broker: AgentBroker,
) -> None:
    agent = registered(broker)
    held = agent.credential
    assert held is not None
    signer = ReceiptSigner(held.key, agent_did(held.agent_id))
    receipt = signer.sign(session_id="sess_1", consent_token="a.b.c", action="read")
    filed = agent.file_receipt("sess_1", receipt)
    assert (filed.ack.seq, filed.ack.receipt_hash) == (1, receipt_hash(receipt))
    assert filed.acknowledgment == broker.index["sess_1"][0]["acknowledgment"]
    assert not filed.duplicate
    again = agent.file_receipt("sess_1", receipt)
    assert again.duplicate
    assert again.acknowledgment == filed.acknowledgment
    ap2 = signer.ap2_receipt("checkout", Ap2Outcome(order_id="o"), MANDATE)
    kind = agent.file_receipt("sess_1", ap2.receipt, ap2.kind)
    assert (kind.kind, kind.ack.kind, kind.ack.seq) == ("ap2.checkout_receipt",) * 2 + (2,)
    record = broker.filed[-1]
    assert record["authorization"] == f"Bearer {held.credential}"
    assert decode(record["pop"])[1]["session_id"] == "sess_1"


def test_an_acknowledgment_not_signed_by_the_broker_is_refused(broker: AgentBroker) -> None:
    agent = registered(broker)
    stranger = generate_private_jwk("ES256", kid=broker.key.kid)

    def forged(record: dict[str, Any]) -> tuple[int, Any]:
        honest = broker.acknowledge(record["session_id"], record["body"]["receipt"], "x")
        claims = {**decode(honest["acknowledgment"])[1], "kind": "parafe.action_receipt"}
        honest["acknowledgment"] = sign_compact(claims, stranger, typ="parafe-index-ack+jwt")
        return 201, honest

    broker.filing_answer = forged
    with pytest.raises(ParafeError) as caught:
        agent.file_receipt("sess_1", "a.b.c")
    assert caught.value.code == "INVALID_SIGNATURE"
    broker.filing_answer = lambda record: (409, {"error": "session_closed"})
    with pytest.raises(BrokerRefused) as refused:
        agent.file_receipt("sess_1", "a.b.c")
    assert refused.value.code == "session_closed"
    broker.filing_answer = lambda record: (201, {"seq": 1})
    with pytest.raises(ResponseInvalid, match="no acknowledgment"):
        agent.file_receipt("sess_1", "a.b.c")
    with pytest.raises(ValueError, match="kind must be one of"):
        agent.file_receipt("sess_1", "a.b.c", "receipt")


# -- asyncio -----------------------------------------------------------------------------------


def test_the_async_client_drives_the_same_flows(broker: AgentBroker) -> None:
    async def run() -> None:
        agent = AsyncParafeBrokerClient(broker.url, retry=FAST)
        registration = await agent.register(generate_private_jwk("EdDSA"))
        assert registration.claim_link is not None
        link = await agent.create_claim_link()
        broker.failures = [(502, {"error": "bad_gateway"}, {})]
        assert not (await agent.claim_status()).claimed
        broker.approve(link.code)
        assert (await agent.wait_for_claim(timeout=5, wait=1)).claimed
        renewal = await agent.renew()
        assert renewal.renewed
        held = agent.credential
        assert held is not None
        signer = ReceiptSigner(held.key, agent_did(held.agent_id))
        receipt = signer.sign(session_id="sess_a", consent_token="a.b.c", action="read")
        filed = await agent.file_receipt("sess_a", receipt)
        assert filed.ack.receipt_hash == receipt_hash(receipt)

    asyncio.run(run())


def test_waiting_for_the_claim_stops_at_an_answer_over_the_body_cap(broker: AgentBroker) -> None:
    """A claim status larger than the client reads is the broker's answer, not a dropped
    connection: asking again (and downloading it again) helps nobody."""
    slept: list[float] = []
    agent = client(broker, transport=SyncTransport(max_body=4096), sleep=slept.append)
    agent.register(generate_private_jwk("ES256"))
    broker.failures = [(200, {"padding": "x" * 8192}, {})]
    with pytest.raises(NetworkError, match="too large") as caught:
        agent.wait_for_claim(timeout=3, wait=1)
    assert not caught.value.retryable
    assert (slept, len(calls(broker, "claim-status"))) == ([], 1)
