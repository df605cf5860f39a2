"""The pages hold their layout whatever the Brand and the agent put in them, on a phone (375 px
wide) and on a desktop (1280 px), in a real headless Chromium.

An agent's display name, its origin, a scope's description and an authorization detail's
rendering come from configuration and from the agent's request: long unbroken words there
(a 200-character description without a space) must wrap inside the page, never push it
sideways so that the person scrolls to read what they are allowing, or cannot see it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.support import (
    BRAND_ID,
    CANCEL,
    ORDER_CANCEL,
    brand_mode_site,
    has_consent_form,
    result_heading,
    screenshot,
    serve_site,
    sign_in,
)
from tests.support.chromium import WAIT

UNBROKEN = "x" * 200
#: Markup in a name or a description is text: shown as typed, never run as HTML.
LONG_NAME = "<i>Shop</i>Helper" + "Z" * 120
LONG_ISSUER = "https://" + "personal-agent" * 12 + ".example"
LONG_SCOPES = {
    "orders:read": "Look up your orders <b>now</b>",
    "orders:cancel": "Cancel an order",
    "orders:long": "Long:" + UNBROKEN,
}
WIDTHS = (375, 1280)


def holds_at(browser: WebDriver, width: int, name: str) -> None:
    """At `width` px: nothing wider than the window, every element of the page inside it."""
    browser.set_window_size(width, 900)
    inner = browser.execute_script("return window.innerWidth")
    assert inner == width
    screenshot(browser, f"layout-{name}-{width}.png")
    scroll = browser.execute_script("return document.documentElement.scrollWidth")
    assert scroll <= inner, f"{name} at {width} px is {scroll} px wide"
    outside: list[Any] = browser.execute_script(
        "return [...document.querySelectorAll('main *')]"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)"
        ".map(e => e.tagName + ': ' + e.textContent.slice(0, 40))"
    )
    assert outside == [], f"{name} at {width} px: {outside}"


@pytest.mark.timeout(120)
def test_long_unbroken_names_and_descriptions_wrap_on_every_page(
    browser: WebDriver, tmp_path: Path
) -> None:
    with serve_site(
        tmp_path,
        agent_name=LONG_NAME,
        issuer=LONG_ISSUER,
        scopes=LONG_SCOPES,
        detail_types=(ORDER_CANCEL,),
    ) as site:
        sign_in(browser, site)
        details = [{"type": CANCEL, "order": "A-1001"}, {"type": CANCEL, "order": "B" * 150}]
        asked = site.device_authorization(" ".join(LONG_SCOPES), details)
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        heading = browser.find_element(By.TAG_NAME, "h1")
        assert LONG_NAME in heading.text
        assert heading.find_elements(By.TAG_NAME, "i") == []
        assert "<b>now</b>" in browser.find_element(By.TAG_NAME, "fieldset").text
        for width in WIDTHS:
            holds_at(browser, width, "consent")

        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        assert result_heading(browser).text == "Connected"
        for width in WIDTHS:
            holds_at(browser, width, "result")
        site.poll_token(asked["device_code"])

        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        card = WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "section.agent")
        )
        assert card.find_element(By.TAG_NAME, "h2").text == LONG_NAME
        for width in WIDTHS:
            holds_at(browser, width, "connected-agents")


#: An ordinary origin: on a phone it must read on one line, not be broken mid-word.
ORDINARY_ISSUER = "https://assistant.example.com"


@pytest.mark.timeout(60)
def test_an_ordinary_origin_reads_on_one_line_on_a_phone(
    browser: WebDriver, tmp_path: Path
) -> None:
    with serve_site(tmp_path, issuer=ORDINARY_ISSUER) as site:
        sign_in(browser, site)
        asked = site.device_authorization("orders:read")
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        assert result_heading(browser).text == "Connected"
        site.poll_token(asked["device_code"])

        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        origin = WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "section.agent dd code")
        )
        for width in WIDTHS:
            holds_at(browser, width, "connected-agents-ordinary")
            assert origin.text == ORDINARY_ISSUER
            lines = browser.execute_script("return arguments[0].getClientRects().length", origin)
            assert lines == 1, f"the origin is broken over {lines} lines at {width} px"


@pytest.mark.timeout(60)
def test_the_development_brand_login_fits_a_phone(browser: WebDriver, tmp_path: Path) -> None:
    """The sign-in page of `DevelopmentBrandLogin` (the docs' login for `pactmw serve`) is the
    first page a person meets, often on a phone: without a viewport it was laid out 980 px
    wide and shown shrunk to a third, its fields too small to tap."""
    with brand_mode_site(tmp_path) as (base, login, _):
        # A phone: the browser honours (or, without one, replaces) the page's viewport.
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 375, "height": 740, "deviceScaleFactor": 2, "mobile": True},
        )
        browser.get(f"{login.login_url}?{urlencode({'return_to': login.consent_url})}")
        WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.NAME, "username"))
        screenshot(browser, "brand-login-phone.png")
        assert browser.execute_script("return window.innerWidth") == 375
        assert browser.find_elements(By.CSS_SELECTOR, "main h1")  # its one landmark
        browser.get(f"{base}/a2a/{BRAND_ID}/oauth/consent")  # pactmw's own page, alike
        WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.NAME, "user_code"))
        assert browser.execute_script("return window.innerWidth") == 375
