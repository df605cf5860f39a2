"""Property tests: whatever another agent or a broker sends, verification ends in a result or
a `ParafeError` with one of the documented codes, never another exception."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    INVALID_PROOF,
    RECEIPT_CODES,
    VERIFIER_CODES,
    CardExtension,
    ParafeError,
    ParafeVerifier,
    ReceiptVerifier,
    StaticBrokerKeys,
    agent_did,
    parse_card_extension,
)
from pactmw.protocols.parafe._online import interpret_answer
from tests.parafe.support import Minter, did_document, message, sign

NOW = 1_790_741_039.783
MINTER = Minter(NOW)
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400), 2**53 + 1])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)


def _near(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values) | json_values


TOKEN_CLAIMS = {
    "iss": _near("parafe-trust-broker"),
    "exp": _near(int(NOW) + 300, int(NOW), int(NOW) - 1),
    "iat": _near(int(NOW)),
    "nbf": _near(int(NOW), int(NOW) + 5),
    "token_type": _near("consent"),
    "scope": _near("place-order", "toString"),
    "permissions": _near(["create_order"], [], ["create_order", "x"]),
    "exclusions": _near([], ["create_order"]),
    "session_id": _near(MINTER.session_id),
    "target_agent_id": _near(MINTER.target_id),
    "authorization_modality": _near("attested", "verified", "autonomous"),
    "initiator_proof": _near("pop", "credential"),
    "cnf": _near({"jkt": MINTER.initiator.public.thumbprint}, {}),
    "sub": _near(MINTER.initiator_id, ""),
    "initiator_agent_id": _near(MINTER.initiator_id),
    "aud": _near(agent_did(MINTER.target_id)),
}
token_overrides = st.fixed_dictionaries({}, optional=TOKEN_CLAIMS)
PROOF_CLAIMS = {
    "iat": _near(int(NOW), int(NOW) - 400),
    "jti": _near("j" * 16, "short"),
    "ath": json_values,
    "aud": _near(agent_did(MINTER.target_id)),
    "mid": _near("msg-1", "other"),
    "exp": json_values,
    "nbf": json_values,
}
proof_overrides = st.fixed_dictionaries({}, optional=PROOF_CLAIMS)


def verifier(documents: Any = None, **options: Any) -> ParafeVerifier:
    keys = StaticBrokerKeys(
        MINTER.jwks, did_documents=documents if documents is not None else MINTER.did_documents()
    )
    return ParafeVerifier(
        agent_id=MINTER.target_id,
        keys=keys,
        clock=lambda: NOW,
        scope_requirements={
            "place-order": {
                "permissions": ["create_order"],
                "minimum_authorization_modality": "attested",
            }
        },
        **options,
    )


def _outcome(call: Any, codes: frozenset[str]) -> str:
    code = "ok"
    try:
        call()
    except ParafeError as exc:
        code = exc.code
    assert code == "ok" or code in codes, code
    return code


@SETTINGS
@given(json_values, json_values)
def test_any_message(metadata: Any, data: Any) -> None:
    ver = verifier()
    for msg in (metadata, {"metadata": metadata}, {"metadata": {EXTENSION_URI: data}}):
        _outcome(lambda m=msg: ver.verify(m, action="create_order"), VERIFIER_CODES)


@SETTINGS
@given(st.text(max_size=300), st.text(max_size=50), st.text(max_size=300) | st.none())
def test_any_strings_as_consent(token: str, session: str, proof: str | None) -> None:
    msg = message(token, session, proof)
    _outcome(lambda: verifier().verify(msg, action="create_order"), VERIFIER_CODES)


@SETTINGS
@given(token_overrides, st.booleans())
def test_any_signed_token_claims(overrides: dict[str, Any], with_proof: bool) -> None:
    token = MINTER.token(**overrides)
    proof = MINTER.proof(token) if with_proof else None
    msg = message(token, MINTER.session_id, proof)
    _outcome(lambda: verifier().verify(msg, action="create_order"), VERIFIER_CODES)


@SETTINGS
@given(
    proof_overrides, st.dictionaries(st.sampled_from(["alg", "typ", "kid", "crit"]), json_values)
)
def test_any_signed_proof(overrides: dict[str, Any], header: dict[str, Any]) -> None:
    token = MINTER.token()
    proof = MINTER.proof(
        token, header={"alg": "EdDSA", "typ": "parafe-pop+jwt", **header}, **overrides
    )
    code = _outcome(
        lambda: verifier().verify(message(token, MINTER.session_id, proof)), VERIFIER_CODES
    )
    assert code in ("ok", INVALID_PROOF)


@SETTINGS
@given(json_values | st.dictionaries(st.sampled_from(["verificationMethod", "id"]), json_values))
def test_any_did_document(document: Any) -> None:
    token = MINTER.token()
    proof = MINTER.proof(token)
    ver = verifier(documents={MINTER.initiator_id: document})
    code = _outcome(lambda: ver.verify(message(token, MINTER.session_id, proof)), VERIFIER_CODES)
    assert code == INVALID_PROOF


SHOP_KEY = generate_private_jwk("ES256")
SHOP = "prf_agent_shop0001"
RECEIPT_CLAIMS = {
    "iss": _near(agent_did(SHOP), "did:web:x"),
    "ver": _near(1),
    "session_id": _near("s"),
    "consent_ref": _near("c"),
    "action": _near("a"),
    "jti": _near("j"),
    "iat": _near(int(NOW), int(NOW) + 100),
    "result": _near("success", "error"),
    "error": _near(None, "failed", "oops"),
    "exp": json_values,
    "nbf": json_values,
}


@SETTINGS
@given(
    st.fixed_dictionaries({}, optional=RECEIPT_CLAIMS),
    st.dictionaries(st.sampled_from(["alg", "typ", "kid", "crit"]), json_values),
    st.one_of(st.none(), json_values),
)
def test_any_signed_receipt(claims: dict[str, Any], header: dict[str, Any], document: Any) -> None:
    head = {
        "alg": "ES256",
        "typ": "parafe-action-receipt+jwt",
        "kid": f"{agent_did(SHOP)}#keys-1",
        **header,
    }
    receipt = sign(claims, SHOP_KEY, head)
    documents = {SHOP: did_document(SHOP, SHOP_KEY.public) if document is None else document}
    verifier_ = ReceiptVerifier(
        StaticBrokerKeys(MINTER.jwks, did_documents=documents), clock=lambda: NOW
    )
    _outcome(lambda: verifier_.verify_action_receipt(receipt), RECEIPT_CODES)
    _outcome(lambda: verifier_.verify_index_ack(receipt), RECEIPT_CODES)
    _outcome(lambda: verifier_.verify_session_receipt(receipt), RECEIPT_CODES)


@SETTINGS
@given(json_values | st.binary(max_size=40))
def test_any_value_as_a_token_or_receipt(value: Any) -> None:
    # Found in a custom-server trial: a token or receipt read from a JSON body can be any
    # JSON value; verify_token, verify_index_ack and verify_session_receipt raised
    # TypeError or AttributeError for one that is not a string.
    keys = StaticBrokerKeys(MINTER.jwks, did_documents=MINTER.did_documents())
    receipts = ReceiptVerifier(keys, clock=lambda: NOW)
    _outcome(lambda: verifier().verify_token(value), VERIFIER_CODES)
    _outcome(lambda: asyncio.run(verifier().averify_token(value)), VERIFIER_CODES)
    _outcome(lambda: receipts.verify_action_receipt(value), RECEIPT_CODES)
    _outcome(lambda: receipts.verify_index_ack(value), RECEIPT_CODES)
    _outcome(lambda: receipts.verify_session_receipt(value), RECEIPT_CODES)


@SETTINGS
@given(st.integers(min_value=100, max_value=599), json_values | st.binary(max_size=40))
def test_any_online_answer(status: int, body: Any) -> None:
    import json

    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    token = MINTER.token()
    _outcome(
        lambda: interpret_answer(
            status, raw, token=token, action="a", session_id="s", agent_id=MINTER.target_id
        ),
        VERIFIER_CODES,
    )


@SETTINGS
@given(json_values, json_values)
def test_any_card(params: Any, scope: Any) -> None:
    for entry_params in (
        params,
        {
            "agent_id": "a",
            "broker_url": "b",
            "minimum_identity_assurance": "registered",
            "scope_requirements": {"s": scope},
        },
    ):
        card = {"capabilities": {"extensions": [{"uri": EXTENSION_URI, "params": entry_params}]}}
        parsed = parse_card_extension(card)
        assert parsed is None or isinstance(parsed, CardExtension)
