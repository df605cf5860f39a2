"""Issue 15 point 1: the connected agents page, on every adapter family (a real server each),
in brand-login mode (the Brand's assertion signs the person in; same-app mode is exercised in
headless Chromium by tests/browser/test_connected_agents_page.py).

The person sees each agent that can act for them at this Brand (name, origin, what it can do,
since, last used, expiry), revokes one with a CSRF-protected form, and the agent's very next
request fails. The page is never framed.
"""

from __future__ import annotations

import re
import time
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import mint_login_assertion
from pactmw.provider import Provider, ProviderSettings
from pactmw.provider.delegated import DelegationGrant
from tests.delegated.support import page_text
from tests.support.agent import identity_token, user_message
from tests.support.net import loopback_client
from tests.support.page_sites import ADAPTERS, BRAND, page_site
from tests.support.parties import AGENT_NAME, ISSUER

AUDIENCE = "urn:test:pages"
BRAND_ISSUER = "https://brand.example"
LOGIN_URL = "https://brand.example/login"
BRAND_KEY = generate_private_jwk("ES256", kid="brand-1")
AGENT_KEY = generate_private_jwk("ES256", kid="pa-1")
SCOPES = {"orders:read": "See your orders", "orders:cancel": "Cancel an order"}
DELEGATION = {
    "scopes": SCOPES,
    "login": "brand",
    "login_url": LOGIN_URL,
    "brand_issuer": BRAND_ISSUER,
    "brand_jwks": {"keys": [BRAND_KEY.public.to_dict()]},
}
AGENTS = [{"issuer": ISSUER, "name": AGENT_NAME, "jwks": {"keys": [AGENT_KEY.public.to_dict()]}}]


def hidden(html: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)">', html)
    assert found is not None, name
    return unescape(found.group(1))


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.timeout(120)
def test_a_person_sees_and_revokes_their_connected_agents(adapter: str, tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    with page_site(adapter, tmp_path, templates, delegation=DELEGATION, agents=AGENTS) as (
        base,
        settings,
    ):
        page_url = f"{base}/a2a/{BRAND}/oauth/agents"
        # The site's Provider as the app's own test process builds it (same store and keys).
        provider = Provider.from_settings(ProviderSettings.from_mapping(settings))
        store = provider.store
        http = loopback_client(timeout=20)
        try:
            subs: dict[str, str] = {}

            def grant(account: str, sub: str, scope: str) -> DelegationGrant:
                made = provider.grant_delegation(
                    BRAND, account=account, agent_issuer=ISSUER, agent_sub=sub, scopes=[scope]
                )
                subs[made.grant_id] = sub
                return made

            mine = grant("acct-jane", "u1", "orders:read")
            other = grant("acct-bob", "u2", "orders:cancel")

            def agent_request(of: DelegationGrant) -> httpx.Response:
                headers = {
                    "authorization": "Bearer "
                    + identity_token(AGENT_KEY, ISSUER, AUDIENCE, sub=subs[of.grant_id]),
                    "x-a2a-user-delegation": of.header,
                }
                message = {"message": user_message("show my orders")}
                return http.post(f"{base}/a2a/{BRAND}/message:send", json=message, headers=headers)

            # The agent works for Jane, which records when it was last used.
            assert agent_request(mine).status_code == 200

            # Opening the page goes to the Brand's login, which comes back to this page.
            opened = http.get(page_url)
            assert opened.status_code == 303
            location = urlsplit(opened.headers["location"])
            assert f"{location.scheme}://{location.netloc}{location.path}" == LOGIN_URL
            assert parse_qs(location.query) == {"return_to": [page_url]}

            assertion = mint_login_assertion(
                key=BRAND_KEY,
                brand_issuer=BRAND_ISSUER,
                consent_url=page_url,
                account="acct-jane",
                user_code="",
                email="jane@example.com",
            )
            page = http.post(page_url, data={"assertion": assertion})
            assert page.status_code == 200, page.text
            assert page.headers["x-frame-options"] == "DENY"
            assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
            assert page.headers["cache-control"] == "no-store"
            text = page_text(page.text)
            assert "Agents connected to Acme Outdoor" in text
            assert "signed in to Acme Outdoor as jane@example.com" in text
            assert "These personal agents can act for you here." in text
            assert AGENT_NAME in text
            assert ISSUER in text
            assert SCOPES["orders:read"] in text
            assert SCOPES["orders:cancel"] not in text  # Bob's grant is not Jane's business
            today = time.strftime("%B %Y", time.gmtime())
            assert re.search(rf"Connected since \d+ {today}", text), text
            assert re.search(rf"Last used \d+ {today}", text), text
            assert "Expires" in text
            session = hidden(page.text, "session")
            assert hidden(page.text, "grant") == mine.grant_id
            # The sign-in is single use.
            assert http.post(page_url, data={"assertion": assertion}).status_code == 400

            revoke = {"session": session, "grant": mine.grant_id, "action": "revoke"}
            # CSRF: another site's form post, a forged page session, someone else's grant.
            cross = http.post(page_url, data=revoke, headers={"origin": "https://evil.example"})
            assert cross.status_code == 403
            forged = http.post(page_url, data={**revoke, "session": session[:-4] + "AAAA"})
            assert forged.status_code == 400
            foreign = http.post(page_url, data={**revoke, "grant": other.grant_id})
            assert foreign.status_code == 404
            assert store.get_grant(mine.grant_id).revoked_at is None  # type: ignore[union-attr]
            assert agent_request(mine).status_code == 200

            done = http.post(page_url, data=revoke, headers={"origin": base})
            assert done.status_code == 200, done.text
            assert done.headers["x-frame-options"] == "DENY"
            after = page_text(done.text)
            assert f"{AGENT_NAME} can no longer act for you." in after
            assert "No personal agent can act for you at Acme Outdoor." in after
            # With none left, the page no longer speaks of "these personal agents".
            assert "These personal agents" not in after
            revoked = store.get_grant(mine.grant_id)
            assert revoked is not None
            assert revoked.revoked_at is not None
            # The agent's next request fails; Bob's agent is untouched.
            refused = agent_request(mine)
            assert refused.status_code == 401
            assert 'error="invalid_token"' in refused.headers["www-authenticate"]
            assert agent_request(other).status_code == 200
        finally:
            http.close()
            provider.close()


def test_the_page_is_not_offered_for_a_brand_without_delegation(tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    with page_site("asgi", tmp_path, templates) as (base, _):
        assert httpx.get(f"{base}/a2a/nobrand/oauth/agents").status_code == 404
        # Same-app and signed out: off to the host app's login, back to this page.
        answer = httpx.get(f"{base}/a2a/{BRAND}/oauth/agents")
        assert answer.status_code == 303
        assert answer.headers["location"] == (
            f"/login?next=http%3A%2F%2F127.0.0.1%3A{urlsplit(base).port}%2Fa2a%2Facme%2Foauth%2Fagents"
        )
