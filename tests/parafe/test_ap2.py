"""AP2 beside Parafé (spec §5.3): artifacts in data parts, mandate hashes, AP2 receipts, the card
entry. Built from the reference (a2a-extension `ap2.ts` and tests/unit/ap2-receipts.test.ts,
tests/interop/ap2.test.ts) and the AP2 Python SDK's vectors (tests/parafe/fixtures)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pactmw.core.encoding import b64url_encode
from pactmw.core.jose import parse_compact, verify_signature
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    AP2_CHECKOUT_MANDATE_KEY,
    AP2_EXTENSION_URI,
    EXTENSION_URI,
    Ap2Data,
    Ap2Outcome,
    ConsentClaims,
    ConsentPresenter,
    MandateRef,
    MandateReferences,
    ReceiptSigner,
    agent_did,
    ap2_card_extension,
    ap2_parts,
    mandate_references,
    read_ap2,
    read_consent,
    sign_ap2_receipt,
    with_ap2,
)
from tests.parafe.support import decode

VECTORS = json.loads(
    (Path(__file__).parent / "fixtures" / "ap2-sdk-vectors.json").read_text(encoding="utf-8")
)["vectors"]
CHAIN = next(v for v in VECTORS if v["id"] == "hnp-payment")["chain"]
SDK_REFERENCE = next(v for v in VECTORS if v["id"] == "hnp-payment")["sdk_reference"]
RECEIPT = "eyJhbGciOiJFUzI1NiJ9.eyJzdGF0dXMiOiJTdWNjZXNzIn0.c2ln"
NOW = 1_790_784_700
SHOP_DID = agent_did("prf_agent_shop0001")


def _sha(text: str, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm, text.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


# -- mandate references ------------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["id"])
def test_closed_jwt_is_the_ap2_sdks_reference_and_sd_hash_the_final_sd_jwts(
    vector: dict[str, Any],
) -> None:
    references = mandate_references(vector["chain"])
    assert references.closed_jwt == vector["sdk_reference"]
    last = vector["chain"].split("~~")[-1]
    assert references.sd_hash == _sha(last)
    assert references.reference() == references.closed_jwt
    assert references.reference("sd_hash") == references.sd_hash


def _sd_jwt(payload: dict[str, Any]) -> str:
    header = b64url_encode(b'{"alg":"ES256"}')
    return f"{header}.{b64url_encode(json.dumps(payload).encode())}.c2ln~WyJzIiwiYSIsMV0~"


def test_sd_hash_follows_the_mandates_sd_alg() -> None:
    mandate = _sd_jwt({"_sd_alg": "SHA-384"})
    references = mandate_references(mandate)
    assert references.sd_hash == _sha(mandate, "sha384")
    assert references.closed_jwt == _sha(mandate.split("~")[0])  # always SHA-256


@pytest.mark.parametrize(
    ("mandate", "message"),
    [
        ("a.b.c", 'ending in "~"'),
        (42, 'ending in "~"'),
        ("not-a-jwt~", "not a JWT"),
        ("a.!!.c~", "not a JWT"),
        (_sd_jwt({"_sd_alg": "md5"}), 'Unsupported _sd_alg "md5"'),
        ("é.b.c~", "ASCII"),
    ],
)
def test_mandate_references_refuse_what_is_not_a_presented_sd_jwt(
    mandate: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        mandate_references(mandate)


def test_mandate_refs_of_a_token_are_read_typed_and_match_either_form() -> None:
    sd_hash = mandate_references(CHAIN).sd_hash
    refs: list[Any] = [
        {"family": "checkout", "closed_jwt": SDK_REFERENCE, "sd_hash": "other"},
        {"family": "payment", "closed_jwt": "x", "sd_hash": sd_hash},
        {"family": "refund", "closed_jwt": "x", "sd_hash": "y"},  # not a family: passed over
        {"family": "checkout", "closed_jwt": 1, "sd_hash": "y"},
        "not an object",
    ]
    claims = ConsentClaims(
        claims={"mandate_refs": refs}, scope="s", permissions=(), exclusions=(), session_id="x"
    )
    assert claims.mandates == (
        MandateRef(family="checkout", closed_jwt=SDK_REFERENCE, sd_hash="other"),
        MandateRef(family="payment", closed_jwt="x", sd_hash=sd_hash),
    )
    presented = mandate_references(CHAIN)
    assert all(ref.matches(presented) for ref in claims.mandates)
    assert not MandateRef(family="checkout", closed_jwt="a", sd_hash="b").matches(presented)
    bare = ConsentClaims(claims={}, scope="s", permissions=(), exclusions=(), session_id="x")
    assert bare.mandates == ()


# -- AP2 receipts ------------------------------------------------------------------------------


def _verified(receipt: str, key: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    jws = parse_compact(receipt, allowed_algs=frozenset({"ES256"}))
    verify_signature(jws, key)
    return dict(jws.header), jws.claims()


def test_success_checkout_receipt_is_es256_with_the_ap2_schema_and_the_sdk_reference() -> None:
    key = generate_private_jwk("ES256", kid="ignored")
    signed = sign_ap2_receipt(
        key,
        "checkout",
        Ap2Outcome(order_id="ord_1"),
        CHAIN,
        iss="https://demo-merchant.example",
        now=NOW,
        kid="merchant-key-1",
    )
    assert signed.kind == "ap2.checkout_receipt"
    assert signed.reference == SDK_REFERENCE
    assert signed.references == mandate_references(CHAIN)
    header, claims = _verified(signed.receipt, key.public)
    assert header == {"alg": "ES256", "typ": "JWT", "kid": "merchant-key-1"}
    assert claims == {
        "status": "Success",
        "iss": "https://demo-merchant.example",
        "iat": NOW,
        "reference": SDK_REFERENCE,
        "order_id": "ord_1",
    }
    assert dict(signed.claims) == claims


def test_a_rejection_gets_a_receipt_with_the_ap2_code_and_the_spec_form_on_request() -> None:
    key = generate_private_jwk("ES256")
    outcome = Ap2Outcome(error="invalid_mandate", error_description="line_items: not filled")
    signed = sign_ap2_receipt(
        key, "checkout", outcome, CHAIN, iss="m", now=NOW, reference_form="sd_hash"
    )
    header, claims = _verified(signed.receipt, key.public)
    assert "kid" not in header
    assert claims == {
        "status": "Error",
        "iss": "m",
        "iat": NOW,
        "reference": mandate_references(CHAIN).sd_hash,
        "error": "invalid_mandate",
        "error_description": "line_items: not filled",
    }


def test_payment_receipts_need_payment_id_and_on_success_the_confirmations() -> None:
    key = generate_private_jwk("ES256")
    references = MandateReferences(sd_hash="s", closed_jwt="c")
    ok = sign_ap2_receipt(
        key,
        "payment",
        Ap2Outcome(payment_id="pay_1", psp_confirmation_id="psp_1", network_confirmation_id="n_1"),
        references,
        iss="psp.example",
        now=NOW,
    )
    assert ok.kind == "ap2.payment_receipt"
    assert dict(ok.claims) == {
        "status": "Success",
        "iss": "psp.example",
        "iat": NOW,
        "reference": "c",
        "payment_id": "pay_1",
        "psp_confirmation_id": "psp_1",
        "network_confirmation_id": "n_1",
    }
    with pytest.raises(ValueError, match="confirmation_id"):
        sign_ap2_receipt(
            key, "payment", Ap2Outcome(payment_id="pay_1"), references, iss="p", now=NOW
        )
    refused = sign_ap2_receipt(
        key,
        "payment",
        Ap2Outcome(payment_id="pay_2", error="invalid_credential", error_description="untrusted"),
        references,
        iss="p",
        now=NOW,
    )
    assert refused.claims["status"] == "Error"
    assert refused.claims["payment_id"] == "pay_2"
    assert "psp_confirmation_id" not in refused.claims


@pytest.mark.parametrize(
    ("kind", "outcome", "message"),
    [
        ("checkout", Ap2Outcome(), "order_id"),
        ("checkout", Ap2Outcome(status="Error", error="invalid_mandate"), "error_description"),
        ("checkout", Ap2Outcome(status="Success", error="x", order_id="o"), "has no error"),
        ("payment", Ap2Outcome(status="Error", error="e", error_description="d"), "payment_id"),
        ("refund", Ap2Outcome(order_id="o"), "kind must be"),
    ],
)
def test_incomplete_receipts_are_refused(kind: str, outcome: Ap2Outcome, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sign_ap2_receipt(generate_private_jwk("ES256"), kind, outcome, CHAIN, iss="m", now=NOW)


def test_ap2_receipts_need_a_p256_key_and_a_mandate() -> None:
    with pytest.raises(ValueError, match="P-256"):
        sign_ap2_receipt(
            generate_private_jwk("EdDSA"), "checkout", Ap2Outcome(order_id="o"), CHAIN, iss="m",
            now=NOW,
        )  # fmt: skip
    with pytest.raises(ValueError, match='ending in "~"'):
        sign_ap2_receipt(
            generate_private_jwk("ES256"), "checkout", Ap2Outcome(order_id="o"), "a.b.c",
            iss="m", now=NOW,
        )  # fmt: skip


def test_the_signer_defaults_iss_and_kid_to_the_agents_did() -> None:
    key = generate_private_jwk("ES256")
    signer = ReceiptSigner(key, SHOP_DID, clock=lambda: NOW + 0.9)
    signed = signer.ap2_receipt("checkout", Ap2Outcome(order_id="ord_9"), CHAIN)
    header, claims = _verified(signed.receipt, key.public)
    assert header["kid"] == f"{SHOP_DID}#keys-1"
    assert claims["iss"] == SHOP_DID
    assert claims["iat"] == NOW
    other = signer.ap2_receipt("checkout", Ap2Outcome(order_id="o"), CHAIN, iss="https://m.example")
    assert other.claims["iss"] == "https://m.example"
    with pytest.raises(ValueError, match="P-256"):
        ReceiptSigner(generate_private_jwk("EdDSA"), SHOP_DID).ap2_receipt(
            "checkout", Ap2Outcome(order_id="o"), CHAIN
        )


# -- AP2 data in A2A messages ------------------------------------------------------------------


def _message(**extra: Any) -> dict[str, Any]:
    return {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Buy."}], **extra}


def test_a_consent_and_a_mandate_in_one_a2a_1_0_message_neither_reshaped() -> None:
    caller = generate_private_jwk("EdDSA")
    token_claims = {"aud": SHOP_DID, "session_id": "sess_ap2"}
    token = f"{b64url_encode(b'{}')}.{b64url_encode(json.dumps(token_claims).encode())}.c2ln"
    presenter = ConsentPresenter(token=token, session_id="sess_ap2", key=caller)
    both = with_ap2(presenter.attach(_message()), Ap2Data(checkout_mandate=CHAIN))
    assert both["parts"] == [
        {"text": "Buy."},
        {"data": {AP2_CHECKOUT_MANDATE_KEY: CHAIN}, "mediaType": "application/json"},
    ]
    assert both["extensions"] == [EXTENSION_URI, AP2_EXTENSION_URI]
    # The Parafé token stays out of parts; the AP2 data stays out of Parafé metadata.
    assert token not in json.dumps(both["parts"])
    assert CHAIN not in json.dumps(both["metadata"])
    assert read_consent(both).token == token
    assert read_ap2(both) == Ap2Data(checkout_mandate=CHAIN)


def test_a2a_0_3_messages_get_0_3_data_parts_as_the_ap2_samples_send_them() -> None:
    message = {"messageId": "m", "role": "user", "kind": "message", "parts": [{"kind": "text"}]}
    out = with_ap2(message, Ap2Data(checkout_mandate=CHAIN))
    assert out["parts"][1] == {"kind": "data", "data": {AP2_CHECKOUT_MANDATE_KEY: CHAIN}}
    assert read_ap2(out) == Ap2Data(checkout_mandate=CHAIN)
    forced = with_ap2(_message(), Ap2Data(payment_receipt=RECEIPT), shape="0.3")
    assert forced["parts"][1] == {"kind": "data", "data": {"ap2.PaymentReceipt": RECEIPT}}
    assert message["parts"] == [{"kind": "text"}]  # the original is not changed


def test_every_artifact_in_its_own_part_in_the_references_order() -> None:
    data = Ap2Data(
        checkout_mandate="c~",
        payment_mandate="p~",
        checkout_receipt=RECEIPT,
        payment_receipt={"status": "Success"},
    )
    assert [list(p["data"]) for p in ap2_parts(data)] == [
        ["ap2.mandates.CheckoutMandateSdJwt"],
        ["ap2.mandates.PaymentMandateSdJwt"],
        ["ap2.CheckoutReceipt"],
        ["ap2.PaymentReceipt"],
    ]
    assert read_ap2(with_ap2(_message(), data)) == data
    extensions = with_ap2(_message(extensions=[AP2_EXTENSION_URI]), data)["extensions"]
    assert extensions == [AP2_EXTENSION_URI]
    with pytest.raises(TypeError, match="checkout_mandate"):
        ap2_parts(Ap2Data(checkout_mandate={"not": "a string"}))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="payment_receipt"):
        ap2_parts(Ap2Data(payment_receipt=["a list"]))  # type: ignore[arg-type]


def test_reading_is_total_the_first_part_wins_and_wrong_types_are_passed_over() -> None:
    parts = [
        {"data": {AP2_CHECKOUT_MANDATE_KEY: 42, "ap2.PaymentReceipt": ["no"]}},
        {"kind": "text", "data": {AP2_CHECKOUT_MANDATE_KEY: "not-a-data-part~"}},
        {"kind": "data", "data": {AP2_CHECKOUT_MANDATE_KEY: "first~"}},
        {"data": {AP2_CHECKOUT_MANDATE_KEY: "second~", "ap2.PaymentReceipt": {"ok": 1}}},
        "not a part",
        {"data": "not an object"},
    ]
    assert read_ap2({"parts": parts}) == Ap2Data(
        checkout_mandate="first~", payment_receipt={"ok": 1}
    )
    nothing: list[Any] = [None, [], "x", {}, {"parts": {}}, {"parts": [{"text": "hi"}]}]
    for message in nothing:
        assert read_ap2(message) is None


def test_the_card_entry_is_the_ap2_samples() -> None:
    assert ap2_card_extension() == {
        "uri": "https://github.com/google-agentic-commerce/ap2/v1",
        "description": "Supports the Agent Payments Protocol.",
        "required": False,
    }
    assert ap2_card_extension(required=True, description="Pays.")["required"] is True


def test_receipt_jws_round_trip_through_the_fixture_decoder() -> None:
    # The receipt's payload is plain JSON a shopping agent can read without our code.
    key = generate_private_jwk("ES256")
    signed = sign_ap2_receipt(key, "checkout", Ap2Outcome(order_id="o"), CHAIN, iss="m", now=NOW)
    assert decode(signed.receipt)[1]["reference"] == SDK_REFERENCE
