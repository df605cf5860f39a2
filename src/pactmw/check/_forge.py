"""Tokens no well-behaved personal agent sends: tampered, HS256-keyed with the public key,
unsigned."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization

from pactmw.core.encoding import b64url_encode, json_dumps
from pactmw.core.jwk import PrivateJWK


def tampered(token: str) -> str:
    """The token with the start of its signature replaced (still valid base64url)."""
    head, _, signature = token.rpartition(".")
    replacement = "AAAA" if not signature.startswith("AAAA") else "BBBB"
    return f"{head}.{replacement}{signature[4:]}"


def hs256(claims: Mapping[str, Any], secret: bytes, kid: str) -> str:
    header = {"alg": "HS256", "typ": "JWT", "kid": kid}
    signing_input = f"{b64url_encode(json_dumps(header))}.{b64url_encode(json_dumps(claims))}"
    signature = hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{b64url_encode(signature)}"


def unsigned(claims: Mapping[str, Any]) -> str:
    header = {"alg": "none", "typ": "JWT"}
    return f"{b64url_encode(json_dumps(header))}.{b64url_encode(json_dumps(claims))}."


def public_secrets(key: PrivateJWK) -> list[bytes]:
    """What an HS256 forger uses as the HMAC secret: the public key as PEM, and as a JWK."""
    pem = key.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return [pem, json.dumps(key.public.to_dict(), separators=(",", ":")).encode()]


def now() -> int:
    return int(time.time())


__all__ = [
    "hs256",
    "now",
    "public_secrets",
    "tampered",
    "unsigned",
]
