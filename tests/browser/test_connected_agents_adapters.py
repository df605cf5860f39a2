"""The connected agents page in headless Chromium on every adapter family (ASGI, WSGI, Flask,
Django), in brand-login mode: the Brand's own login (`DevelopmentBrandLogin`) signs the person
in and posts them back to the page, which shows the agent and revokes it. Each adapter's
screenshot is saved and checked.

(Same-app mode in Chromium: tests/browser/test_connected_agents_page.py on ASGI and
tests/browser/test_connected_agents_same_app.py on Flask, Django and plain WSGI.)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from pactmw.brand_login import BrandUser, DevelopmentBrandLogin, consent_url_for
from pactmw.core.jwk import generate_private_jwk
from pactmw.store import open_store
from pactmw.store.base import Grant, Store
from tests.browser.support import png_size, revoke, screenshot
from tests.support.chromium import WAIT
from tests.support.net import free_port
from tests.support.page_sites import ADAPTERS, BRAND, page_site
from tests.support.parties import AGENT_NAME, ISSUER

SCOPES = {"orders:read": "See your orders", "orders:cancel": "Cancel an order"}
JANE = BrandUser("jane", "correct horse", account="acct-jane", email="jane@example.com")
AGENT_KEY = generate_private_jwk("ES256", kid="pa-1")


@contextlib.contextmanager
def brand_site(adapter: str, tmp_path: Path) -> Iterator[tuple[str, DevelopmentBrandLogin, Store]]:
    """A brand-mode Provider served by `adapter`, the Brand's login in front of it, and the
    Provider's store (to seed a grant and read it back)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    templates = tmp_path / "templates"
    templates.mkdir()
    with DevelopmentBrandLogin(
        consent_url=consent_url_for(base, BRAND), users=[JANE], brand_name="Acme Outdoor"
    ) as login:
        delegation = {
            "scopes": SCOPES,
            "login": "brand",
            "login_url": login.login_url,
            "brand_issuer": login.issuer,
            "brand_jwks": login.jwks(),
        }
        agents = [
            {"issuer": ISSUER, "name": AGENT_NAME, "jwks": {"keys": [AGENT_KEY.public.to_dict()]}}
        ]
        with page_site(
            adapter, tmp_path, templates, delegation=delegation, agents=agents, port=port
        ) as (served, settings):
            store = open_store(settings["store"])
            try:
                yield served, login, store
            finally:
                store.close()


def connect(store: Store) -> Grant:
    now = time.time()
    return store.upsert_grant(
        grant_id="a2agrant_adapters",
        brand_id=BRAND,
        account=JANE.account,
        client_id=ISSUER,
        pa_sub="pa-user-1",
        scopes=("orders:read",),
        now=now,
        expires_at=now + 30 * 86400,
    )


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.timeout(120)
def test_brand_mode_page_on_every_adapter(adapter: str, browser: WebDriver, tmp_path: Path) -> None:
    wait = WebDriverWait(browser, WAIT)
    with brand_site(adapter, tmp_path) as (base, login, store):
        grant = connect(store)
        page = f"{base}/a2a/{BRAND}/oauth/agents"
        browser.get(page)
        # Off to the Brand's login, then back to the page with a single-use assertion.
        wait.until(EC.presence_of_element_located((By.NAME, "username")))
        assert browser.current_url.startswith(login.login_url)
        browser.find_element(By.NAME, "username").send_keys(JANE.username)
        browser.find_element(By.NAME, "password").send_keys(JANE.password)
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(lambda d: d.current_url == page and d.find_elements(By.TAG_NAME, "h1"))
        assert browser.find_element(By.TAG_NAME, "h1").text == "Agents connected to Acme Outdoor"
        card = browser.find_element(By.CSS_SELECTOR, "section.agent")
        assert card.find_element(By.TAG_NAME, "h2").text == AGENT_NAME
        assert ISSUER in card.text
        assert SCOPES["orders:read"] in card.text
        assert SCOPES["orders:cancel"] not in card.text
        shot = screenshot(browser, f"connected-agents-brand-{adapter}.png")
        assert png_size(shot) == tuple(
            browser.execute_script("return [window.innerWidth, window.innerHeight]")
        )

        revoke(browser, card, AGENT_NAME)
        revoked = store.get_grant(grant.grant_id)
        assert revoked is not None
        assert revoked.revoked_at is not None
