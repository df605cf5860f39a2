"""Verified delegation tokens are cached: a hit skips only the signature check."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.protocols.delegation import DelegationRejected, SigningKeys, mint_access_token
from pactmw.protocols.identity import (
    AgentRegistry,
    IdentityVerifier,
    PersonalAgent,
    RegisteredAgent,
)
from pactmw.provider import Brand, DelegationConfig, Provider
from pactmw.store import open_store
from tests.support.clock import FakeClock
from tests.support.parties import ISSUER

BASE = "https://provider.example"
NOW = 1_800_000_000.0


@pytest.fixture
def world() -> Any:
    clock = FakeClock(NOW)
    agent_key = generate_private_jwk("ES256", kid="pa")
    verifier = IdentityVerifier(
        audience="aud",
        registry=AgentRegistry([RegisteredAgent(issuer=ISSUER, jwks=public_key_set([agent_key]))]),
        clock=clock,
    )
    provider = Provider(
        base_url=BASE,
        verifier=verifier,
        store=open_store("memory://"),
        brands=[
            Brand(
                id="acme",
                name="Acme",
                handler=lambda turn: "hi",
                delegation=DelegationConfig(scopes={"orders:read": "See orders"}, login_url="/l"),
            )
        ],
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        clock=clock,
    )
    grant = provider.store.upsert_grant(
        grant_id="g1",
        brand_id="acme",
        account="acct",
        client_id=ISSUER,
        pa_sub="u1",
        scopes=("orders:read",),
        now=NOW,
        expires_at=NOW + 86400,
    )
    assert provider.oauth is not None
    token = mint_access_token(
        key=provider.oauth.keys.signer,
        interface_url=f"{BASE}/a2a/acme",
        account="acct",
        client_id=ISSUER,
        scopes=grant.scopes,
        grant_id=grant.grant_id,
        now=NOW,
        lifetime=600,
    )
    caller = PersonalAgent(issuer=ISSUER, sub="u1", name="PA", claims={}, audience="aud")
    return provider, clock, caller, "Bearer " + token


def test_a_reused_token_is_verified_once(world: Any, signature_checks: list[int]) -> None:
    provider, _, caller, token = world
    for _ in range(3):
        assert provider.verify_delegation("acme", caller, token).delegation.account == "acct"
    assert len(signature_checks) == 1


def test_revocation_applies_to_a_cached_token(world: Any) -> None:
    provider, _, caller, token = world
    provider.verify_delegation("acme", caller, token)
    provider.revoke_grant("g1")
    with pytest.raises(DelegationRejected):
        provider.verify_delegation("acme", caller, token)


def test_a_cached_token_still_expires(world: Any) -> None:
    provider, clock, caller, token = world
    provider.verify_delegation("acme", caller, token)
    clock.now = NOW + 600
    with pytest.raises(DelegationRejected):
        provider.verify_delegation("acme", caller, token)


def test_a_cached_token_is_bound_to_its_agent_and_user(world: Any) -> None:
    provider, _, caller, token = world
    provider.verify_delegation("acme", caller, token)
    for other in (
        attrs.evolve(caller, issuer="https://other.example"),
        attrs.evolve(caller, sub="u2"),
    ):
        with pytest.raises(DelegationRejected):
            provider.verify_delegation("acme", other, token)
