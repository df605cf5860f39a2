"""`Provider.grant_delegation`: what an app's own tests use to get a delegation token without
a person approving in a browser. Found in a new user's Flask trial: a view behind
`@delegation_required` had no public way to be tested.

The grant must be the one the consent page records (the same store record, audit line,
binding to the agent's user), the token the one the token endpoint issues, and revocation
must refuse it afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import DelegationRejected, SigningKeys
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider import AuditEvent, Provider, ProviderSettings
from pactmw.provider.delegated import DelegationGrant
from pactmw.store import open_store
from tests.delegated.support import jws_claims, jws_header
from tests.support.agent import identity_token, user_message
from tests.support.net import loopback_client
from tests.support.page_sites import ADAPTERS, BRAND, page_site
from tests.support.parties import ISSUER

BASE = "https://shop.example"
AUDIENCE = f"{BASE}/a2a"
AGENT_KEY = generate_private_jwk("ES256", kid="pa-1")
SCOPES = {"orders:read": "See your orders", "orders:cancel": "Cancel an order"}
DELEGATION = {"scopes": SCOPES, "login_url": "/login"}


def _provider(store_url: str, events: list[AuditEvent]) -> Provider:
    data: dict[str, Any] = {
        "base_url": BASE,
        "audience": AUDIENCE,
        "agents": [{"issuer": ISSUER, "jwks": {"keys": [AGENT_KEY.public.to_dict()]}}],
        "brands": {
            "shop": {"handler": "examples.bots:order_bot", "delegation": DELEGATION},
            "plain": {"handler": "examples.bots:order_bot"},
        },
    }
    return Provider.from_settings(
        ProviderSettings.from_mapping(data),
        store=open_store(store_url),
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        audit=events.append,
    )


#: What each test's Provider audited (its hook appends here).
AUDITED: list[AuditEvent] = []


@pytest.fixture(params=["memory", "sqlite"])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Provider]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'pactmw.db'}"
    AUDITED.clear()
    made = _provider(url, AUDITED)
    yield made
    made.close()


def _agent(provider: Provider, sub: str = "user-1") -> PersonalAgent:
    """The agent's user as the Provider verifies its PACT JWT on a request."""
    token = identity_token(AGENT_KEY, ISSUER, AUDIENCE, sub=sub)
    return provider.verifier.verify(f"Bearer {token}", brand="shop")


def test_the_grant_is_recorded_and_its_token_verifies(provider: Provider) -> None:
    granted = provider.grant_delegation(
        "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:read"]
    )
    assert isinstance(granted, DelegationGrant)
    assert granted.scopes == ("orders:read",)
    assert granted.header == f"Bearer {granted.access_token}"
    # The grant the consent page records: in the store, live, bound to the agent's user.
    grant = provider.store.get_grant(granted.grant_id)
    assert grant is not None
    assert grant.is_live(grant.created_at + 1)
    assert (grant.brand_id, grant.account, grant.client_id, grant.pa_sub, grant.scopes) == (
        "shop",
        "jane",
        ISSUER,
        "user-1",
        ("orders:read",),
    )
    # The token the token endpoint issues: an at+jwt with its claims.
    assert jws_header(granted.access_token)["typ"] == "at+jwt"
    claims = jws_claims(granted.access_token)
    assert {key: claims[key] for key in ("iss", "aud", "sub", "client_id", "scope")} == {
        "iss": f"{BASE}/a2a/shop/oauth",
        "aud": f"{BASE}/a2a/shop",
        "sub": "jane",
        "client_id": ISSUER,
        "scope": "orders:read",
    }
    assert claims["grant_id"] == granted.grant_id
    assert granted.refresh_token.startswith("rt_")
    # Verified as any delegation on a request, for the agent's user it was granted to.
    delegation = provider.verify_delegation("shop", _agent(provider), granted.header).delegation
    assert delegation is not None
    assert (delegation.account, delegation.scopes, delegation.grant_id) == (
        "jane",
        frozenset({"orders:read"}),
        granted.grant_id,
    )
    # The audit line of an approval, as the consent page publishes it.
    assert [(e.name, e.grant_id, e.account, e.scopes) for e in AUDITED] == [
        ("agent.delegation_approved", granted.grant_id, "jane", ("orders:read",))
    ]


def test_another_user_of_the_agent_is_refused(provider: Provider) -> None:
    granted = provider.grant_delegation(
        "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:read"]
    )
    with pytest.raises(DelegationRejected):
        provider.verify_delegation("shop", _agent(provider, sub="user-2"), granted.header)


def test_revocation_refuses_the_token_afterwards(provider: Provider) -> None:
    granted = provider.grant_delegation(
        "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:read"]
    )
    assert provider.revoke_grant(granted.grant_id) is True
    with pytest.raises(DelegationRejected):
        provider.verify_delegation("shop", _agent(provider), granted.header)


def test_a_second_approval_widens_the_grant_as_the_consent_page_does(provider: Provider) -> None:
    first = provider.grant_delegation(
        "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:read"]
    )
    second = provider.grant_delegation(
        "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:cancel"]
    )
    assert second.grant_id == first.grant_id
    assert second.scopes == ("orders:cancel", "orders:read")
    delegation = provider.verify_delegation("shop", _agent(provider), second.header).delegation
    assert delegation is not None
    assert delegation.scopes == {"orders:read", "orders:cancel"}


@pytest.mark.parametrize(
    ("brand_id", "arguments", "named"),
    [
        ("nope", {}, "brand_id: no Brand 'nope'"),
        ("plain", {}, "brand_id: Brand 'plain' offers no delegation"),
        ("shop", {"scopes": ["orders:write"]}, "scopes: 'orders:write' is not offered"),
        ("shop", {"scopes": []}, "scopes: name at least one"),
        ("shop", {"scopes": "orders:read"}, "scopes: a list of scope ids"),
        ("shop", {"account": ""}, "account: "),
        ("shop", {"agent_issuer": ""}, "agent_issuer: "),
        ("shop", {"agent_sub": ""}, "agent_sub: "),
        ("shop", {"account": "ja\x00ne"}, "account: "),
        # A typo'd issuer would get a token no request of that agent can ever present.
        ("shop", {"agent_issuer": "https://typo.example"}, "agent_issuer: no agent"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(
    provider: Provider, brand_id: str, arguments: dict[str, Any], named: str
) -> None:
    given: dict[str, Any] = {
        "account": "jane",
        "agent_issuer": ISSUER,
        "agent_sub": "user-1",
        "scopes": ["orders:read"],
        **arguments,
    }
    with pytest.raises(ValueError, match="^" + named.replace("(", r"\(")):
        provider.grant_delegation(brand_id, **given)
    # Nothing was recorded or audited.
    assert provider.store.list_grants(now=0.0) == []
    assert AUDITED == []


def test_an_agent_added_at_runtime_is_granted_and_a_disabled_one_refused(
    provider: Provider,
) -> None:
    # The verifier's registry decides, as on a request: configured agents and those added
    # to the store while the Provider runs are known; a disabled one cannot reach the
    # device endpoint, so it gets no grant here either.
    added = "https://added-pa.example"
    provider.store.add_agent(
        issuer=added, name="Added", jwks_uri=f"{added}/jwks.json", now=1_700_000_000.0
    )
    granted = provider.grant_delegation(
        "shop", account="jane", agent_issuer=added, agent_sub="user-1", scopes=["orders:read"]
    )
    grant = provider.store.get_grant(granted.grant_id)
    assert grant is not None
    assert grant.client_id == added
    provider.verifier.registry.disable(ISSUER)
    with pytest.raises(ValueError, match=f"^agent_issuer: the agent {ISSUER!r} is disabled"):
        provider.grant_delegation(
            "shop", account="jane", agent_issuer=ISSUER, agent_sub="user-1", scopes=["orders:read"]
        )
    assert [grant.client_id for grant in provider.store.list_grants(now=0.0)] == [added]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.timeout(120)
def test_every_adapter_serves_the_token_until_the_grant_is_revoked(
    adapter: str, tmp_path: Path
) -> None:
    # The site's server runs its own Provider; the test's, on the same store and keys, is
    # what an app's test process holds (Django's server is another process).
    templates = tmp_path / "templates"
    templates.mkdir()
    agents = [{"issuer": ISSUER, "jwks": {"keys": [AGENT_KEY.public.to_dict()]}}]
    with page_site(adapter, tmp_path, templates, agents=agents) as (base, settings):
        provider = Provider.from_settings(ProviderSettings.from_mapping(settings))
        http = loopback_client(timeout=20)
        try:
            granted = provider.grant_delegation(
                BRAND, account="jane", agent_issuer=ISSUER, agent_sub="u1", scopes=["orders:read"]
            )

            def send(sub: str) -> httpx.Response:
                headers = {
                    "authorization": "Bearer "
                    + identity_token(AGENT_KEY, ISSUER, settings["audience"], sub=sub),
                    "x-a2a-user-delegation": granted.header,
                }
                message = {"message": user_message("where is my order?")}
                return http.post(f"{base}/a2a/{BRAND}/message:send", json=message, headers=headers)

            assert send("u1").status_code == 200
            assert send("u2").status_code == 401  # another user of the agent
            assert provider.revoke_grant(granted.grant_id) is True
            refused = send("u1")
            assert refused.status_code == 401
            assert 'error="invalid_token"' in refused.headers["www-authenticate"]
        finally:
            http.close()
            provider.close()
