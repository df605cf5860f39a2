"""A person types the code their personal agent showed them, gets it wrong, and corrects it:
in a real headless Chromium, on a phone-sized window.

A mistyped code brings back the form, saying why, with what was typed in the field; an error
page there was a dead end. The field's text is at least 16 px, so that a phone does not zoom
in when it is focused (iOS does below that).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.support import (
    BRAND_ID,
    brand_mode_site,
    has_consent_form,
    screenshot,
    serve_site,
    sign_in,
)
from tests.support.chromium import WAIT


def _code_error(browser: WebDriver) -> str:
    found = WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.ID, "code-error"))
    return str(found[0].text)


@pytest.mark.timeout(60)
def test_a_mistyped_code_is_corrected_in_the_form(browser: WebDriver, tmp_path: Path) -> None:
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        browser.set_window_size(375, 800)
        asked = site.device_authorization()
        right = asked["user_code"]
        # One letter off, still of the code alphabet: a code that is valid but unknown.
        wrong = right[:-1] + ("B" if right[-1] != "B" else "C")
        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/consent")
        field = WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "user_code"))
        size = browser.execute_script("return getComputedStyle(arguments[0]).fontSize", field)
        assert float(size.removesuffix("px")) >= 16, size

        field.send_keys(wrong, Keys.ENTER)
        assert _code_error(browser) == "This code is unknown, expired or already used."
        field = browser.find_element(By.ID, "user_code")
        assert field.get_attribute("value") == wrong
        assert field.get_attribute("aria-invalid") == "true"
        # The error looks like one: not the grey of secondary text, and bold. (No autofocus:
        # without script it puts the caret before the code, where Backspace deletes nothing.)
        error = browser.find_element(By.ID, "code-error")
        style = browser.execute_script(
            "const s = getComputedStyle(arguments[0]); return [s.color, s.fontWeight]", error
        )
        assert style[0] not in ("rgb(91, 100, 117)", "rgb(29, 35, 48)"), style  # muted, body
        assert int(style[1]) >= 600, style
        screenshot(browser, "code-entry-mistyped-375.png")

        field.send_keys(Keys.BACKSPACE, right[-1], Keys.ENTER)
        WebDriverWait(browser, WAIT).until(has_consent_form)


@pytest.mark.timeout(60)
def test_a_code_typed_in_brand_mode_goes_on_to_the_brand_login(
    browser: WebDriver, tmp_path: Path
) -> None:
    """Brand mode: the Brand's login is on another origin. A code typed at the Provider's code
    entry page goes there to sign in; Chromium blocked it (the page's CSP `form-action 'self'`
    also covers where the form's answer redirects), leaving the person on the form."""
    with brand_mode_site(tmp_path) as (base, login, _store):
        consent = f"{base}/a2a/{BRAND_ID}/oauth/consent"
        browser.get(consent)
        field = WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "user_code"))
        field.send_keys("bcdf ghjk", Keys.ENTER)
        WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.NAME, "username"))
        assert browser.current_url.startswith(login.login_url)
        (return_to,) = parse_qs(urlsplit(browser.current_url).query)["return_to"]
        assert return_to == f"{consent}?user_code=BCDF-GHJK"
