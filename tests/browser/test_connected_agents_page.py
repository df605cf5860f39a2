"""The connected agents page in a real headless Chromium (same-app mode, ASGI host app).

Jane connects her personal agent through the consent page, follows the result page's link to
her connected agents, sees the agent with what it can do and when it was last used, and
revokes it; the agent's next request fails. Screenshots are saved and checked.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from pactmw.brand_login import BrandUser, DevelopmentBrandLogin
from tests.browser.support import (
    BRAND_ID,
    BRAND_NAME,
    JANE,
    PA_ISSUER,
    SCOPES,
    Site,
    brand_mode_site,
    has_consent_form,
    janes_grant,
    png_size,
    refused_in_a_frame,
    revoke,
    screenshot,
    serve_site,
    sign_in,
    sign_in_at_brand,
)
from tests.support.agent import user_message
from tests.support.chromium import WAIT
from tests.support.parties import AGENT_NAME


def agent_send(site: Site, access_token: str) -> httpx.Response:
    headers = {**site.agent_headers(), "x-a2a-user-delegation": f"Bearer {access_token}"}
    return httpx.post(
        f"{site.base}/a2a/{BRAND_ID}/message:send",
        json={"message": user_message("where is my order?")},
        headers=headers,
        timeout=WAIT,
    )


@pytest.mark.timeout(90)
def test_a_person_revokes_an_agent_on_the_connected_agents_page(
    browser: WebDriver, tmp_path: Path
) -> None:
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        authorization = site.device_authorization()
        browser.get(authorization["verification_uri_complete"])
        wait.until(has_consent_form)
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        wait.until(lambda d: urlsplit(d.current_url).path.endswith("/oauth/connected"))
        token = site.poll_token(authorization["device_code"])["access_token"]
        assert agent_send(site, token).status_code == 200  # used once: "last used" is set

        # The result page says where to revoke: its link opens the connected agents page.
        browser.find_element(By.LINK_TEXT, "connected agents page").click()
        heading = wait.until(EC.presence_of_element_located((By.TAG_NAME, "h1")))
        assert urlsplit(browser.current_url).path == f"/a2a/{BRAND_ID}/oauth/agents"
        assert heading.text == f"Agents connected to {BRAND_NAME}"
        agents = browser.find_elements(By.CSS_SELECTOR, "section.agent")
        assert len(agents) == 1
        card = agents[0].text
        assert agents[0].find_element(By.TAG_NAME, "h2").text == AGENT_NAME
        assert PA_ISSUER in card
        for description in SCOPES.values():
            assert description in card
        for label in ("Connected since", "Last used", "Expires"):
            assert label in card
        assert "Not yet" not in card  # the agent's request was recorded
        shot = screenshot(browser, "connected-agents-page.png")
        width, height = png_size(shot)
        assert (width, height) == tuple(
            browser.execute_script("return [window.innerWidth, window.innerHeight]")
        )
        assert width >= 800

        # Never framed by another origin: Chromium refuses to render it there.
        refused_in_a_frame(browser, browser.current_url, "section.agent")
        browser.back()
        wait.until(lambda d: urlsplit(d.current_url).path == f"/a2a/{BRAND_ID}/oauth/agents")

        # Readable without CSS: with every style removed, the content reads in order.
        browser.execute_script("document.querySelectorAll('style').forEach(s => s.remove())")
        plain = browser.find_element(By.TAG_NAME, "body").text
        order = [f"Agents connected to {BRAND_NAME}", AGENT_NAME, "From", PA_ISSUER, "It can:"]
        positions = [plain.index(part) for part in order]
        assert positions == sorted(positions), plain
        browser.refresh()
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "section.agent")))

        # Keyboard first: the first Tab stop is the Revoke button of the only agent.
        browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        focused = browser.switch_to.active_element
        assert focused.text == f"Revoke {AGENT_NAME}"
        focused.send_keys(Keys.ENTER)

        notice = wait.until(EC.presence_of_element_located((By.ID, "notice")))
        assert notice.text == f"{AGENT_NAME} can no longer act for you."
        assert browser.find_elements(By.CSS_SELECTOR, "section.agent") == []
        assert "No personal agent can act for you" in browser.find_element(By.ID, "no-agents").text
        assert "These personal agents" not in browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, "connected-agents-after-revoke.png")

        # Revocation takes effect on the agent's very next request.
        refused = agent_send(site, token)
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]


@pytest.mark.timeout(90)
def test_brand_mode_signs_in_at_the_brand_then_revokes(browser: WebDriver, tmp_path: Path) -> None:
    wait = WebDriverWait(browser, WAIT)
    with brand_mode_site(tmp_path) as (base, login, store):
        grant = janes_grant(store, "a2agrant_brandmode")
        page = f"{base}/a2a/{BRAND_ID}/oauth/agents"
        browser.get(page)
        # At the Brand's login (no code to type for this page), then back with an assertion.
        wait.until(EC.presence_of_element_located((By.NAME, "username")))
        assert browser.current_url.startswith(login.login_url)
        assert not browser.find_elements(By.NAME, "user_code")
        sign_in_at_brand(browser, wait)
        wait.until(lambda d: d.current_url == page and d.find_elements(By.TAG_NAME, "h1"))
        assert browser.find_element(By.TAG_NAME, "h1").text == f"Agents connected to {BRAND_NAME}"
        assert JANE in browser.find_element(By.TAG_NAME, "body").text
        card = browser.find_element(By.CSS_SELECTOR, "section.agent")
        assert card.find_element(By.TAG_NAME, "h2").text == AGENT_NAME
        assert SCOPES["orders:read"] in card.text
        assert "Last used\nNot yet" in card.text or "Last used Not yet" in card.text
        screenshot(browser, "connected-agents-brand-mode.png")

        revoke(browser, card, AGENT_NAME)
        revoked = store.get_grant(grant.grant_id)
        assert revoked is not None
        assert revoked.revoked_at is not None


def test_the_brand_login_hands_an_agents_page_assertion_only_to_that_page() -> None:
    consent = "http://127.0.0.1:8000/a2a/acme/oauth/consent"
    agents = "http://127.0.0.1:8000/a2a/acme/oauth/agents"
    user = BrandUser("jane", "pw", account="acct-jane", email=JANE)
    with DevelopmentBrandLogin(consent_url=consent, users=[user]) as login:
        assert login.agents_url == agents
        form = {"username": "jane", "password": "pw"}
        for other in (agents + "?next=https://evil.example", agents + "/x", agents + "#x"):
            answer = httpx.post(login.login_url, data={**form, "return_to": other})
            assert answer.status_code == 400, other
            assert "assertion" not in answer.text
        wrong = httpx.post(login.login_url, data={"return_to": agents, "username": "jane"})
        assert wrong.status_code == 401
        handed = httpx.post(login.login_url, data={**form, "return_to": agents})
        assert handed.status_code == 200
        assert f'<form method="post" action="{agents}">' in handed.text


@pytest.mark.timeout(60)
def test_a_person_without_an_email_is_named_as_they_signed_in(
    browser: WebDriver, tmp_path: Path
) -> None:
    """docs/cli.md's `BrandUser("jane", ..., account="acct-jane")` has no email: the login
    said "Signed in as jane" and the Provider's pages then said "as acct-jane", the Brand's
    internal id, which the person never typed nor saw."""
    wait = WebDriverWait(browser, WAIT)
    with brand_mode_site(tmp_path, email=None) as (base, _, _):
        page = f"{base}/a2a/{BRAND_ID}/oauth/agents"
        browser.get(page)
        sign_in_at_brand(browser, wait)
        wait.until(lambda d: d.current_url == page and d.find_elements(By.TAG_NAME, "h1"))
        signed_in = browser.find_element(By.CSS_SELECTOR, "p.muted").text
        assert f"You are signed in to {BRAND_NAME} as jane." in signed_in
        assert "acct-jane" not in browser.find_element(By.TAG_NAME, "body").text
