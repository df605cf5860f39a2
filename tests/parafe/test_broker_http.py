"""The I/O edges against a fake broker on a real local HTTP server: JWKS caching and the
refetch cooldown, DID documents (cache, 404, 410), online verification, unreachable and slow
brokers, and the async drivers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    EXPIRED_CONSENT_TOKEN,
    INVALID_CONSENT_TOKEN,
    INVALID_PROOF,
    SCOPE_VIOLATION,
    WRONG_AUDIENCE,
    BrokerKeys,
    ParafeError,
    ParafeVerifier,
    ReceiptSigner,
    ReceiptVerifier,
    agent_did,
    entry_hash,
    receipt_hash,
)
from tests.parafe.fake_broker import FakeBroker, unreachable_url
from tests.parafe.support import (
    PHASE2,
    Minter,
    did_document,
    fixture,
    fixture_now,
    message,
    sign,
)
from tests.support.clock import FakeClock

NOW = 1_790_741_039.783
POLICY = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)
JWKS = "/.well-known/jwks.json"


@pytest.fixture(scope="module")
def module_broker() -> Iterator[FakeBroker]:
    with FakeBroker() as broker:
        yield broker


@pytest.fixture
def minter() -> Minter:
    return Minter(NOW)


@pytest.fixture
def broker(module_broker: FakeBroker, minter: Minter) -> FakeBroker:
    module_broker.reset()
    module_broker.jwks = minter.jwks
    module_broker.did_documents = dict(minter.did_documents())
    module_broker.revoked = {}
    module_broker.verify_answer = (
        200,
        {
            "valid": True,
            "permitted": True,
            "action": "create_order",
            "session_id": minter.session_id,
        },
    )
    return module_broker


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


def keys_for(broker: FakeBroker, clock: FakeClock, policy: FetchPolicy = POLICY) -> BrokerKeys:
    return BrokerKeys(broker.url, fetch_policy=policy, clock=clock)


def verifier(minter: Minter, keys: BrokerKeys, **options: Any) -> ParafeVerifier:
    return ParafeVerifier(agent_id=minter.target_id, keys=keys, clock=lambda: NOW, **options)


def send(ver: ParafeVerifier, minter: Minter, token: str | None = None, **kwargs: Any) -> Any:
    token = token or minter.token()
    return ver.verify(message(token, minter.session_id, minter.proof(token)), **kwargs)


def refused(ver: ParafeVerifier, minter: Minter, token: str | None = None, **kwargs: Any) -> str:
    with pytest.raises(ParafeError) as caught:
        send(ver, minter, token, **kwargs)
    return caught.value.code


# -- the trusted broker URL -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "policy"),
    [
        ("http://api.parafe.ai", POLICY),  # http off loopback
        ("http://127.0.0.1:8080", FetchPolicy()),  # loopback without the development flag
        ("ftp://api.parafe.ai", POLICY),
        ("https://user:pw@api.parafe.ai", POLICY),
        ("https://api.parafe.ai?x=1", POLICY),
        ("https://", POLICY),
        ("https://[::1", POLICY),
    ],
)
def test_untrusted_broker_urls(url: str, policy: FetchPolicy) -> None:
    with pytest.raises(ValueError):
        BrokerKeys(url, fetch_policy=policy)


def test_trusted_broker_urls() -> None:
    assert BrokerKeys("https://api.parafe.ai//").broker_url == "https://api.parafe.ai"
    assert BrokerKeys("http://localhost:3310/", fetch_policy=POLICY).jwks_uri == (
        "http://localhost:3310/.well-known/jwks.json"
    )


# -- JWKS ---------------------------------------------------------------------------------


def test_jwks_is_fetched_once(broker: FakeBroker, minter: Minter, clock: FakeClock) -> None:
    ver = verifier(minter, verifier_keys := keys_for(broker, clock))
    send(ver, minter)
    send(ver, minter)
    assert broker.hits[JWKS] == 1
    assert verifier_keys.broker_url == broker.url


def test_unknown_kid_refetches_at_most_once_a_minute(
    broker: FakeBroker, minter: Minter, clock: FakeClock
) -> None:
    ver = verifier(minter, keys_for(broker, clock))
    send(ver, minter)
    rotated = generate_private_jwk("ES256", kid="rotated")
    token = minter.token(key=rotated, header={"alg": "ES256", "kid": "rotated"})
    broker.jwks = {"keys": [*minter.jwks["keys"], rotated.public.to_dict()]}
    clock.advance(30)
    assert refused(ver, minter, token) == INVALID_CONSENT_TOKEN  # within 60 s: no refetch
    assert broker.hits[JWKS] == 1
    clock.advance(31)
    send(ver, minter, token)  # the cooldown is over: one refetch finds the key
    assert broker.hits[JWKS] == 2
    stranger = minter.token(header={"alg": "ES256", "kid": "never"})
    clock.advance(61)
    assert refused(ver, minter, stranger) == INVALID_CONSENT_TOKEN
    assert refused(ver, minter, stranger) == INVALID_CONSENT_TOKEN
    assert broker.hits[JWKS] == 3  # one refetch for the made-up kid, not one per token


def test_retired_keys(broker: FakeBroker, minter: Minter, clock: FakeClock) -> None:
    retired_ed = generate_private_jwk("EdDSA", kid="ed-retired")
    retired_es = generate_private_jwk("ES256", kid="es-retired")
    broker.jwks = {
        "keys": [
            {
                **minter.jwks["keys"][0],
                "status": "active",
                "created_at": "2026-09-30T04:03:58.317Z",
            },
            {**retired_ed.public.to_dict(), "use": "sig", "status": "retired"},
            {**retired_es.public.to_dict(), "use": "sig", "status": "retired"},
        ]
    }
    ver = verifier(minter, keys_for(broker, clock))
    eddsa = minter.token(key=retired_ed, header={"alg": "EdDSA", "kid": "ed-retired"})
    assert refused(ver, minter, eddsa) == INVALID_CONSENT_TOKEN
    send(ver, minter, minter.token(key=retired_es, header={"alg": "ES256", "kid": "es-retired"}))
    send(ver, minter)


def test_fetched_jwks_follow_the_one_key_rule(
    broker: FakeBroker, minter: Minter, clock: FakeClock
) -> None:
    # The fetched JWKS is read like any other (`parse_jwks`): the `oct` key is ignored, and a
    # `key_ops` that is not an array is ignored as jose ignores it.
    entry = minter.jwks["keys"][0]
    broker.jwks = {"keys": [{"kty": "oct", "k": "c2VjcmV0"}, {**entry, "key_ops": "verify"}]}
    send(verifier(minter, keys_for(broker, clock)), minter)
    broker.jwks = {"keys": [{**entry, "key_ops": ["encrypt"]}]}
    assert refused(verifier(minter, keys_for(broker, clock)), minter) == INVALID_CONSENT_TOKEN


@pytest.mark.parametrize("mode", ["fail", "garbage"])
def test_jwks_failures(broker: FakeBroker, minter: Minter, clock: FakeClock, mode: str) -> None:
    broker.mode = mode
    assert refused(verifier(minter, keys_for(broker, clock)), minter) == INVALID_CONSENT_TOKEN


def refusal_of(ver: ParafeVerifier, minter: Minter, token: str | None = None) -> ParafeError:
    with pytest.raises(ParafeError) as caught:
        send(ver, minter, token)
    return caught.value


@pytest.mark.parametrize("mode", ["fail", "garbage", "unreachable"])
def test_a_broker_outage_is_not_reported_as_a_tampered_token(
    broker: FakeBroker, minter: Minter, clock: FakeClock, mode: str
) -> None:
    # The code stays the reference's INVALID_CONSENT_TOKEN; the text and the cause say the
    # broker's keys could not be fetched, not that the token may have been tampered with.
    url = unreachable_url() if mode == "unreachable" else broker.url
    if mode != "unreachable":
        broker.mode = mode
    ver = verifier(minter, BrokerKeys(url, fetch_policy=POLICY, clock=clock))
    error = refusal_of(ver, minter)
    assert error.code == INVALID_CONSENT_TOKEN
    assert error.cause == "KEY_FETCH_FAILED"
    assert "tampered" not in error.message
    assert "keys could not be fetched" in error.message
    assert "try again" in error.message


def test_a_bad_signature_and_an_unknown_kid_keep_the_tamper_advice(
    broker: FakeBroker, minter: Minter, clock: FakeClock
) -> None:
    ver = verifier(minter, keys_for(broker, clock))
    for token in (
        minter.token(header={"alg": "ES256", "kid": "new"}),
        sign(
            {**minter.claims()},
            generate_private_jwk("ES256"),
            {"alg": "ES256", "kid": minter.broker.kid},
        ),
    ):
        error = refusal_of(ver, minter, token)
        assert error.code == INVALID_CONSENT_TOKEN
        assert error.cause is None
        assert "tampered with" in error.message


def test_failed_first_jwks_fetch_is_retried_on_a_later_call(
    broker: FakeBroker, minter: Minter, clock: FakeClock
) -> None:
    # The reference's key cache forgets a failed fetch and fetches again on the next call.
    # pactmw does too once a second has passed (a cache with no keys yet), so a broker that is
    # down is asked at most once a second instead of once per request.
    broker.mode = "fail"
    ver = verifier(minter, keys_for(broker, clock))
    assert refused(ver, minter) == INVALID_CONSENT_TOKEN
    assert refused(ver, minter) == INVALID_CONSENT_TOKEN  # the same instant: not asked again
    assert broker.hits[JWKS] == 1
    clock.advance(1)
    assert refused(ver, minter) == INVALID_CONSENT_TOKEN  # still down: asked once more
    assert broker.hits[JWKS] == 2
    broker.mode = "ok"
    clock.advance(1)
    send(ver, minter)  # back: the next call after a second fetches the keys
    assert broker.hits[JWKS] == 3
    # With keys held, an unknown kid waits out the 60 s cooldown again.
    clock.advance(1)
    assert refused(ver, minter, minter.token(header={"alg": "ES256", "kid": "new"})) == (
        INVALID_CONSENT_TOKEN
    )
    assert broker.hits[JWKS] == 3


def test_unreachable_broker(minter: Minter, clock: FakeClock) -> None:
    keys = BrokerKeys(unreachable_url(), fetch_policy=POLICY, clock=clock)
    started = time.monotonic()
    assert refused(verifier(minter, keys), minter) == INVALID_CONSENT_TOKEN
    assert time.monotonic() - started < POLICY.timeout


# -- DID documents ------------------------------------------------------------------------


def test_did_document_is_cached_ten_minutes(
    broker: FakeBroker, minter: Minter, clock: FakeClock
) -> None:
    keys = keys_for(broker, clock)
    ver = verifier(minter, keys)
    path = f"/agents/{minter.initiator_id}/did.json"
    send(ver, minter)
    clock.advance(599)
    send(ver, minter)
    assert broker.hits[path] == 1
    clock.advance(2)
    send(ver, minter)
    assert broker.hits[path] == 2
    assert keys.did_document(minter.initiator_id).id == agent_did(minter.initiator_id)


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_a_did_document_outage_is_not_reported_as_a_revoked_agent(
    broker: FakeBroker, minter: Minter, clock: FakeClock, status: int
) -> None:
    # The reference asks "is the agent revoked, or registered with another broker?" for any
    # status; for a broker in trouble that points the wrong way. Still INVALID_PROOF.
    broker.did_status = status
    error = refusal_of(verifier(minter, keys_for(broker, clock)), minter)
    assert error.code == INVALID_PROOF
    assert error.cause == "KEY_FETCH_FAILED"
    assert f"({status})" in error.message
    assert "revoked" not in error.message
    assert "try again" in error.message


def test_a_did_document_not_fetched_names_the_cause(
    broker: FakeBroker, minter: Minter, clock: FakeClock
) -> None:
    ver = verifier(minter, keys_for(broker, clock))
    ver.verify_token(minter.token())  # the broker's keys are held; its DID documents are not
    broker.mode = "garbage"  # a maintenance page where the DID document should be
    error = refusal_of(ver, minter)
    assert error.code == INVALID_PROOF
    assert error.cause == "KEY_FETCH_FAILED"
    assert "could not fetch the initiator's DID document" in error.message


@pytest.mark.parametrize("status", [404, 410])
def test_did_document_gone(
    broker: FakeBroker, minter: Minter, clock: FakeClock, status: int
) -> None:
    if status == 410:
        broker.revoke(minter.initiator_id, revoked_at="2026-09-30T04:00:00.000Z")
    else:
        del broker.did_documents[minter.initiator_id]
    ver = verifier(minter, keys_for(broker, clock))
    with pytest.raises(ParafeError) as caught:
        send(ver, minter)
    assert caught.value.code == INVALID_PROOF
    assert f"({status})" in caught.value.message
    assert "is the agent revoked" in caught.value.message  # the reference's text
    assert caught.value.cause is None
    # Failures are not cached: once the broker serves it again, it is used.
    broker.revoked = {}
    broker.did_documents = dict(minter.did_documents())
    send(ver, minter)


@pytest.mark.parametrize("status", [201, 203, 299])
def test_did_document_with_any_2xx_status(
    broker: FakeBroker, minter: Minter, clock: FakeClock, status: int
) -> None:
    # The reference takes any `res.ok` answer (2xx) as the document, for proofs (the
    # a2a-extension's initiator key) and for receipts (@getparafe/verify's issuer key).
    broker.did_status = status
    keys = keys_for(broker, clock)
    assert send(verifier(minter, keys), minter).proof_verified is True
    shop = "prf_agent_shop0003"
    shop_key = generate_private_jwk("EdDSA")
    broker.add_agent(shop, did_document(shop, shop_key.public))
    receipt = ReceiptSigner(shop_key, agent_did(shop), clock=lambda: NOW).sign(
        session_id="sess_1", consent_token="a.b.c", action="a"
    )
    assert ReceiptVerifier(keys, clock=lambda: NOW).verify_action_receipt(receipt).iss == (
        agent_did(shop)
    )


@pytest.mark.parametrize("mode", ["fail", "garbage"])
def test_did_document_failures(
    broker: FakeBroker, minter: Minter, clock: FakeClock, mode: str
) -> None:
    keys = keys_for(broker, clock)
    ver = verifier(minter, keys)
    keys.broker_keys(minter.broker.kid, "ES256")  # the JWKS is cached before the failure
    broker.mode = mode
    assert refused(ver, minter) == INVALID_PROOF


def test_agent_ids_are_url_encoded(broker: FakeBroker, minter: Minter, clock: FakeClock) -> None:
    minter.initiator_id = "prf_agent_a/b?c#d"
    broker.did_documents = dict(minter.did_documents())
    send(verifier(minter, keys_for(broker, clock)), minter)
    assert broker.hits["/agents/prf_agent_a%2Fb%3Fc%23d/did.json"] == 1


# -- receipts over HTTP -------------------------------------------------------------------


def test_fixture_receipts_through_the_broker(module_broker: FakeBroker, clock: FakeClock) -> None:
    module_broker.reset()
    data = fixture(PHASE2)
    module_broker.jwks = data["jwks"]
    module_broker.did_documents = dict(data["did_documents"])
    keys = keys_for(module_broker, clock)
    now = fixture_now(PHASE2)
    verifier_ = ReceiptVerifier(keys, clock=lambda: now)
    for receipt in data["action_receipts"]:
        verifier_.verify_action_receipt(receipt, expected_session_id=data["session_id"])
    for ack in data["acknowledgments"]:
        verifier_.verify_index_ack(ack)
    verifier_.verify_session_receipt(data["session_receipt"])
    assert module_broker.hits[JWKS] == 1
    assert module_broker.hits["/agents/prf_agent_4fb30521/did.json"] == 1  # cached


def test_revoked_receipt_signer_over_http(broker: FakeBroker, clock: FakeClock) -> None:
    shop = "prf_agent_shop0002"
    shop_key = generate_private_jwk("EdDSA")
    broker_key = generate_private_jwk("ES256", kid="bk")
    broker.jwks = {"keys": [broker_key.public.to_dict()]}
    broker.add_agent(shop, did_document(shop, shop_key.public))
    receipt = ReceiptSigner(shop_key, agent_did(shop), clock=lambda: NOW).sign(
        session_id="sess_1", consent_token="a.b.c", action="a"
    )
    rhash = receipt_hash(receipt)
    ack_claims = {
        "ver": 1,
        "session_id": "sess_1",
        "seq": 1,
        "receipt_hash": rhash,
        "receipt_iss": agent_did(shop),
        "prev": None,
        "entry_hash": entry_hash(1, rhash, None),
        "indexed_at": "2026-09-30T04:04:00.000Z",
        "iss": "did:web:api.parafe.ai",
        "iat": int(NOW),
    }
    ack = sign(ack_claims, broker_key, {"alg": "ES256", "kid": "bk", "typ": "parafe-index-ack+jwt"})
    verifier_ = ReceiptVerifier(keys_for(broker, clock), clock=lambda: NOW)
    verifier_.verify_action_receipt(receipt)
    broker.revoke(shop, revoked_at="2026-09-30T05:00:00.000Z")
    clock.advance(601)  # past the DID document cache
    with pytest.raises(ParafeError) as caught:
        verifier_.verify_action_receipt(receipt)
    assert caught.value.code == "ISSUER_REVOKED"
    checked = verifier_.verify_action_receipt(receipt, acknowledgment=ack)
    assert checked.issuer_revoked_at == "2026-09-30T05:00:00.000Z"
    broker.revoke(shop, revoked_at=None)
    with pytest.raises(ParafeError) as caught:
        verifier_.verify_action_receipt(receipt, acknowledgment=ack)
    assert caught.value.code == "KEY_FETCH_FAILED"
    broker.mode = "fail"
    with pytest.raises(ParafeError) as caught:
        verifier_.verify_action_receipt(receipt)
    assert caught.value.code == "KEY_FETCH_FAILED"


# -- online verification --------------------------------------------------------------------


def test_online_verification(broker: FakeBroker, minter: Minter, clock: FakeClock) -> None:
    ver = verifier(minter, keys_for(broker, clock), online=True)
    token = minter.token()
    proof = minter.proof(token)
    verified = ver.verify(message(token, minter.session_id, proof), action="create_order")
    assert verified.online is not None
    assert verified.online.valid
    method, path, body = broker.requests[-1]
    assert (method, path) == ("POST", "/consent/verify")
    assert body == {
        "consent_token": token,
        "action": "create_order",
        "session_id": minter.session_id,
        "agent_id": minter.target_id,
        "proof": proof,
    }
    with pytest.raises(ValueError, match="action"):
        send(ver, minter)


def online_refusal(
    broker: FakeBroker, minter: Minter, clock: FakeClock, status: int, answer: Any
) -> ParafeError:
    """What an online check refuses with when the broker's verify answers `answer`."""
    broker.verify_answer = (status, answer)
    ver = verifier(minter, keys_for(broker, clock), online=True)
    with pytest.raises(ParafeError) as caught:
        send(ver, minter, action="create_order")
    return caught.value


@pytest.mark.parametrize(
    ("status", "answer", "code"),
    [
        (
            401,
            {"valid": False, "error": "token_expired", "reason": "expired"},
            EXPIRED_CONSENT_TOKEN,
        ),
        (401, {"valid": False, "error": "wrong_audience"}, WRONG_AUDIENCE),
        (401, {"valid": False, "error": "proof_invalid", "reason": "stale"}, INVALID_PROOF),
        (
            401,
            {"valid": False, "error": "agent_revoked", "reason": "revoked"},
            INVALID_CONSENT_TOKEN,
        ),
        (401, {"valid": False, "error": "session_inactive"}, INVALID_CONSENT_TOKEN),
        (200, {"valid": True, "permitted": False, "action": "create_order"}, SCOPE_VIOLATION),
        (
            200,
            {"valid": False, "permitted": False, "action": "create_order"},
            INVALID_CONSENT_TOKEN,
        ),
        (500, {"error": "internal_error"}, INVALID_CONSENT_TOKEN),
    ],
)
def test_online_refusals(
    broker: FakeBroker, minter: Minter, clock: FakeClock, status: int, answer: Any, code: str
) -> None:
    refused = online_refusal(broker, minter, clock, status, answer)
    assert refused.code == code
    assert refused.consent is not None  # a refusal receipt can bind to it


#: What a misbehaving broker may say: 20,000 characters of text (within the fetch cap).
LONG_REASON = "why " * 5000


@pytest.mark.parametrize(
    ("status", "answer", "code"),
    [
        (401, {"valid": False, "error": "proof_invalid", "reason": LONG_REASON}, INVALID_PROOF),
        (
            401,
            {"valid": False, "error": "token_invalid", "reason": LONG_REASON},
            INVALID_CONSENT_TOKEN,
        ),
        (
            401,
            {"valid": False, "error": "agent_revoked", "message": LONG_REASON},
            INVALID_CONSENT_TOKEN,
        ),
        (429, {"error": "rate_limited", "reason": LONG_REASON}, INVALID_CONSENT_TOKEN),
        (
            200,
            {"valid": True, "permitted": False, "action": "create_order", "reason": LONG_REASON},
            SCOPE_VIOLATION,
        ),
    ],
)
def test_online_refusal_text_is_cut_like_every_broker_text(
    broker: FakeBroker, minter: Minter, clock: FakeClock, status: int, answer: Any, code: str
) -> None:
    # The broker's reason becomes the refusal's message, which the reply's text and error
    # data carry to the calling agent: cut to 500 characters, as the broker's other texts.
    refused = online_refusal(broker, minter, clock, status, answer)
    assert refused.code == code
    assert LONG_REASON[:500] in refused.message
    assert LONG_REASON[:501] not in refused.message


def test_online_alone(broker: FakeBroker, minter: Minter, clock: FakeClock) -> None:
    ver = verifier(minter, keys_for(broker, clock))
    token = minter.token()
    result = ver.verify_online(token, action="create_order")
    assert result.valid
    assert result.session_id == minter.session_id
    assert broker.requests[-1][2]["agent_id"] == minter.target_id
    assert broker.hits[JWKS] == 0  # nothing offline was checked
    broker.verify_answer = (200, {"valid": False, "permitted": False, "action": "create_order"})
    assert asyncio.run(ver.averify_online(token, action="create_order")).valid is False
    with pytest.raises(ParafeError) as caught:
        ver.verify_online("garbage", action="create_order")
    assert caught.value.code == INVALID_CONSENT_TOKEN
    assert len(broker.requests) == 2  # the missing session id raised before any request


def test_online_unreachable_within_the_timeout(minter: Minter, clock: FakeClock) -> None:
    ver = verifier(minter, BrokerKeys(unreachable_url(), fetch_policy=POLICY, clock=clock))
    with pytest.raises(ParafeError) as caught:
        ver.verify_online(minter.token(), action="create_order")
    assert caught.value.code == INVALID_CONSENT_TOKEN
    assert "Could not reach Parafe broker at http://127.0.0.1:" in caught.value.message
    assert "tampered" not in caught.value.message  # an outage, not a bad signature
    assert caught.value.cause == "BROKER_UNREACHABLE"


def test_online_slow_broker_is_cut_at_the_timeout(
    broker: FakeBroker, minter: Minter, clock: FakeClock
) -> None:
    policy = FetchPolicy(allow_http_on_loopback=True, timeout=0.5)
    keys = keys_for(broker, clock, policy)
    ver = verifier(minter, keys, online=True)
    keys.broker_keys(minter.broker.kid, "ES256")  # JWKS and DID document cached first
    keys.did_document(minter.initiator_id)
    broker.mode, broker.delay = "slow", 30.0
    started = time.monotonic()
    with pytest.raises(ParafeError) as caught:
        send(ver, minter, action="create_order")
    elapsed = time.monotonic() - started
    assert caught.value.code == INVALID_CONSENT_TOKEN
    assert "took longer than 0.5 s" in caught.value.message
    # Not a speed check: far below the broker's 30 s, so the timeout ended the wait, however
    # loaded the machine (the broker's threads are daemons: nobody waits for them after).
    assert elapsed < 15.0


# -- async ----------------------------------------------------------------------------------


def test_async_drivers(broker: FakeBroker, minter: Minter, clock: FakeClock) -> None:
    keys = keys_for(broker, clock)
    ver = verifier(minter, keys, online=True)

    async def main() -> list[Any]:
        results: list[Any] = []
        for _ in range(3):
            token = minter.token()
            msg = message(token, minter.session_id, minter.proof(token))
            results.append(await ver.averify(msg, action="create_order"))
        bad = minter.token(target_agent_id="x")
        try:
            await ver.averify(
                message(bad, minter.session_id, minter.proof(bad)), action="create_order"
            )
        except ParafeError as exc:
            results.append(exc.code)
        return results

    results = asyncio.run(main())
    assert all(r.proof_verified for r in results[:3])
    assert results[3] == WRONG_AUDIENCE
    assert broker.hits[JWKS] == 1
    assert broker.hits[f"/agents/{minter.initiator_id}/did.json"] == 1


def test_async_unreachable(minter: Minter, clock: FakeClock) -> None:
    ver = verifier(minter, BrokerKeys(unreachable_url(), fetch_policy=POLICY, clock=clock))
    token = minter.token()

    async def main() -> str:
        try:
            await ver.averify(message(token, minter.session_id, minter.proof(token)))
        except ParafeError as exc:
            return exc.code
        return "accepted"

    assert asyncio.run(main()) == INVALID_CONSENT_TOKEN
