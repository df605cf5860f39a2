"""Action receipts (parafe-verifier.md §7): signing, the refusal mapping, checking receipts
other agents signed, index acknowledgments, and the known answers of §7 and §13."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest

from pactmw.core.encoding import b64url_encode
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jcs import canonicalize
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    RECEIPT_CODES,
    BrokerKeys,
    ParafeError,
    ParafeVerifier,
    ReceiptSigner,
    ReceiptVerifier,
    StaticBrokerKeys,
    agent_did,
    consent_ref,
    details_hash,
    entry_hash,
    receipt_error_for,
    receipt_hash,
)
from tests.parafe.fake_broker import unreachable_url
from tests.parafe.support import (
    DELETE,
    PHASE2,
    V2,
    Minter,
    decode,
    did_document,
    fixture,
    fixture_now,
    message,
    sign,
)

NOW = 1_790_747_151.897
SECONDS = int(NOW)
SHOP = "prf_agent_shop0001"
SHOP_DID = agent_did(SHOP)
SESSION = "sess_" + "cd" * 16
TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJ0b2tlbiI6MX0.c2ln"


def b64_sha256(data: bytes) -> str:
    return b64url_encode(hashlib.sha256(data).digest())


# -- known answers ---------------------------------------------------------------------------


def test_jcs_and_details_hash_known_answers() -> None:
    assert canonicalize({"b": [{"d": 1, "c": 2}], "a": None}) == b'{"a":null,"b":[{"c":2,"d":1}]}'
    assert details_hash({"b": 1, "a": 2}) == b64_sha256(b'{"a":2,"b":1}')


def test_consent_ref_known_answers() -> None:
    assert (
        consent_ref(fixture(V2)["consent_token"]) == "UZ_EPkOf86dmQ1l4wHmbj06ix7zTM1Evq2tUnzXqK_4"
    )
    assert decode(fixture(V2)["presentation_proof"])[1]["ath"] == consent_ref(
        fixture(V2)["consent_token"]
    )
    order = fixture(PHASE2)["consent_tokens"]["order"]
    assert consent_ref(order) == "JKiSSlxGG2_6i1a5tWmx_-LAG4W4ZzT8yr2R9k3JRM0"


def test_entry_hash_chain_of_the_fixture() -> None:
    data = fixture(PHASE2)
    prev = None
    for receipt, ack in zip(data["action_receipts"], data["acknowledgments"], strict=True):
        claims = decode(ack)[1]
        assert claims["receipt_hash"] == receipt_hash(receipt)
        assert claims["prev"] == prev
        assert claims["entry_hash"] == entry_hash(claims["seq"], claims["receipt_hash"], prev)
        prev = claims["entry_hash"]
    assert entry_hash(1, "abc", None) == b64_sha256(b"1|abc|")
    assert decode(data["session_receipt"])[1]["chain_head"] == prev


def test_evidence_and_context_hashes_of_the_fixture() -> None:
    # JCS over real data: the broker's receipt carries the hashes of `evidence` and `context`.
    data = fixture(V2)
    session = decode(data["receipt_jws"])[1]
    assert session["handshake"]["context_hash"] == details_hash(data["context"])
    evidence_hash = session["consent_tokens"][0]["authorization"]["evidence_hash"]
    assert evidence_hash == details_hash(data["evidence"])


# -- signing ---------------------------------------------------------------------------------


@pytest.fixture(params=["ES256", "EdDSA"])
def signer_key(request: pytest.FixtureRequest) -> Any:
    return generate_private_jwk(request.param, kid="ignored")


def signer(key: Any) -> ReceiptSigner:
    return ReceiptSigner(
        key, SHOP_DID, clock=lambda: NOW, new_jti=lambda: "0e2188b8-4760-454a-a661-2e518df5445d"
    )


def receipts_verifier(
    key: Any, *, documents: dict[str, Any] | None = None, **kwargs: Any
) -> ReceiptVerifier:
    docs = {SHOP: did_document(SHOP, key.public)} if documents is None else documents
    keys = StaticBrokerKeys(kwargs.pop("jwks", {"keys": []}), did_documents=docs, **kwargs)
    return ReceiptVerifier(keys, clock=lambda: NOW)


def test_signed_receipt_shape(signer_key: Any) -> None:
    receipt = signer(signer_key).sign(
        session_id=SESSION,
        consent_token=TOKEN,
        action="create_order",
        request="the request",
        details={"b": 1, "a": 2},
        business_ref="ord_1",
    )
    header, claims = decode(receipt)
    assert header == {
        "alg": signer_key.alg,
        "typ": "parafe-action-receipt+jwt",
        "kid": f"{SHOP_DID}#keys-1",
    }
    assert claims == {
        "ver": 1,
        "session_id": SESSION,
        "consent_ref": consent_ref(TOKEN),
        "action": "create_order",
        "result": "success",
        "error": None,
        "error_description": None,
        "request_ref": b64_sha256(b"the request"),
        "details_hash": b64_sha256(b'{"a":2,"b":1}'),
        "business_ref": "ord_1",
        "mandate_ref": None,
        "iss": SHOP_DID,
        "iat": SECONDS,
        "jti": "0e2188b8-4760-454a-a661-2e518df5445d",
    }
    checked = receipts_verifier(signer_key).verify_action_receipt(
        receipt, expected_session_id=SESSION, consent_token=TOKEN
    )
    assert checked.action == "create_order"
    assert checked.key_id == f"{SHOP_DID}#keys-1"


def test_details_null_is_hashed_and_refs_can_be_given(signer_key: Any) -> None:
    receipt = signer(signer_key).sign(
        session_id=SESSION,
        consent_token=TOKEN,
        action="a",
        details=None,
        request_ref="given",
        mandate_ref="m",
    )
    claims = decode(receipt)[1]
    assert claims["details_hash"] == b64_sha256(b"null")
    assert claims["request_ref"] == "given"
    assert claims["mandate_ref"] == "m"


def test_signer_refuses_inconsistent_receipts(signer_key: Any) -> None:
    s = signer(signer_key)
    common = {"session_id": SESSION, "consent_token": TOKEN, "action": "a"}
    with pytest.raises(ValueError, match="needs error"):
        s.sign(**common, result="error")
    with pytest.raises(ValueError, match="no error"):
        s.sign(**common, error="failed")
    with pytest.raises(ValueError, match="one of"):
        s.sign(**common, result="error", error="oops")
    with pytest.raises(ValueError, match="result"):
        s.sign(**common, result="maybe")
    with pytest.raises(ValueError, match="Ed25519 or P-256"):
        ReceiptSigner(generate_private_jwk("RS256"), SHOP_DID)
    with pytest.raises(ValueError, match="DID"):
        ReceiptSigner(signer_key, SHOP)


# -- refusals (§7.2) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "action", "proof", "expected"),
    [
        ({"exclusions": ["issue_refund"]}, "issue_refund", True, "excluded"),
        ({}, "read_menu", True, "not_permitted"),
        ({"exp": SECONDS - 1}, "create_order", True, "consent_expired"),
        ({}, "create_order", None, "proof_invalid"),
        ({"target_agent_id": "prf_agent_other"}, "create_order", None, "consent_invalid"),
        ({"session_id": "sess_other"}, "create_order", True, "consent_invalid"),
        ({"iss": "x"}, "create_order", True, "consent_invalid"),
    ],
)
def test_refusal_receipts(
    signer_key: Any, overrides: dict[str, Any], action: str, proof: Any, expected: str
) -> None:
    minter = Minter(NOW)
    minter.target_id = SHOP
    token = minter.token(**overrides)
    keys = StaticBrokerKeys(minter.jwks, did_documents=minter.did_documents())
    verifier = ParafeVerifier(agent_id=SHOP, keys=keys, clock=lambda: NOW)
    msg = message(token, minter.session_id, minter.proof(token) if proof else None)
    with pytest.raises(ParafeError) as caught:
        verifier.verify(msg, action=action)
    receipt = signer(signer_key).refuse(caught.value, action)
    assert receipt is not None
    claims = decode(receipt)[1]
    assert (claims["result"], claims["error"]) == ("error", expected)
    assert claims["error_description"] == caught.value.message[:500]
    assert claims["consent_ref"] == consent_ref(token)
    assert claims["session_id"] == minter.session_id  # the message's session
    checked = receipts_verifier(signer_key).verify_action_receipt(receipt, consent_token=token)
    assert checked.error == expected


def test_no_refusal_receipt_without_consent_or_action(signer_key: Any) -> None:
    s = signer(signer_key)
    missing = ParafeError("MISSING_PARAFE_EXTENSION", "none")
    assert s.refuse(missing, "create_order") is None
    assert s.refuse(ParafeError("SCOPE_VIOLATION", "x"), None) is None
    # Any other exception: consent_invalid, with a text that leaks nothing.
    from pactmw.protocols.parafe import Consent

    receipt = s.refuse(RuntimeError("secret"), "a", Consent(token=TOKEN, session_id=SESSION))
    assert receipt is not None
    claims = decode(receipt)[1]
    assert claims["error"] == "consent_invalid"
    assert "secret" not in claims["error_description"]


def test_receipt_error_for_reads_the_unverified_exclusions() -> None:
    token = sign(
        {"exclusions": ["issue_refund", 5]}, generate_private_jwk("ES256"), {"alg": "ES256"}
    )
    violation = ParafeError("SCOPE_VIOLATION", "x")
    assert receipt_error_for(violation, "issue_refund", token) == "excluded"
    assert receipt_error_for(violation, "other", token) == "not_permitted"
    assert receipt_error_for(violation, "issue_refund", "garbage") == "not_permitted"
    assert receipt_error_for(ParafeError("WRONG_AUDIENCE", "x"), "a", token) == "consent_invalid"


# -- checking other agents' receipts (§7.3) -------------------------------------------------

OK = "ok"
RECEIPT_TAMPERING: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = [
    ("ver 2", {"ver": 2}, None, "MALFORMED"),
    ("ver true", {"ver": True}, None, "MALFORMED"),
    ("ver 1.0", {"ver": 1.0}, None, OK),
    ("session_id empty", {"session_id": ""}, None, "MALFORMED"),
    ("consent_ref missing", {"consent_ref": DELETE}, None, "MALFORMED"),
    ("action a number", {"action": 5}, None, "MALFORMED"),
    ("jti missing", {"jti": DELETE}, None, "MALFORMED"),
    ("iat missing", {"iat": DELETE}, None, "MALFORMED"),
    ("iat a string", {"iat": "1"}, None, "MALFORMED"),
    ("iat 61 s ahead", {"iat": SECONDS + 61}, None, "MALFORMED"),
    ("iat 60 s ahead", {"iat": SECONDS + 60}, None, OK),
    ("iat long ago", {"iat": 0}, None, OK),
    ("exp 61 s ago", {"exp": SECONDS - 61}, None, "EXPIRED"),
    ("exp 59 s ago", {"exp": SECONDS - 59}, None, OK),
    ("nbf 61 s ahead", {"nbf": SECONDS + 61}, None, "NOT_YET_VALID"),
    ("result ok", {"result": "ok"}, None, "MALFORMED"),
    ("result missing", {"result": DELETE}, None, "MALFORMED"),
    ("error receipt, unknown code", {"result": "error", "error": "oops"}, None, "MALFORMED"),
    ("error receipt, no code", {"result": "error", "error": None}, None, "MALFORMED"),
    ("error receipt, known code", {"result": "error", "error": "failed"}, None, OK),
    ("success with an error", {"error": "failed"}, None, "MALFORMED"),
    ("success, error missing", {"error": DELETE}, None, OK),
    (
        "iss swapped to another agent",
        {"iss": agent_did("prf_agent_cust0001")},
        None,
        "KEY_NOT_FOUND",
    ),
    ("iss not an agent DID", {"iss": "did:web:example.com"}, None, "MALFORMED"),
    ("iss not prf_agent_", {"iss": "did:web:api.parafe.ai:agents:bot_1"}, None, "MALFORMED"),
    ("iss unknown agent", {"iss": agent_did("prf_agent_nobody")}, None, "KEY_FETCH_FAILED"),
    ("iss a number", {"iss": 5}, None, "MALFORMED"),
    ("typ wrong", {}, {"typ": "JWT"}, "MALFORMED"),
    ("typ upper case", {}, {"typ": "PARAFE-ACTION-RECEIPT+JWT"}, "MALFORMED"),  # exact
    ("kid of another key", {}, {"kid": f"{SHOP_DID}#keys-2"}, "KEY_NOT_FOUND"),
    ("no kid", {}, {"kid": DELETE}, "KEY_NOT_FOUND"),
    ("alg of the other key type", {}, {"alg": "other"}, "INVALID_SIGNATURE"),
    ("crit", {}, {"crit": ["x"], "x": 1}, "MALFORMED"),
]


def _receipt(key: Any, claims: dict[str, Any], header: dict[str, Any] | None) -> str:
    base = decode(signer(key).sign(session_id=SESSION, consent_token=TOKEN, action="create_order"))
    head = dict(base[0])
    body = dict(base[1])
    for name, value in (header or {}).items():
        if value is DELETE:
            head.pop(name)
        elif name == "alg":
            head["alg"] = "EdDSA" if key.alg == "ES256" else "ES256"
        else:
            head[name] = value
    for name, value in claims.items():
        if value is DELETE:
            body.pop(name)
        else:
            body[name] = value
    return sign(body, key, head)


@pytest.mark.parametrize(
    ("label", "claims", "header", "expected"),
    RECEIPT_TAMPERING,
    ids=[t[0] for t in RECEIPT_TAMPERING],
)
def test_receipt_tampering(
    signer_key: Any, label: str, claims: dict[str, Any], header: Any, expected: str
) -> None:
    customer = generate_private_jwk("EdDSA")
    documents = {
        SHOP: did_document(SHOP, signer_key.public),
        "prf_agent_cust0001": did_document("prf_agent_cust0001", customer.public),
    }
    verifier = receipts_verifier(signer_key, documents=documents)
    receipt = _receipt(signer_key, claims, header)
    if expected == OK:
        verifier.verify_action_receipt(receipt)
        return
    with pytest.raises(ParafeError) as caught:
        verifier.verify_action_receipt(receipt)
    assert caught.value.code == expected
    assert expected in RECEIPT_CODES


def test_receipt_by_another_key(signer_key: Any) -> None:
    receipt = signer(generate_private_jwk(signer_key.alg)).sign(
        session_id=SESSION, consent_token=TOKEN, action="a"
    )
    with pytest.raises(ParafeError) as caught:
        receipts_verifier(signer_key).verify_action_receipt(receipt)
    assert caught.value.code == "INVALID_SIGNATURE"


def test_receipt_bindings(signer_key: Any) -> None:
    receipt = signer(signer_key).sign(session_id=SESSION, consent_token=TOKEN, action="a")
    verifier = receipts_verifier(signer_key)
    with pytest.raises(ParafeError) as caught:
        verifier.verify_action_receipt(receipt, expected_session_id="sess_other")
    assert caught.value.code == "MALFORMED"
    with pytest.raises(ParafeError) as caught:
        verifier.verify_action_receipt(receipt, consent_token="other.token.x")
    assert caught.value.code == "MALFORMED"


def test_did_document_of_someone_else(signer_key: Any) -> None:
    receipt = signer(signer_key).sign(session_id=SESSION, consent_token=TOKEN, action="a")
    document = did_document(SHOP, signer_key.public)
    document["id"] = agent_did("prf_agent_other")
    with pytest.raises(ParafeError) as caught:
        receipts_verifier(signer_key, documents={SHOP: document}).verify_action_receipt(receipt)
    assert caught.value.code == "MALFORMED"


def test_issuer_key_option(signer_key: Any) -> None:
    receipt = signer(signer_key).sign(session_id=SESSION, consent_token=TOKEN, action="a")
    verifier = receipts_verifier(signer_key, documents={})
    assert verifier.verify_action_receipt(receipt, issuer_key=signer_key.public).action == "a"
    with pytest.raises(ParafeError) as caught:
        verifier.verify_action_receipt(receipt, issuer_key={"kty": "EC"})
    assert caught.value.code == "INVALID_SIGNATURE"


@pytest.mark.parametrize("text", ["", "a.b", "a.b.c", "...", "e30.e30.", "W10.e30.sig"])
def test_garbage_receipts(text: str) -> None:
    with pytest.raises(ParafeError) as caught:
        receipts_verifier(generate_private_jwk("ES256")).verify_action_receipt(text)
    assert caught.value.code == "MALFORMED"


# -- a revoked signer (§7.3) --------------------------------------------------------------------


def _revocation_setup(revoked_at: str | None, indexed_at: str) -> tuple[ReceiptVerifier, str, str]:
    """A receipt by a since-revoked shop, and the broker's acknowledgment of it."""
    broker = generate_private_jwk("ES256", kid="bk")
    shop_key = generate_private_jwk("ES256")
    receipt = signer(shop_key).sign(session_id=SESSION, consent_token=TOKEN, action="a")
    rhash = receipt_hash(receipt)
    ack = sign(
        {
            "ver": 1,
            "session_id": SESSION,
            "seq": 1,
            "receipt_hash": rhash,
            "kind": "parafe.action_receipt",
            "receipt_iss": SHOP_DID,
            "issuer_verified": True,
            "prev": None,
            "entry_hash": entry_hash(1, rhash, None),
            "indexed_at": indexed_at,
            "iss": "did:web:api.parafe.ai",
            "iat": SECONDS,
            "jti": "j",
        },
        broker,
        {"alg": "ES256", "kid": "bk", "typ": "parafe-index-ack+jwt"},
    )
    body: dict[str, Any] = {
        "error": "agent_revoked",
        "did_document": did_document(SHOP, shop_key.public),
    }
    if revoked_at is not None:
        body["revoked_at"] = revoked_at
    keys = StaticBrokerKeys({"keys": [broker.public.to_dict()]}, revoked={SHOP: body})
    return ReceiptVerifier(keys, clock=lambda: NOW), receipt, ack


def test_revoked_signer_with_an_earlier_acknowledgment() -> None:
    verifier, receipt, ack = _revocation_setup(
        "2026-09-30T06:00:00.000Z", "2026-09-30T05:45:51.889Z"
    )
    checked = verifier.verify_action_receipt(receipt, acknowledgment=ack)
    assert checked.issuer_revoked_at == "2026-09-30T06:00:00.000Z"


@pytest.mark.parametrize(
    ("revoked_at", "indexed_at", "with_ack", "expected"),
    [
        ("2026-09-30T06:00:00.000Z", "2026-09-30T05:45:51.889Z", False, "ISSUER_REVOKED"),
        ("2026-09-30T05:00:00.000Z", "2026-09-30T05:45:51.889Z", True, "ISSUER_REVOKED"),
        ("2026-09-30T05:45:51.889Z", "2026-09-30T05:45:51.889Z", True, "ISSUER_REVOKED"),
        ("2026-09-30T06:00:00.000Z", "not a date", True, "ISSUER_REVOKED"),
        (None, "2026-09-30T05:45:51.889Z", True, "KEY_FETCH_FAILED"),
        ("yesterday", "2026-09-30T05:45:51.889Z", True, "KEY_FETCH_FAILED"),
    ],
)
def test_revoked_signer_refused(
    revoked_at: str | None, indexed_at: str, with_ack: bool, expected: str
) -> None:
    verifier, receipt, ack = _revocation_setup(revoked_at, indexed_at)
    with pytest.raises(ParafeError) as caught:
        verifier.verify_action_receipt(receipt, acknowledgment=ack if with_ack else None)
    assert caught.value.code == expected


def test_acknowledgment_of_another_receipt() -> None:
    verifier, receipt, _ = _revocation_setup("2026-09-30T06:00:00.000Z", "2026-09-30T05:45:51.889Z")
    _, _, other_ack = _revocation_setup("2026-09-30T06:00:00.000Z", "2026-09-30T05:45:51.889Z")
    with pytest.raises(ParafeError) as caught:
        verifier.verify_action_receipt(receipt, acknowledgment=other_ack)
    # Signed by another broker key than this verifier knows.
    assert caught.value.code in ("KEY_NOT_FOUND", "INVALID_SIGNATURE")


def test_fixture_acknowledgment_tampering() -> None:
    data = fixture(PHASE2)
    broker = generate_private_jwk("ES256", kid="jKozjAhSJmJ2U74sxBslKfGBT-a_zgSDwroSa6DhkhU")
    keys = StaticBrokerKeys({"keys": [broker.public.to_dict()]})
    verifier = ReceiptVerifier(keys, clock=lambda: fixture_now(PHASE2))
    header, claims = decode(data["acknowledgments"][1])
    verifier.verify_index_ack(sign(claims, broker, header))
    for name, value, expected in [
        ("entry_hash", "x", "MALFORMED"),
        ("prev", None, "MALFORMED"),  # the entry hash no longer recomputes
        ("seq", 3, "MALFORMED"),
        ("seq", "2", "MALFORMED"),
        ("seq", 10**400, "MALFORMED"),
        ("seq", 2.5, "MALFORMED"),
        ("ver", 2, "MALFORMED"),
        ("iss", "did:web:evil", "ISSUER_MISMATCH"),
    ]:
        with pytest.raises(ParafeError) as caught:
            verifier.verify_index_ack(
                sign({**claims, name: value}, broker, header),
                expected_issuer="did:web:api.parafe.ai",
            )
        assert caught.value.code == expected, name
    with pytest.raises(ParafeError) as caught:
        verifier.verify_index_ack(sign(claims, broker, {**header, "typ": "JWT"}))
    assert caught.value.code == "MALFORMED"
    assert json.loads(json.dumps(claims))["seq"] == 2


# -- how a broker JWS names its key (@getparafe/verify `brokerKeyFor`) ----------------------------

FIXTURE_BROKER_KID = "jKozjAhSJmJ2U74sxBslKfGBT-a_zgSDwroSa6DhkhU"


def _broker_artifacts(header: dict[str, Any]) -> tuple[ReceiptVerifier, str, str]:
    """The phase-2 acknowledgment and session receipt, re-signed by a stand-in broker key
    (the fixture's kid) under `header` changes."""
    data = fixture(PHASE2)
    broker = generate_private_jwk("ES256", kid=FIXTURE_BROKER_KID)
    keys = StaticBrokerKeys({"keys": [broker.public.to_dict()]})
    verifier = ReceiptVerifier(keys, clock=lambda: fixture_now(PHASE2))

    def resign(jws: str) -> str:
        head, claims = decode(jws)
        for name, value in header.items():
            if value is DELETE:
                head.pop(name, None)
            else:
                head[name] = value
        return sign(claims, broker, head)

    return verifier, resign(data["acknowledgments"][1]), resign(data["session_receipt"])


@pytest.mark.parametrize(
    "kid",
    [
        f"did:web:api.parafe.ai#{FIXTURE_BROKER_KID}",  # the form the broker's credentials use
        f"#{FIXTURE_BROKER_KID}",
        f"did:web:localhost%3A3310#{FIXTURE_BROKER_KID}",  # the reference takes the fragment
    ],
)
def test_broker_jws_kid_may_be_a_did_url(kid: str) -> None:
    verifier, ack, session = _broker_artifacts({"kid": kid})
    assert verifier.verify_index_ack(ack, expected_issuer="did:web:api.parafe.ai").seq == 2
    checked = verifier.verify_session_receipt(session, expected_issuer="did:web:api.parafe.ai")
    assert checked.session_id == fixture(PHASE2)["session_id"]
    # A DID URL whose fragment names no key is still refused.
    verifier, ack, session = _broker_artifacts({"kid": "did:web:api.parafe.ai#another"})
    for check, artifact in (
        (verifier.verify_index_ack, ack),
        (verifier.verify_session_receipt, session),
    ):
        with pytest.raises(ParafeError) as caught:
            check(artifact)
        assert caught.value.code == "KEY_NOT_FOUND"


def test_broker_jws_whose_keys_cannot_be_fetched_is_key_fetch_failed() -> None:
    # As for credentials: @getparafe/verify's verifyIndexAck and verifyReceiptJWS (in
    # src/action-receipt.ts, src/receipt-jws.ts) rethrow the key source's KEY_FETCH_FAILED;
    # KEY_NOT_FOUND is for a kid the fetched keys lack (above).
    _, ack, session = _broker_artifacts({})
    policy = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)
    verifier = ReceiptVerifier(
        BrokerKeys(unreachable_url(), fetch_policy=policy), clock=lambda: fixture_now(PHASE2)
    )
    checks: list[tuple[str, Any]] = [
        ("ack", lambda: verifier.verify_index_ack(ack)),
        ("session", lambda: verifier.verify_session_receipt(session)),
        ("async ack", lambda: asyncio.run(verifier.averify_index_ack(ack))),
        ("async session", lambda: asyncio.run(verifier.averify_session_receipt(session))),
    ]
    for name, check in checks:
        with pytest.raises(ParafeError) as caught:
            check()
        assert caught.value.code == "KEY_FETCH_FAILED", name
        assert caught.value.message.startswith("Could not fetch the broker's keys: "), name


@pytest.mark.parametrize("kid", [DELETE, "", "did:web:api.parafe.ai#"])
def test_broker_jws_without_kid_is_refused(kid: Any) -> None:
    # The broker names its key on every JWS since 2026-09-30; the reference refuses one that
    # does not (KEY_NOT_FOUND, "Broker JWS has no kid") instead of trying every key.
    verifier, ack, session = _broker_artifacts({"kid": kid})
    for check, artifact in (
        (verifier.verify_index_ack, ack),
        (verifier.verify_session_receipt, session),
    ):
        with pytest.raises(ParafeError) as caught:
            check(artifact)
        assert caught.value.code == "KEY_NOT_FOUND"
        assert caught.value.message == "Broker JWS has no kid"
