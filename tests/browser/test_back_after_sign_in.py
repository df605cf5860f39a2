"""Brand mode in a real headless Chromium: after signing in at the Brand's login and answering
the consent page, Back and Reload never ask to send a form again.

The sign-in POST (the assertion the Brand's login hands over) answered the consent page
itself: Back from the result page showed Chromium's "Confirm Form Resubmission" (a POST's
page, which `no-store` keeps out of every cache). The sign-in now answers a browser 303 to
the consent page's GET (Post/Redirect/Get), as the decision already did to the result page.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.support import (
    ANSWERED,
    BRAND_ID,
    PA_ISSUER,
    SCOPES,
    brand_mode_site,
    has_consent_form,
    janes_grant,
    press,
    revoke,
    sign_in_at_brand,
)
from tests.support.chromium import WAIT
from tests.support.parties import AGENT_NAME

CODE = "BCDF-GHJK"


def navigation_type(browser: WebDriver) -> str:
    """How the page shown was reached: `navigate`, `reload` or `back_forward`."""
    return str(browser.execute_script("return performance.getEntriesByType('navigation')[0].type"))


def provider_page_text(browser: WebDriver) -> str:
    """The text of the page shown, which must be the Provider's, not Chromium's own
    "Confirm Form Resubmission" (ERR_CACHE_MISS) page."""
    WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.TAG_NAME, "h1"))
    text = str(browser.find_element(By.TAG_NAME, "body").text)
    assert "Confirm Form Resubmission" not in text
    assert "ERR_CACHE_MISS" not in text
    return text


@pytest.mark.timeout(90)
def test_back_and_reload_after_a_brand_sign_in_resubmit_nothing(
    browser: WebDriver, tmp_path: Path
) -> None:
    with brand_mode_site(tmp_path) as (base, _login, store):
        now = time.time()
        store.create_device_authorization(
            device_code_hash="device-code-hash",
            user_code=CODE,
            brand_id=BRAND_ID,
            client_id=PA_ISSUER,
            pa_sub="pa-user-1",
            scopes=tuple(SCOPES),
            now=now,
            expires_at=now + 600,
            interval=1,
        )
        page = f"{base}/a2a/{BRAND_ID}/oauth/consent?{urlencode({'user_code': CODE})}"
        browser.get(page)
        wait = WebDriverWait(browser, WAIT)
        sign_in_at_brand(browser, wait)
        wait.until(has_consent_form)
        # The consent page is a GET's (its URL names the code), so Reload shows it again.
        assert browser.current_url == page
        browser.refresh()
        wait.until(lambda d: navigation_type(d) == "reload")
        assert has_consent_form(browser)

        press(browser, "allow")
        assert "/oauth/connected?" in browser.current_url
        browser.back()
        wait.until(lambda d: d.current_url == page)
        # The consent page's GET again (the answer given), or the form as it was, restored
        # by the back/forward cache: never a form re-sent, and a second Allow decides nothing.
        shown = provider_page_text(browser)
        if ANSWERED not in shown:
            assert has_consent_form(browser)
            press(browser, "allow")
            assert ANSWERED in provider_page_text(browser)
        grants = store.list_grants(brand_id=BRAND_ID, account="acct-jane", now=time.time())
        assert len(grants) == 1


@pytest.mark.timeout(90)
def test_back_and_reload_on_the_connected_agents_page_resubmit_nothing(
    browser: WebDriver, tmp_path: Path
) -> None:
    """The connected agents page's sign-in and its Revoke answered pages too; both are now
    303s to the page's GET."""
    with brand_mode_site(tmp_path) as (base, _login, store):
        grant = janes_grant(store, "a2agrant_back")
        page = f"{base}/a2a/{BRAND_ID}/oauth/agents"
        browser.get(page)
        wait = WebDriverWait(browser, WAIT)
        sign_in_at_brand(browser, wait)
        wait.until(lambda d: d.current_url == page and d.find_elements(By.TAG_NAME, "h1"))
        card = browser.find_element(By.CSS_SELECTOR, "section.agent")
        revoke(browser, card, AGENT_NAME)
        assert browser.current_url == f"{page}?{urlencode({'revoked': grant.grant_id})}"
        browser.refresh()
        wait.until(lambda d: navigation_type(d) == "reload")
        assert "can no longer act for you" in provider_page_text(browser)
        browser.back()
        wait.until(lambda d: d.current_url == page)
        shown = provider_page_text(browser)
        # The page's GET again (nothing left to revoke), or as it was, from the back/forward
        # cache; never the Revoke sent again.
        assert "Agents connected to" in shown
        after = store.get_grant(grant.grant_id)
        assert after is not None
        assert after.revoked_at is not None
