"""A Brand's right-to-left catalog (Arabic here) lays its pages out from the right, in a real
headless Chromium: the heading starts at the right edge, Allow (the first button) stands to
the right of Deny, a connected agent's labels stand to the right of their values; an origin
stays left to right inside them. Checked by element geometry, not by pixels; the screenshots
are kept under test-artifacts/browser/ to look at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from pactmw.provider.consent_pages import ConsentPages
from tests.browser.support import (
    BRAND_ID,
    axe_violations,
    has_consent_form,
    result_heading,
    screenshot,
    serve_site,
    sign_in,
)
from tests.support.chromium import WAIT
from tests.support.translations import catalog_for


def box(browser: WebDriver, element: WebElement) -> dict[str, float]:
    """`element`'s border box in the viewport (left, right, width)."""
    rect: dict[str, float] = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {left: r.left, right: r.right, width: r.width}",
        element,
    )
    return rect


def direction(browser: WebDriver, element: WebElement) -> str:
    value: str = browser.execute_script("return getComputedStyle(arguments[0]).direction", element)
    return value


def text_box(browser: WebDriver, element: WebElement) -> dict[str, float]:
    """Where `element`'s text itself starts and ends (a Range over its contents)."""
    rect: dict[str, float] = browser.execute_script(
        "const range = document.createRange(); range.selectNodeContents(arguments[0]);"
        "const r = range.getBoundingClientRect(); return {left: r.left, right: r.right}",
        element,
    )
    return rect


@pytest.mark.timeout(90)
def test_an_arabic_catalog_mirrors_the_pages(browser: WebDriver, tmp_path: Path) -> None:
    pages = ConsentPages(translations=catalog_for("ar"))
    with serve_site(tmp_path, pages=pages) as site:
        sign_in(browser, site)
        asked = site.device_authorization("orders:read orders:cancel")
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        screenshot(browser, "rtl-consent.png")
        root = browser.find_element(By.TAG_NAME, "html")
        assert (root.get_attribute("lang"), root.get_attribute("dir")) == ("ar", "rtl")

        main = box(browser, browser.find_element(By.TAG_NAME, "main"))
        heading = text_box(browser, browser.find_element(By.TAG_NAME, "h1"))
        # The heading's text starts at the main column's right edge, not its left one.
        assert abs(heading["right"] - main["right"]) < 1, (heading, main)
        assert heading["left"] - main["left"] > 1, (heading, main)
        allow = browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]")
        deny = browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=deny]")
        assert (allow.text, deny.text) == ("السماح", "الرفض")
        allow_box, deny_box = box(browser, allow), box(browser, deny)
        assert allow_box["left"] > deny_box["right"], (allow_box, deny_box)
        # The space between them is the button's inline end margin: on its left side now.
        assert allow_box["left"] - deny_box["right"] > 5, (allow_box, deny_box)
        assert abs(allow_box["right"] - main["right"]) < 1, (allow_box, main)
        origin = browser.find_element(By.CSS_SELECTOR, "main p.muted code")
        assert direction(browser, origin) == "ltr"
        violations: list[dict[str, Any]] = axe_violations(browser)
        assert violations == [], violations

        allow.click()
        assert result_heading(browser).text == "تم الاتصال"
        screenshot(browser, "rtl-result.png")
        site.poll_token(asked["device_code"])

        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        card = WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "section.agent")
        )
        screenshot(browser, "rtl-connected-agents.png")
        label = box(browser, card.find_element(By.TAG_NAME, "dt"))
        value = box(browser, card.find_element(By.TAG_NAME, "dd"))
        assert label["left"] > value["right"], (label, value)
        # A date ("3 December 2026", English words) reads in its own order, day first, not
        # reordered by the page's direction ("December 2026 3").
        date = card.find_element(By.TAG_NAME, "time")
        day = date.text.split(" ", 1)[0]
        day_box, rest_box = (
            browser.execute_script(
                "const range = document.createRange(), text = arguments[0].firstChild;"
                "range.setStart(text, arguments[1]); range.setEnd(text, arguments[2]);"
                "return range.getBoundingClientRect().left",
                date,
                start,
                end,
            )
            for start, end in ((0, len(day)), (len(day) + 1, len(date.text)))
        )
        assert day_box < rest_box, (date.text, day_box, rest_box)
        origin = card.find_element(By.CSS_SELECTOR, "dd[id$='-from'] code")
        assert direction(browser, origin) == "ltr"
        assert origin.text == "https://pa.example"
        # The person's user id at the agent is a name: isolated, left to right as it is.
        agent_user = card.find_element(By.CSS_SELECTOR, "dd[id$='-user'] bdi")
        assert direction(browser, agent_user) == "ltr"
        assert agent_user.text == "pa-user-1"
        violations = axe_violations(browser)
        assert violations == [], violations


@pytest.mark.timeout(60)
def test_the_user_code_is_typed_left_to_right_on_an_arabic_page(
    browser: WebDriver, tmp_path: Path
) -> None:
    pages = ConsentPages(translations=catalog_for("ar"))
    with serve_site(tmp_path, pages=pages) as site:
        sign_in(browser, site)
        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/consent")
        field = WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "user_code"))
        screenshot(browser, "rtl-code-entry.png")
        assert browser.find_element(By.TAG_NAME, "html").get_attribute("dir") == "rtl"
        assert direction(browser, field) == "ltr"
        violations: list[dict[str, Any]] = axe_violations(browser)
        assert violations == [], violations
