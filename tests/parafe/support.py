"""Shared helpers for the Parafé tests: the public broker fixtures, their "now"s, and minting
tokens, proofs and receipts with throwaway keys (to reach checks past the signature)."""

from __future__ import annotations

import base64
import copy
import json
import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from pactmw.core.encoding import b64url_encode, json_dumps
from pactmw.core.jwk import PrivateJWK, PublicJWK, generate_private_jwk
from pactmw.protocols.parafe import EXTENSION_URI, agent_did
from pactmw.protocols.parafe._jwt import sha256_b64url, unverified_claims

#: CI keeps a copy of shared/ beside the clone; the tests read the fixtures from there.
FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "parafe"

V2 = "broker-v2-artifacts.json"
PHASE2 = "broker-phase2-artifacts.json"
OPERATOR = "broker-operator-principal-artifacts.json"

#: The target agent of each fixture file.
V2_AGENT = "prf_agent_57ae4cd0"
V2_INITIATOR = "prf_agent_51cd5551"
SHOP = "prf_agent_4fb30521"
CUSTOMER = "prf_agent_de3bc58a"
OPERATOR_TARGET = "prf_agent_d128850a"


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@cache
def _load(name: str) -> str:
    path = FIXTURES / name
    if not path.is_file():
        pytest.fail(
            f"Parafé broker fixture {path} is missing: the tests read shared/fixtures/parafe/ "
            "beside the repository (CI keeps a copy of shared/ there).",
            pytrace=False,
        )
    return path.read_text(encoding="utf-8")


def fixture(name: str) -> dict[str, Any]:
    """A fresh copy of one fixture file."""
    return copy.deepcopy(json.loads(_load(name)))


def fixture_now(name: str) -> float:
    """The moment each file must be verified at (its README): `issued_at`, or for the
    operator/principal file the timestamp in its `note`."""
    data = fixture(name)
    if "issued_at" in data:
        return _epoch(data["issued_at"])
    found = re.search(r"\d{4}-\d{2}-\d{2}T[\d:.]+Z", data["note"])
    assert found is not None
    return _epoch(found.group(0))


def decode(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and payload of a JWS, unverified (test convenience)."""

    def part(segment: str) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(
            base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        )
        return value

    header, payload, _ = token.split(".")
    return part(header), part(payload)


def without_kid(key: PrivateJWK) -> PrivateJWK:
    return evolve(key, public=evolve(key.public, kid=None))


def sign(payload: Mapping[str, Any] | bytes, key: PrivateJWK, header: Mapping[str, Any]) -> str:
    """Sign with exactly `header` (which may even lack `alg`) using `key`'s algorithm."""
    # ASCII JSON: `\uXXXX` escapes let a test send lone surrogates and NULs.
    body = payload if isinstance(payload, bytes) else json.dumps(dict(payload)).encode()
    signing_input = f"{b64url_encode(json_dumps(dict(header)))}.{b64url_encode(body)}"
    private = key.key
    if isinstance(private, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(private.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        assert isinstance(private, ed25519.Ed25519PrivateKey)
        signature = private.sign(signing_input.encode())
    return f"{signing_input}.{b64url_encode(signature)}"


def forge_header(token: str, header: Mapping[str, Any]) -> str:
    """Replace a JWS header without re-signing (the signature no longer matches)."""
    _, payload, signature = token.split(".")
    return f"{b64url_encode(json_dumps(dict(header)))}.{payload}.{signature}"


def flip(token: str, index: int) -> str:
    """The token with the character at `index` replaced by another base64url character."""
    char = token[index]
    return token[:index] + ("B" if char == "A" else "A") + token[index + 1 :]


def flippable_positions(token: str) -> list[int]:
    """Every position except the two dots."""
    return [i for i, char in enumerate(token) if char != "."]


def did_document(agent_id: str, key: PublicJWK) -> dict[str, Any]:
    """A DID document shaped like the broker's (§5)."""
    did = agent_did(agent_id)
    ec = key.kty == "EC"
    return {
        "@context": [
            "https://www.w3.org/ns/did/v1",
            "https://w3id.org/security/suites/" + ("jws-2020/v1" if ec else "ed25519-2020/v1"),
        ],
        "id": did,
        "verificationMethod": [
            {
                "id": f"{did}#keys-1",
                "type": "JsonWebKey2020" if ec else "Ed25519VerificationKey2020",
                "controller": did,
                "publicKeyJwk": dict(key.members),
            }
        ],
        "authentication": [f"{did}#keys-1"],
        "assertionMethod": [f"{did}#keys-1"],
    }


def message(
    token: str,
    session_id: str,
    proof: str | None = None,
    message_id: str | None = "msg-1",
    **extra: Any,
) -> dict[str, Any]:
    consent: dict[str, Any] = {"token": token, "session_id": session_id}
    if proof is not None:
        consent["proof"] = proof
    data: dict[str, Any] = {"consent": consent, **extra}
    out: dict[str, Any] = {
        "role": "ROLE_USER",
        "parts": [{"text": "hello"}],
        "extensions": [EXTENSION_URI],
        "metadata": {EXTENSION_URI: data},
    }
    if message_id is not None:
        out["messageId"] = message_id
    return out


class Minter:
    """A throwaway broker and initiator, minting consent tokens and proofs at `now`."""

    def __init__(self, now: float, *, broker_kid: str = "test-broker-kid") -> None:
        self.now = now
        self.broker = generate_private_jwk("ES256", kid=broker_kid)
        self.initiator = generate_private_jwk("EdDSA")
        self.initiator_id = "prf_agent_alex0001"
        self.target_id = "prf_agent_shop0001"
        self.session_id = "sess_" + "ab" * 16

    @property
    def jwks(self) -> dict[str, Any]:
        return {"keys": [{**self.broker.public.to_dict(), "use": "sig", "status": "active"}]}

    def claims(self, **overrides: Any) -> dict[str, Any]:
        issued = int(self.now)
        claims: dict[str, Any] = {
            "ver": 2,
            "scope": "place-order",
            "permissions": ["create_order"],
            "exclusions": ["issue_refund"],
            "excluded": ["issue_refund"],
            "session_id": self.session_id,
            "token_type": "consent",
            "authorization_modality": "attested",
            "initiator_agent_id": self.initiator_id,
            "target_agent_id": self.target_id,
            "parent_token_id": None,
            "cnf": {"jkt": self.initiator.public.thumbprint},
            "initiator_proof": "pop",
            "initiator_proof_at": issued,
            "iat": issued,
            "exp": issued + 300,
            "iss": "parafe-trust-broker",
            "jti": "1637057b-e2a9-48d6-a37f-6024a5e52fdf",
            "sub": self.initiator_id,
            "aud": agent_did(self.target_id),
        }
        for name, value in overrides.items():
            if value is DELETE:
                claims.pop(name, None)
            else:
                claims[name] = value
        return claims

    def token(
        self,
        *,
        key: PrivateJWK | None = None,
        header: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> str:
        key = key or self.broker
        head = dict(header) if header is not None else {"alg": "ES256", "kid": self.broker.kid}
        return sign(self.claims(**overrides), key, head)

    def proof(
        self,
        token: str,
        *,
        key: PrivateJWK | None = None,
        header: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> str:
        key = key or self.initiator
        aud = unverified_claims(token).get("aud")
        claims: dict[str, Any] = {
            "iat": int(self.now),
            "jti": str(uuid.uuid4()),
            "ath": sha256_b64url(token),
            "aud": aud,
            "mid": "msg-1",
        }
        if aud is None:
            del claims["aud"]
        for name, value in overrides.items():
            if value is DELETE:
                claims.pop(name, None)
            else:
                claims[name] = value
        head = dict(header) if header is not None else {"alg": key.alg, "typ": "parafe-pop+jwt"}
        return sign(claims, key, head)

    def did_documents(self) -> dict[str, Any]:
        return {self.initiator_id: did_document(self.initiator_id, self.initiator.public)}


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


#: Pass as a claim override to remove the claim.
DELETE: Any = _Delete()


# -- the proofs' clock and §13's single-claim tampering of a proof (proof and presentation tests)

#: "Now" for the proof tests, in seconds (and whole seconds, as the claims carry it).
NOW = 1_790_741_039.783
SECONDS = int(NOW)

PROOF_TAMPERING: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool]] = [
    # (label, claim overrides, header (None: the right one), accepted?)
    ("ath of another token", {"ath": sha256_b64url("another.token.here")}, None, False),
    ("ath missing", {"ath": DELETE}, None, False),
    ("aud of another agent", {"aud": "did:web:api.parafe.ai:agents:prf_agent_x"}, None, False),
    ("aud missing", {"aud": DELETE}, None, False),
    ("aud as an array", {"aud": ["did:web:api.parafe.ai:agents:prf_agent_shop0001"]}, None, False),
    ("mid of another message", {"mid": "msg-9"}, None, False),
    ("mid null", {"mid": None}, None, False),
    ("mid missing", {"mid": DELETE}, None, True),
    ("iat 600 s ago", {"iat": SECONDS - 600}, None, False),
    ("iat 361 s ago", {"iat": SECONDS - 361}, None, False),
    ("iat 360 s ago", {"iat": SECONDS - 360}, None, True),
    ("iat 350 s ago", {"iat": SECONDS - 350}, None, True),
    ("iat 50 s ahead", {"iat": SECONDS + 50}, None, True),
    ("iat 60 s ahead", {"iat": SECONDS + 60}, None, True),
    ("iat 61 s ahead", {"iat": SECONDS + 61}, None, False),
    ("iat missing", {"iat": DELETE}, None, False),
    ("iat a string", {"iat": str(SECONDS)}, None, False),
    ("exp 61 s ago", {"exp": SECONDS - 61}, None, False),
    ("exp 59 s ago", {"exp": SECONDS - 59}, None, True),
    ("nbf 61 s ahead", {"nbf": SECONDS + 61}, None, False),
    ("jti missing", {"jti": DELETE}, None, False),
    ("jti 15 chars", {"jti": "a" * 15}, None, False),
    ("jti 16 chars", {"jti": "a" * 16}, None, True),
    ("jti 8 astral chars", {"jti": "\U0001f600" * 8}, None, True),  # 16 UTF-16 units
    ("jti a number", {"jti": 1234567890123456789}, None, False),
    ("typ JWT", {}, {"alg": "EdDSA", "typ": "JWT"}, False),
    ("no typ", {}, {"alg": "EdDSA"}, False),
    ("typ upper case", {}, {"alg": "EdDSA", "typ": "PARAFE-POP+JWT"}, True),
    ("typ application/", {}, {"alg": "EdDSA", "typ": "application/parafe-pop+jwt"}, True),
    ("alg ES256 with an Ed25519 key", {}, {"alg": "ES256", "typ": "parafe-pop+jwt"}, False),
    ("alg none", {}, {"alg": "none", "typ": "parafe-pop+jwt"}, False),
    ("crit", {}, {"alg": "EdDSA", "typ": "parafe-pop+jwt", "crit": ["x"], "x": 1}, False),
    ("a kid is ignored", {}, {"alg": "EdDSA", "typ": "parafe-pop+jwt", "kid": "k"}, True),
    ("extra claims are ignored", {"htm": "POST", "nonce": "n"}, None, True),
]
