"""A decision is taken once, and a person who submits the consent form again (Allow pressed
twice, a second tab, the form shown again by Back) is shown that decision, never an error
page that says the approval "did not work" while the agent is connected, and never a second
decision. In a real headless Chromium.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.support import (
    ANSWERED,
    SCOPES,
    has_consent_form,
    press,
    screenshot,
    serve_site,
    sign_in,
    two_tabs_on_the_form,
)
from tests.support.chromium import WAIT


def body_text(browser: WebDriver) -> str:
    return str(browser.find_element(By.TAG_NAME, "body").text)


@pytest.mark.timeout(60)
def test_allow_pressed_again_on_a_second_form_shows_the_approval(
    browser: WebDriver, tmp_path: Path
) -> None:
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        asked = site.device_authorization()
        first, second = two_tabs_on_the_form(browser, asked["verification_uri_complete"])
        browser.switch_to.window(first)
        browser.find_element(By.CSS_SELECTOR, "input[value='orders:track']").click()
        assert press(browser, "allow") == "Connected"
        assert ANSWERED not in body_text(browser)

        # The same choice, pressed again on the form still open in the other tab.
        browser.switch_to.window(second)
        assert press(browser, "allow") == "Connected", body_text(browser)
        text = body_text(browser)
        assert ANSWERED in text
        screenshot(browser, "decide-once-allow-again.png")
        assert "did not work" not in text
        # What was decided the first time, with `orders:track` unticked, and nothing more.
        assert SCOPES["orders:read"] in text
        assert SCOPES["orders:track"] not in text
        token = site.poll_token(asked["device_code"])
        assert sorted(token["scope"].split()) == ["orders:cancel", "orders:read"]


@pytest.mark.timeout(60)
def test_allow_after_a_deny_on_another_form_does_not_connect(
    browser: WebDriver, tmp_path: Path
) -> None:
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        asked = site.device_authorization()
        first, second = two_tabs_on_the_form(browser, asked["verification_uri_complete"])
        browser.switch_to.window(first)
        assert press(browser, "deny") == "Not connected"

        browser.switch_to.window(second)
        assert press(browser, "allow") == "Not connected", body_text(browser)
        text = body_text(browser)
        assert ANSWERED in text
        screenshot(browser, "decide-once-deny-then-allow.png")
        assert "Nothing was shared." in text
        refused = site.token_answer(asked["device_code"])
        assert refused.status_code == 400
        assert refused.json()["error"] == "access_denied"


@pytest.mark.timeout(60)
def test_back_after_allowing_then_deny_keeps_the_approval_and_says_so(
    browser: WebDriver, tmp_path: Path
) -> None:
    """Back after a decision shows the form again (kept by the browser) or loads the consent
    link again; either way the person ends on the decision already taken."""
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        asked = site.device_authorization("orders:read")
        browser.get(asked["verification_uri_complete"])
        wait.until(has_consent_form)
        assert press(browser, "allow") == "Connected"

        browser.back()
        wait.until(lambda d: not urlsplit(d.current_url).path.endswith("/oauth/connected"))
        wait.until(lambda d: has_consent_form(d) or d.find_elements(By.TAG_NAME, "h1"))
        if has_consent_form(browser):
            press(browser, "deny")
        assert browser.find_element(By.TAG_NAME, "h1").text == "Connected", body_text(browser)
        text = body_text(browser)
        assert ANSWERED in text
        screenshot(browser, "decide-once-back-then-deny.png")
        assert "did not work" not in text
        assert SCOPES["orders:read"] in text
        assert site.poll_token(asked["device_code"])["scope"] == "orders:read"
