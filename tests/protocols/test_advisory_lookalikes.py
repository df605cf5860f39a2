"""Regressions: look-alike issuers and hostile `kid` values never reach a key or a fetch."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pactmw.core.errors import AuthenticationFailed
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk
from pactmw.core.keys import JwksCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from tests.support.jwks_server import JwksServer
from tests.support.parties import ISSUER


@pytest.fixture
def setup() -> Any:
    key = generate_private_jwk("ES256", kid="k1")
    with JwksServer({"keys": [key.public.to_dict()]}) as server:
        registry = AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks_uri=server.url)])
        keys = JwksCache(FetchPolicy(allow_http_on_loopback=True, timeout=2))
        yield key, server, IdentityVerifier(audience="aud", registry=registry, keys=keys)


def token(key: Any, issuer: str, **header: Any) -> str:
    now = int(time.time())
    claims = {"iss": issuer, "sub": "u", "aud": "aud", "iat": now, "exp": now + 60}
    return "Bearer " + sign_compact(claims, key, typ="JWT", extra_header=header or None)


@pytest.mark.parametrize(
    "lookalike",
    [
        "https://pа.example",  # Cyrillic а
        "https://pa.exampIe",  # capital I for l
        "https://pa.example/",
        "HTTPS://pa.example",
        "https://pa.example\u200b",  # zero-width space
        "https://ｐa.example",  # fullwidth p
    ],
)
def test_lookalike_issuers_are_unknown_and_fetch_nothing(setup: Any, lookalike: str) -> None:
    key, server, verifier = setup
    with pytest.raises(AuthenticationFailed) as refused:
        verifier.verify(token(key, lookalike))
    assert refused.value.reason == "unknown_issuer"
    assert server.total_hits == 0


@pytest.mark.parametrize(
    "kid",
    ["../../etc/passwd", "k1' OR '1'='1", "k1\x00", "%2e%2e/jwks", "k" * 5000, "https://evil/jwks"],
)
def test_hostile_kids_are_just_unknown(setup: Any, kid: str) -> None:
    key, server, verifier = setup
    with pytest.raises(AuthenticationFailed) as refused:
        verifier.verify(token(key, ISSUER, kid=kid))
    assert refused.value.reason in {"unknown_kid", "malformed_token"}
    # Only the configured URI is ever fetched, whatever the kid says.
    assert set(server.hits) <= {"/.well-known/jwks.json"}
