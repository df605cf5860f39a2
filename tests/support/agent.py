"""What a personal agent sends in the tests: PACT identity JWTs and A2A user messages."""

from __future__ import annotations

import time
import uuid
from typing import Any

from pactmw.client import AgentSigner
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, parse_jwks
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent

__all__ = ["identity_claims", "identity_token", "trusting", "user_message"]


def identity_claims(
    issuer: str,
    audience: str,
    *,
    sub: str = "user-1",
    now: float | None = None,
    lifetime: int = 120,
    fresh_jti: bool = False,
) -> dict[str, Any]:
    """The claims of a PACT identity JWT issued now (whole seconds), valid `lifetime` s.

    `fresh_jti=True` adds a fresh `jti`, so a Provider's verified-token cache never hits.
    """
    iat = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "iss": issuer,
        "sub": sub,
        "aud": audience,
        "iat": iat,
        "exp": iat + lifetime,
    }
    if fresh_jti:
        claims["jti"] = uuid.uuid4().hex
    return claims


def identity_token(
    key: PrivateJWK,
    issuer: str,
    audience: str,
    *,
    sub: str = "user-1",
    now: float | None = None,
    fresh_jti: bool = False,
    **overrides: Any,
) -> str:
    """A compact PACT identity JWT (`typ: JWT`) signed by `key`; `overrides` replace claims."""
    claims = identity_claims(issuer, audience, sub=sub, now=now, fresh_jti=fresh_jti)
    claims.update(overrides)
    return sign_compact(claims, key, typ="JWT")


def user_message(
    text: str, *, message_id: str | None = None, context_id: str | None = None
) -> dict[str, Any]:
    """An A2A user message (a fresh `messageId` unless given), in `contextId` when given."""
    message: dict[str, Any] = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    return message


def trusting(signer: AgentSigner, audience: str) -> IdentityVerifier:
    """A verifier for `audience` that knows exactly `signer`'s agent, its keys inline."""
    agent = RegisteredAgent(issuer=signer.issuer, name="PA", jwks=parse_jwks(signer.public_jwks()))
    return IdentityVerifier(audience=audience, registry=AgentRegistry([agent]))
