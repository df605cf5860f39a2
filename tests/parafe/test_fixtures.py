"""Every real broker artifact verifies at its "now", and every single-character tampering of
every token, proof and receipt is refused with the right code."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pactmw.core.jwk import import_public_jwk
from pactmw.protocols.parafe import (
    BROKER_DID,
    INVALID_CONSENT_TOKEN,
    INVALID_PROOF,
    RECEIPT_CODES,
    ParafeError,
    ParafeVerifier,
    ReceiptVerifier,
    StaticBrokerKeys,
    check_session_index,
    consent_ref,
)
from pactmw.protocols.parafe._proof import initiator_key
from tests.parafe.support import (
    CUSTOMER,
    OPERATOR,
    OPERATOR_TARGET,
    PHASE2,
    SHOP,
    V2,
    V2_AGENT,
    decode,
    fixture,
    fixture_now,
    flip,
    flippable_positions,
    message,
)


def v2_verifier(**options: Any) -> ParafeVerifier:
    data = fixture(V2)
    now = fixture_now(V2)
    return ParafeVerifier(
        agent_id=V2_AGENT, keys=StaticBrokerKeys(data["jwks"]), clock=lambda: now, **options
    )


def v2_message(proof: str | None = None) -> dict[str, Any]:
    data = fixture(V2)
    claims = decode(data["consent_token"])[1]
    return message(
        data["consent_token"],
        claims["session_id"],
        proof if proof is not None else data["presentation_proof"],
        message_id="msg-fixture-1",
    )


def phase2_receipts() -> tuple[ReceiptVerifier, dict[str, Any]]:
    data = fixture(PHASE2)
    now = fixture_now(PHASE2)
    keys = StaticBrokerKeys(data["jwks"], did_documents=data["did_documents"])
    return ReceiptVerifier(keys, clock=lambda: now), data


# -- everything verifies ---------------------------------------------------------------------


def test_v2_consent_token_and_proof_verify() -> None:
    data = fixture(V2)
    verified = v2_verifier().verify(
        v2_message(), action="create_order", initiator_key=data["initiator_jwk"]
    )
    assert verified.proof_verified
    assert verified.claims.scope == "place-order"
    assert verified.claims.exclusions == ("issue_refund",)
    assert verified.message_id == "msg-fixture-1"
    assert verified.proof is not None
    assert verified.proof.mid == "msg-fixture-1"
    assert verified.consent_ref == "UZ_EPkOf86dmQ1l4wHmbj06ix7zTM1Evq2tUnzXqK_4"


def test_v2_verifies_async() -> None:
    data = fixture(V2)
    verified = asyncio.run(
        v2_verifier().averify(
            v2_message(), action="create_order", initiator_key=data["initiator_jwk"]
        )
    )
    assert verified.proof_verified


def test_v2_proof_verifies_through_the_initiator_did_document() -> None:
    data = fixture(V2)
    now = fixture_now(V2)
    initiator = decode(data["consent_token"])[1]["sub"]
    document = {
        "id": f"did:web:api.parafe.ai:agents:{initiator}",
        "verificationMethod": [{"id": "x#keys-1", "publicKeyJwk": data["initiator_jwk"]}],
    }
    keys = StaticBrokerKeys(data["jwks"], did_documents={initiator: document})
    verifier = ParafeVerifier(agent_id=V2_AGENT, keys=keys, clock=lambda: now)
    assert verifier.verify(v2_message(), action="create_order").proof_verified


@pytest.mark.parametrize(("name", "agent"), [("browse", SHOP), ("order", SHOP)])
def test_phase2_consent_tokens_verify(name: str, agent: str) -> None:
    data = fixture(PHASE2)
    now = fixture_now(PHASE2)
    verifier = ParafeVerifier(
        agent_id=agent, keys=StaticBrokerKeys(data["jwks"]), clock=lambda: now
    )
    claims = verifier.verify_token(data["consent_tokens"][name], session_id=data["session_id"])
    assert claims.target_agent_id == SHOP
    assert claims.initiator == CUSTOMER


def test_operator_principal_token_returns_parties_unchanged() -> None:
    data = fixture(OPERATOR)
    now = fixture_now(OPERATOR)
    verifier = ParafeVerifier(
        agent_id=OPERATOR_TARGET, keys=StaticBrokerKeys(data["jwks"]), clock=lambda: now
    )
    claims = verifier.verify_token(data["consent_token"])
    payload = decode(data["consent_token"])[1]
    assert claims.initiator_parties == payload["initiator_parties"]
    assert claims.target_parties == payload["target_parties"]
    assert dict(claims.claims) == payload  # every claim, unchanged


def test_phase2_action_receipts_verify_with_did_documents() -> None:
    verifier, data = phase2_receipts()
    checked = [
        verifier.verify_action_receipt(r, expected_session_id=data["session_id"])
        for r in data["action_receipts"]
    ]
    assert [(c.action, c.result, c.error) for c in checked] == [
        ("read_menu", "success", None),
        ("create_order", "success", None),
        ("issue_refund", "error", "excluded"),
        ("confirm_pickup", "error", "failed"),
    ]
    assert [decode(r)[0]["alg"] for r in data["action_receipts"]] == [
        "ES256",
        "ES256",
        "ES256",
        "EdDSA",
    ]
    assert checked[1].business_ref == "ord_fixture_1"
    assert checked[1].consent_ref == consent_ref(data["consent_tokens"]["order"])
    verifier.verify_action_receipt(
        data["action_receipts"][0], consent_token=data["consent_tokens"]["browse"]
    )


def test_phase2_action_receipts_verify_async() -> None:
    verifier, data = phase2_receipts()

    async def main() -> list[str]:
        return [
            (await verifier.averify_action_receipt(receipt)).session_id
            for receipt in data["action_receipts"]
        ]

    assert set(asyncio.run(main())) == {data["session_id"]}


def test_phase2_acknowledgments_and_session_receipt_verify() -> None:
    verifier, data = phase2_receipts()
    acks = [
        verifier.verify_index_ack(a, expected_issuer=BROKER_DID) for a in data["acknowledgments"]
    ]
    assert [a.seq for a in acks] == [1, 2, 3, 4]
    assert acks[0].prev is None
    session = verifier.verify_session_receipt(data["session_receipt"], expected_issuer=BROKER_DID)
    head = check_session_index(session, receipts=data["action_receipts"], acknowledgments=acks)
    assert head == session.chain_head == acks[-1].entry_hash


@pytest.mark.parametrize("name", [V2, OPERATOR])
def test_session_receipts_verify_with_the_broker_jwks(name: str) -> None:
    data = fixture(name)
    now = fixture_now(name)
    verifier = ReceiptVerifier(StaticBrokerKeys(data["jwks"]), clock=lambda: now)
    session = verifier.verify_session_receipt(data["receipt_jws"], expected_issuer=BROKER_DID)
    assert session.session_id == decode(data["consent_token"])[1]["session_id"]
    assert check_session_index(session) is None  # no actions: an empty chain
    token_refs = [t["token_ref"] for t in session.claims["consent_tokens"]]
    assert token_refs == [consent_ref(data["consent_token"])]


# -- single-character tampering --------------------------------------------------------------


def _all_tokens() -> list[tuple[str, str, str, float]]:
    """(label, fixture file, token, now) for every consent token."""
    out = [
        ("v2", V2, fixture(V2)["consent_token"], fixture_now(V2)),
        ("operator", OPERATOR, fixture(OPERATOR)["consent_token"], fixture_now(OPERATOR)),
    ]
    for name, token in fixture(PHASE2)["consent_tokens"].items():
        out.append((name, PHASE2, token, fixture_now(PHASE2)))
    return out


@pytest.mark.parametrize(
    ("label", "name", "token", "now"), _all_tokens(), ids=lambda v: str(v)[:12]
)
def test_every_tampered_consent_token_is_refused(
    label: str, name: str, token: str, now: float
) -> None:
    verifier = ParafeVerifier(
        agent_id="unused", keys=StaticBrokerKeys(fixture(name)["jwks"]), clock=lambda: now
    )
    verifier.verify_token(token, check_agent=False)
    positions = flippable_positions(token)
    assert len(positions) > 900
    for index in positions:
        with pytest.raises(ParafeError) as caught:
            verifier.verify_token(flip(token, index), check_agent=False)
        assert caught.value.code == INVALID_CONSENT_TOKEN, index


def test_every_tampered_presentation_proof_is_refused() -> None:
    data = fixture(V2)
    proof = data["presentation_proof"]
    verifier = v2_verifier()
    positions = flippable_positions(proof)
    assert len(positions) > 390
    for index in positions:
        with pytest.raises(ParafeError) as caught:
            verifier.verify(
                v2_message(flip(proof, index)),
                action="create_order",
                initiator_key=data["initiator_jwk"],
            )
        assert caught.value.code == INVALID_PROOF, index
    # The untouched proof still verifies: no tampered attempt burned its jti.
    verifier.verify(v2_message(), action="create_order", initiator_key=data["initiator_jwk"])


def test_every_tampered_action_receipt_is_refused() -> None:
    verifier, data = phase2_receipts()
    for receipt in data["action_receipts"]:
        signature_start = receipt.rindex(".") + 1
        for index in flippable_positions(receipt):
            with pytest.raises(ParafeError) as caught:
                verifier.verify_action_receipt(flip(receipt, index))
            code = caught.value.code
            assert code in RECEIPT_CODES, index
            if index >= signature_start:
                # A signature that decodes to other bytes, or not canonically at all.
                assert code in ("INVALID_SIGNATURE", "MALFORMED"), index


@pytest.mark.parametrize("kind", ["session_receipt", "acknowledgments"])
def test_every_tampered_broker_receipt_is_refused(kind: str) -> None:
    verifier, data = phase2_receipts()
    artifacts = [data[kind]] if kind == "session_receipt" else data[kind]
    for artifact in artifacts:
        for index in flippable_positions(artifact):
            check = (
                verifier.verify_session_receipt
                if kind == "session_receipt"
                else verifier.verify_index_ack
            )
            with pytest.raises(ParafeError) as caught:
                check(flip(artifact, index))
            assert caught.value.code in RECEIPT_CODES, index


@pytest.mark.parametrize("name", [V2, OPERATOR])
def test_fixture_session_receipts_tampered_are_refused(name: str) -> None:
    data = fixture(name)
    now = fixture_now(name)
    verifier = ReceiptVerifier(StaticBrokerKeys(data["jwks"]), clock=lambda: now)
    receipt = data["receipt_jws"]
    for index in flippable_positions(receipt):
        with pytest.raises(ParafeError) as caught:
            verifier.verify_session_receipt(flip(receipt, index))
        assert caught.value.code in RECEIPT_CODES


# -- known-answer thumbprints (§5) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("jwk", "expected"),
    [
        (
            {
                "kty": "EC",
                "crv": "P-256",
                "x": "DP8JIkhK5mg_YYA4jDLvcYqC-qS6c5_ezkCJqavW18I",
                "y": "XRSk2SCjoMNl6JZN4fhXCkD2guvpTkGXeUoj7F6Xskc",
            },
            "363Q6wMkgayCrXhgC5d_aIrYsDAUpJbTZaO4twW3Abs",
        ),
        (
            {"kty": "OKP", "crv": "Ed25519", "x": "bjfNZCFkDRwG_oSmAdEIah7EwSWE7U76hAKy0aJQD4I"},
            "RkHy1TuGaxUzpIof7aW7T-LRmBGATh8avnFo2bFsuJk",
        ),
        (
            {
                "kty": "EC",
                "crv": "P-256",
                "x": "_kBqK2YqP575ystt4dPPgS8KcmyUd32h00hRwh2UrUM",
                "y": "oWS9imHHTUvVFAezr71dJ8KzAGFl4ZRt3cYahRbzXy4",
            },
            "aSWWor4s_GVEzOXRVI7XqMcEzj5WYpGpzqoaORAmpPI",
        ),
    ],
)
def test_thumbprint_known_answers(jwk: dict[str, str], expected: str) -> None:
    assert initiator_key(jwk).thumbprint == expected


@pytest.mark.parametrize("name", [V2, PHASE2, OPERATOR])
def test_broker_kids_are_thumbprints(name: str) -> None:
    for entry in fixture(name)["jwks"]["keys"]:
        assert import_public_jwk(entry).thumbprint == entry["kid"]


def test_tokens_are_bound_to_their_initiator_keys() -> None:
    v2 = fixture(V2)
    assert decode(v2["consent_token"])[1]["cnf"]["jkt"] == (
        import_public_jwk(v2["initiator_jwk"]).thumbprint
    )
    operator = fixture(OPERATOR)
    assert decode(operator["consent_token"])[1]["cnf"]["jkt"] == (
        import_public_jwk(operator["initiator_jwk"]).thumbprint
    )
    phase2 = fixture(PHASE2)
    customer_key = phase2["did_documents"][CUSTOMER]["verificationMethod"][0]["publicKeyJwk"]
    for token in phase2["consent_tokens"].values():
        assert decode(token)[1]["cnf"]["jkt"] == import_public_jwk(customer_key).thumbprint
