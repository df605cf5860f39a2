"""Post/Redirect/Get on the person's pages, on every adapter family (a real server each), in
brand-login mode.

A form a browser submitted (the Brand login's sign-in on the consent and connected agents
pages, a Revoke) was answered with a page: Back or Reload then asked to send it again
(Chromium's "Confirm Form Resubmission"). A browser's navigation (Fetch Metadata
`Sec-Fetch-Mode: navigate`) is now answered 303 to the page's GET, signed in there by a
short-lived cookie (the assertion is single-use; the URL, which lands in access logs,
carries no proof of sign-in). Each adapter must pass the cookie both ways. A program's
request still gets the page itself (PACT's delegated suite reads the consent form from the
sign-in's answer). tests/browser/test_back_after_sign_in.py drives it in Chromium.
"""

from __future__ import annotations

import re
import time
from html import unescape
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import mint_login_assertion
from pactmw.provider import Provider, ProviderSettings
from tests.support.page_sites import ADAPTERS, BRAND, page_site
from tests.support.parties import AGENT_NAME, ISSUER

BRAND_ISSUER = "https://brand.example"
BRAND_KEY = generate_private_jwk("ES256", kid="brand-1")
AGENT_KEY = generate_private_jwk("ES256", kid="pa-1")
SCOPES = {"orders:read": "See your orders", "orders:cancel": "Cancel an order"}
DELEGATION = {
    "scopes": SCOPES,
    "login": "brand",
    "login_url": "https://brand.example/login",
    "brand_issuer": BRAND_ISSUER,
    "brand_jwks": {"keys": [BRAND_KEY.public.to_dict()]},
}
AGENTS = [{"issuer": ISSUER, "name": AGENT_NAME, "jwks": {"keys": [AGENT_KEY.public.to_dict()]}}]
#: What a browser sends with a form's navigation: a scripted client does not.
NAVIGATION = {"sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}
CODE = "BCDF-GHJK"


def hidden(html: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)">', html)
    assert found is not None, name
    return unescape(found.group(1))


def cookie_of(answer: httpx.Response, url: str) -> str:
    """The `name=value` of the one cookie a 303 sets, checked to be for `url`'s page only."""
    (set_cookie,) = answer.headers.get_list("set-cookie")
    pair, *attributes = (part.strip() for part in set_cookie.split(";"))
    lowered = {attribute.lower() for attribute in attributes}
    assert {"httponly", "samesite=lax", f"path={urlsplit(url).path}"} <= lowered, set_cookie
    return pair


def assertion_for(page: str, user_code: str) -> str:
    return mint_login_assertion(
        key=BRAND_KEY,
        brand_issuer=BRAND_ISSUER,
        consent_url=page,
        account="acct-jane",
        user_code=user_code,
        email="jane@example.com",
    )


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.timeout(120)
def test_a_browsers_forms_are_answered_with_a_redirect(adapter: str, tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    with page_site(adapter, tmp_path, templates, delegation=DELEGATION, agents=AGENTS) as (
        base,
        settings,
    ):
        # The site's Provider as the app's own test process builds it (same store and keys).
        provider = Provider.from_settings(ProviderSettings.from_mapping(settings))
        try:
            now = time.time()
            provider.store.create_device_authorization(
                device_code_hash="device-code-hash",
                user_code=CODE,
                brand_id=BRAND,
                client_id=ISSUER,
                pa_sub="u1",
                scopes=tuple(SCOPES),
                now=now,
                expires_at=now + 600,
                interval=1,
            )
            grant = provider.grant_delegation(
                BRAND,
                account="acct-jane",
                agent_issuer=ISSUER,
                agent_sub="u2",
                scopes=["orders:read"],
            )
        finally:
            provider.close()

        # The consent page: the sign-in's 303 and the GET it signs in.
        consent = f"{base}/a2a/{BRAND}/oauth/consent"
        signed_in = httpx.post(
            consent, data={"assertion": assertion_for(consent, CODE)}, headers=NAVIGATION
        )
        assert signed_in.status_code == 303, signed_in.text
        assert signed_in.headers["location"] == f"{consent}?{urlencode({'user_code': CODE})}"
        cookie = cookie_of(signed_in, consent)
        shown = httpx.get(signed_in.headers["location"], headers={"cookie": cookie})
        assert shown.status_code == 200, shown.text
        assert hidden(shown.text, "session")
        assert "jane@example.com" in shown.text
        assert httpx.get(signed_in.headers["location"]).status_code == 303  # no cookie: login

        # The connected agents page: the sign-in's 303, then a Revoke's.
        agents = f"{base}/a2a/{BRAND}/oauth/agents"
        signed_in = httpx.post(
            agents, data={"assertion": assertion_for(agents, "")}, headers=NAVIGATION
        )
        assert signed_in.status_code == 303, signed_in.text
        assert signed_in.headers["location"] == agents
        cookie = cookie_of(signed_in, agents)
        page = httpx.get(agents, headers={"cookie": cookie})
        assert page.status_code == 200, page.text
        assert AGENT_NAME in page.text
        revoked = httpx.post(
            agents,
            data={
                "session": hidden(page.text, "session"),
                "action": "revoke",
                "grant": grant.grant_id,
            },
            headers={**NAVIGATION, "cookie": cookie, "origin": base},
        )
        assert revoked.status_code == 303, revoked.text
        location = revoked.headers["location"]
        assert location == f"{agents}?{urlencode({'revoked': grant.grant_id})}"
        after = httpx.get(location, headers={"cookie": cookie_of(revoked, agents)})
        assert after.status_code == 200, after.text
        assert "can no longer act for you" in after.text
        # Reload: the same page, nothing sent again; without the cookie, the Brand's login.
        assert "can no longer act for you" in httpx.get(location, headers={"cookie": cookie}).text
        assert httpx.get(location).status_code == 303
