"""Which credential a refusal's log line is about (found in a deployment trial).

A delegation token signed by a key the Provider no longer has (its signing keys rotated, the
old key removed) was logged as `personal agent refused: reason=bad_signature`, which reads as
if the agent's own PACT JWT were bad. The line now names the credential, and for a key the
Provider does not have, says so; the 401 the caller gets is the one PACT specifies, as before.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from pactmw.core.errors import AuthenticationFailed
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.protocols.delegation import DelegationRejected, SigningKeys
from pactmw.provider import Provider, ProviderSettings
from pactmw.store import open_store
from tests.support.agent import identity_token
from tests.support.parties import ISSUER

BASE = "https://shop.example"
AUDIENCE = f"{BASE}/a2a"
AGENT_KEY = generate_private_jwk("ES256", kid="pa-1")
DELEGATION = {"scopes": {"orders:read": "See your orders"}, "login_url": "/login"}


def _provider(store: str, key: PrivateJWK) -> Provider:
    data: dict[str, Any] = {
        "base_url": BASE,
        "audience": AUDIENCE,
        "agents": [{"issuer": ISSUER, "jwks": {"keys": [AGENT_KEY.public.to_dict()]}}],
        "brands": {"shop": {"handler": "examples.bots:order_bot", "delegation": DELEGATION}},
    }
    return Provider.from_settings(
        ProviderSettings.from_mapping(data),
        store=open_store(store),
        signing_keys=SigningKeys((key,)),
    )


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pactmw.identity"]


def test_a_delegation_signed_by_a_removed_key_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = f"sqlite:///{tmp_path / 'pactmw.db'}"
    before = _provider(store, generate_private_jwk("ES256", kid="key-2025"))
    granted = before.grant_delegation(
        "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:read"]
    )
    before.close()
    after = _provider(store, generate_private_jwk("ES256", kid="key-2026"))  # rotated
    try:
        token = identity_token(AGENT_KEY, ISSUER, AUDIENCE, sub="user-1")
        caller = after.verifier.verify(f"Bearer {token}", brand="shop")
        caplog.set_level(logging.INFO, logger="pactmw.identity")
        with pytest.raises(DelegationRejected) as refused:
            after.verify_delegation("shop", caller, granted.header)
        # The answer is PACT's as before: reason bad_signature, 401 invalid_token.
        assert refused.value.reason == "bad_signature"
        assert refused.value.www_authenticate == 'Bearer realm="a2a", error="invalid_token"'
        # A key the Provider has, and a signature that does not verify: no more to say.
        current = after.grant_delegation(
            "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:read"]
        )
        with pytest.raises(DelegationRejected):
            after.verify_delegation("shop", caller, current.header[:-4] + "AAAA")
        with pytest.raises(AuthenticationFailed) as bad_identity:
            after.verifier.verify(f"Bearer {token[:-4]}AAAA", brand="shop")
    finally:
        after.close()
    assert bad_identity.value.reason == "bad_signature"
    gone = (
        "the key that signed it (kid=key-2025) is not, or no longer, among the signing keys "
        "of this Provider"
    )
    assert _refusals(caplog) == [
        f"personal agent refused: reason=bad_signature issuer={ISSUER} brand=shop "
        f"credential=delegation_token detail={gone!r}",
        f"personal agent refused: reason=bad_signature issuer={ISSUER} brand=shop "
        "credential=delegation_token",
        f"personal agent refused: reason=bad_signature issuer={ISSUER} brand=shop "
        "credential=identity_jwt",
    ]
    assert granted.access_token not in caplog.text
