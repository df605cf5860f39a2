"""Signatures and keys that are mathematically degenerate (SECURITY.md, "Algorithm
confusion": the key's type must fit `alg`, ES256 signatures are raw R‖S).

ECDSA: "psychic signatures" (CVE-2022-21449, r = s = 0 accepted), r or s out of range, a
signature of the wrong length or encoding, and invalid-curve keys (a point off P-256, the
point at infinity, coordinates of the wrong size). Ed25519, where Parafé accepts it (an
initiator's key for presentation proofs, an agent's key for action receipts): a public key of
small order lets anyone sign anything under it with R = identity and S = 0 (OpenSSL, and so
`cryptography`, accepts such a signature), and a non-canonical S (S + L) is a second
signature for the same message.

Every attack goes through a public entry point: the PACT identity verifier (ES256, the
agent's inline JWKS), `verify_presentation_proof` (an initiator's key) and
`ReceiptVerifier.verify_action_receipt` (an agent's key from its DID document).
"""

from __future__ import annotations

from typing import Any

import pytest

from pactmw.core.encoding import b64url_decode, b64url_encode, json_dumps
from pactmw.core.errors import AuthenticationFailed, MalformedInput
from pactmw.core.jwk import (
    KeySet,
    PrivateJWK,
    generate_private_jwk,
    import_public_jwk,
    parse_jwks,
    thumbprint,
)
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.protocols.parafe import (
    INVALID_PROOF,
    ParafeError,
    ReceiptVerifier,
    StaticBrokerKeys,
    agent_did,
    create_presentation_proof,
    verify_presentation_proof,
)
from tests.advisories.support import IDENTITY_CLAIMS, NOW, segment, sign_raw
from tests.support.parties import AUDIENCE, ISSUER

#: The order of P-256's base point.
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
#: The order of Ed25519's base point.
L = 2**252 + 27742317777372353535851937790883648493

AGENT = generate_private_jwk("ES256", kid="pa-1")


def identity() -> IdentityVerifier:
    registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks=KeySet((AGENT.public,)))])
    return IdentityVerifier(audience=AUDIENCE, registry=registry, clock=lambda: NOW)


def refusal(token: str) -> str:
    with pytest.raises(AuthenticationFailed) as refused:
        identity().verify("Bearer " + token)
    return refused.value.reason


def with_signature(token: str, signature: bytes) -> str:
    return token.rsplit(".", 1)[0] + "." + b64url_encode(signature)


HEADER = {"alg": "ES256", "kid": "pa-1"}
GENUINE = sign_raw(AGENT, HEADER, IDENTITY_CLAIMS)
GENUINE_RS = b64url_decode(GENUINE.rsplit(".", 1)[1])


def test_the_genuine_token_is_accepted() -> None:
    # The control: every refusal below is of the signature, not of the token around it.
    assert identity().verify("Bearer " + GENUINE).sub == "u1"


def _int(value: int) -> bytes:
    return value.to_bytes(32, "big")


ES256_FORGERIES: dict[str, bytes] = {
    "r-and-s-zero": bytes(64),  # CVE-2022-21449
    "r-zero": bytes(32) + GENUINE_RS[32:],
    "s-zero": GENUINE_RS[:32] + bytes(32),
    "r-equals-n": _int(N) + GENUINE_RS[32:],
    "s-equals-n": GENUINE_RS[:32] + _int(N),
    "r-plus-n": _int(int.from_bytes(GENUINE_RS[:32], "big") + N)
    if int.from_bytes(GENUINE_RS[:32], "big") + N < 2**256
    else _int(N + 1),
    "s-plus-n": GENUINE_RS[:32] + _int(int.from_bytes(GENUINE_RS[32:], "big") + N)
    if int.from_bytes(GENUINE_RS[32:], "big") + N < 2**256
    else GENUINE_RS[:32] + _int(N + 1),
    "all-ones": b"\xff" * 64,
    "empty": b"",
    "truncated-63": GENUINE_RS[:63],
    "padded-65-trailing": GENUINE_RS + b"\0",
    "padded-65-leading": b"\0" + GENUINE_RS,
    "each-half-padded-to-33": b"\0" + GENUINE_RS[:32] + b"\0" + GENUINE_RS[32:],
    "p384-sized-96": bytes(16) + GENUINE_RS[:32] + bytes(16) + GENUINE_RS[32:],
    "halves-swapped": GENUINE_RS[32:] + GENUINE_RS[:32],
}


@pytest.mark.parametrize("forgery", sorted(ES256_FORGERIES))
def test_a_degenerate_es256_signature_is_refused(forgery: str) -> None:
    assert refusal(with_signature(GENUINE, ES256_FORGERIES[forgery])) == "bad_signature"


def test_a_der_encoded_es256_signature_is_refused() -> None:
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    r, s = int.from_bytes(GENUINE_RS[:32], "big"), int.from_bytes(GENUINE_RS[32:], "big")
    der = encode_dss_signature(r, s)  # the same (valid) signature, in OpenSSL's encoding
    assert refusal(with_signature(GENUINE, der)) == "bad_signature"


# -- invalid-curve keys: a JWKS member that is no P-256 point is never used ------------------------


def _ec_members(**overrides: str) -> dict[str, str]:
    return {**AGENT.public.to_dict(), **overrides}


_X = b64url_decode(AGENT.public.to_dict()["x"])
_Y = b64url_decode(AGENT.public.to_dict()["y"])

BAD_EC_KEYS: dict[str, dict[str, str]] = {
    "point-at-infinity-zeros": _ec_members(x=b64url_encode(bytes(32)), y=b64url_encode(bytes(32))),
    "off-the-curve": _ec_members(y=b64url_encode(_Y[:-1] + bytes([_Y[-1] ^ 1]))),
    # 31 bytes: what a key whose x starts with a zero octet looks like with it stripped.
    "x-leading-zero-stripped": _ec_members(x=b64url_encode(_X[1:])),
    "x-33-bytes": _ec_members(x=b64url_encode(b"\0" + _X)),
    "p384-sized-coordinates": _ec_members(
        x=b64url_encode(bytes(16) + _X), y=b64url_encode(bytes(16) + _Y)
    ),
    "p256-point-named-p384": _ec_members(crv="P-384"),
    "y-coordinate-missing": {k: v for k, v in _ec_members().items() if k != "y"},
}


@pytest.mark.parametrize("name", sorted(BAD_EC_KEYS))
def test_an_ec_key_that_is_no_p256_point_is_skipped(name: str) -> None:
    with pytest.raises(MalformedInput):
        import_public_jwk(BAD_EC_KEYS[name])
    assert parse_jwks({"keys": [BAD_EC_KEYS[name]]}).keys == ()


# -- Ed25519: small-order public keys and non-canonical S ----------------------------------------

#: Every Ed25519 point of small order (the identity, order 2, 4 and 8), as libsodium lists
#: them, with the non-canonical spellings of y = 0 and y = 1 (y + p), sign bit clear; each
#: also with the sign bit set.
_SMALL_ORDER = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
]
SMALL_ORDER_KEYS = [bytes.fromhex(h) for h in _SMALL_ORDER] + [
    bytes.fromhex(h)[:31] + bytes([bytes.fromhex(h)[31] | 0x80]) for h in _SMALL_ORDER
]
TOKEN = "consent.token.here"
TARGET = "did:web:api.parafe.ai:agents:prf_agent_target01"
JTI = "0123456789abcdef-jti"


def _okp(x: bytes) -> dict[str, str]:
    return {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(x)}


def _consent_for(jwk: dict[str, str]) -> dict[str, Any]:
    return {"cnf": {"jkt": thumbprint(jwk)}, "sub": "prf_agent_initiator", "aud": TARGET}


def _forged_proof(header_alg: str = "EdDSA") -> str:
    """A proof whose signature is R = the identity point, S = 0: it verifies under every
    small-order key for any message (the equation [S]B = R + [k]A holds for R = A = O)."""
    claims = {"ath": _sha256_b64url(TOKEN), "aud": TARGET, "iat": NOW, "jti": JTI}
    header = {"alg": header_alg, "typ": "parafe-pop+jwt"}
    signing_input = f"{segment(header)}.{segment(json_dumps(claims))}"
    identity_point = bytes.fromhex(_SMALL_ORDER[1])
    return signing_input + "." + b64url_encode(identity_point + bytes(32))


def _sha256_b64url(text: str) -> str:
    import hashlib

    return b64url_encode(hashlib.sha256(text.encode()).digest())


@pytest.mark.parametrize("x", SMALL_ORDER_KEYS, ids=lambda x: x.hex()[:8] + x.hex()[-2:])
def test_an_ed25519_key_of_small_order_is_refused(x: bytes) -> None:
    jwk = _okp(x)
    with pytest.raises(MalformedInput):
        import_public_jwk(jwk)
    assert parse_jwks({"keys": [jwk]}).keys == ()


def test_a_proof_forged_for_a_small_order_initiator_key_is_refused() -> None:
    # The identity point as the initiator's registered key: with R = identity and S = 0 the
    # proof "verifies" for any claims, so anyone could present the initiator's tokens.
    jwk = _okp(bytes.fromhex(_SMALL_ORDER[1]))
    with pytest.raises(ParafeError) as refused:
        verify_presentation_proof(
            _forged_proof(),
            TOKEN,
            _consent_for(jwk),
            replay=None,
            initiator_key=jwk,
            now=NOW,
        )
    assert refused.value.code == INVALID_PROOF
    assert "unusable" in str(refused.value)


def _ed25519_proof(key: PrivateJWK) -> str:
    return create_presentation_proof(TOKEN_JWS, key, now=NOW, jti=JTI)


#: `create_presentation_proof` refuses a token without `aud`; a real-looking unsigned one.
TOKEN_JWS = f"{segment({'alg': 'ES256'})}.{segment({'aud': TARGET})}.{b64url_encode(b'sig')}"


def test_a_proof_with_a_non_canonical_ed25519_s_is_refused() -> None:
    key = generate_private_jwk("EdDSA")
    proof = _ed25519_proof(key)
    jwk = key.public.to_dict()
    consent = {"cnf": {"jkt": key.public.thumbprint}, "sub": "prf_agent_initiator", "aud": TARGET}
    # The control: the genuine proof passes.
    verify_presentation_proof(proof, TOKEN_JWS, consent, replay=None, initiator_key=jwk, now=NOW)
    signature = b64url_decode(proof.rsplit(".", 1)[1])
    s = int.from_bytes(signature[32:], "little") + L  # the same S, plus the group order
    malleated = with_signature(proof, signature[:32] + s.to_bytes(32, "little"))
    with pytest.raises(ParafeError) as refused:
        verify_presentation_proof(
            malleated, TOKEN_JWS, consent, replay=None, initiator_key=jwk, now=NOW
        )
    assert refused.value.code == INVALID_PROOF


def test_an_action_receipt_forged_for_a_small_order_agent_key_is_refused() -> None:
    # An agent whose DID document lists the identity point: R = identity, S = 0 would make
    # any receipt "signed" by it, so anyone could file or show receipts in its name.
    agent_id = "prf_agent_small001"
    did = agent_did(agent_id)
    jwk = _okp(bytes.fromhex(_SMALL_ORDER[1]))
    document = {"id": did, "verificationMethod": [{"id": f"{did}#keys-1", "publicKeyJwk": jwk}]}
    header = {"alg": "EdDSA", "kid": f"{did}#keys-1", "typ": "parafe-action-receipt+jwt"}
    claims = {
        "iss": did,
        "iat": NOW,
        "jti": "5b0e6a1c-0000-4000-8000-000000000001",
        "ver": 1,
        "session_id": "sess_" + "ab" * 16,
        "consent_ref": _sha256_b64url(TOKEN),
        "action": "issue_refund",
        "result": "success",
        "error": None,
    }
    signing_input = f"{segment(header)}.{segment(json_dumps(claims))}"
    forged = signing_input + "." + b64url_encode(bytes.fromhex(_SMALL_ORDER[1]) + bytes(32))
    keys = StaticBrokerKeys({"keys": []}, did_documents={agent_id: document})
    with pytest.raises(ParafeError) as refused:
        ReceiptVerifier(keys, clock=lambda: NOW).verify_action_receipt(forged)
    assert refused.value.code == "INVALID_SIGNATURE"
