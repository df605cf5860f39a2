"""Personal-agent keys and tokens for the adapter tests, made without pactmw's own signer.

Valid tokens come from PyJWT and the public JWKs from PyJWT's key serialisers, so a bug shared
by pactmw's signer and verifier cannot hide here. The attack tokens (HS256 keyed with a public
key's PEM, `alg: none`) are assembled by hand, as an attacker would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import time
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from tests.support.keys import generate_key
from tests.support.parties import AUDIENCE

_MISSING = object()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class AgentKey:
    """One signing key of a personal agent: `alg`, `kid`, the private key."""

    alg: str
    kid: str
    private: Any

    @classmethod
    def generate(cls, alg: str, kid: str) -> AgentKey:
        if alg not in ("ES256", "RS256", "EdDSA"):
            raise ValueError(alg)
        return cls(alg=alg, kid=kid, private=generate_key(alg))

    def public_jwk(self) -> dict[str, Any]:
        """The public JWK as an agent publishes it (`kid`, `alg`, `use`)."""
        public = self.private.public_key()
        serialisers: dict[str, Any] = {
            "ES256": ECAlgorithm,
            "RS256": RSAAlgorithm,
            "EdDSA": OKPAlgorithm,
        }
        serialiser = serialisers[self.alg]
        jwk: dict[str, Any] = serialiser.to_jwk(public, as_dict=True)
        jwk.update(kid=self.kid, alg=self.alg, use="sig")
        return jwk

    def public_pem(self) -> bytes:
        pem: bytes = self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return pem

    def sign(self, claims: dict[str, Any], *, kid: str | None = None) -> str:
        """A compact JWS of `claims` (header `alg`, `typ: JWT`, `kid`, by default this key's)."""
        return jwt.encode(
            claims, self.private, algorithm=self.alg, headers={"kid": kid or self.kid}
        )


def jwks(*keys: AgentKey) -> dict[str, Any]:
    return {"keys": [key.public_jwk() for key in keys]}


def claims(issuer: str, *, now: float | None = None, **overrides: Any) -> dict[str, Any]:
    """Valid claims for `issuer` (a 120 s token issued now); `name=_MISSING` drops a claim.

    Times are whole seconds, as agents send them: `iat` is the current second rounded down,
    so the token is never "from the future" by a fraction at the server.
    """
    base = math.floor(time.time() if now is None else now)
    result: dict[str, Any] = {
        "iss": issuer,
        "sub": "user-42",
        "aud": AUDIENCE,
        "iat": base,
        "exp": base + 120,
        "jti": f"jti-{time.monotonic_ns()}",
    }
    for name, value in overrides.items():
        if value is _MISSING:
            result.pop(name, None)
        else:
            result[name] = value
    return result


def missing() -> Any:
    """The marker that makes `claims` drop a claim."""
    return _MISSING


def _segments(header: dict[str, Any], payload: dict[str, Any]) -> str:
    return (
        b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + b64url(json.dumps(payload, separators=(",", ":")).encode())
    )


def forge_hs256(payload: dict[str, Any], secret: bytes, kid: str) -> str:
    """The alg-confusion attack: HS256 keyed with bytes the verifier may hold (a public PEM)."""
    signing_input = _segments({"alg": "HS256", "typ": "JWT", "kid": kid}, payload)
    mac = hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(mac)}"


def forge_unsigned(payload: dict[str, Any], alg: str = "none", kid: str | None = None) -> str:
    """An unsecured JWS (`alg: none` and spellings of it), with an empty signature."""
    header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    return _segments(header, payload) + "."
