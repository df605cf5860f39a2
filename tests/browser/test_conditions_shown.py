"""RFC 9396 authorization details are conditions on a scope: the consent page lists them under
the scope's checkbox, and the pages after it must say them too. A person who allowed "Cancel
an order: only order A-1001" must not read, on the result page or the connected agents page,
that the agent can "Cancel an order" as if any order. In a real headless Chromium.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.support import (
    BRAND_ID,
    CANCEL,
    ORDER_CANCEL,
    SCOPES,
    has_consent_form,
    result_heading,
    screenshot,
    serve_site,
    sign_in,
)
from tests.support.chromium import WAIT

ONLY = "Only order A-1001"


def conditions_of(where: WebElement, scope: str) -> list[str]:
    """The conditions listed under the scope `scope` (its description's list item)."""
    lists = where.find_elements(By.CSS_SELECTOR, f"ul.conditions[data-scope='{scope}'] li")
    return [item.text for item in lists]


@pytest.mark.timeout(60)
def test_the_result_and_agents_pages_say_the_conditions_that_were_allowed(
    browser: WebDriver, tmp_path: Path
) -> None:
    with serve_site(tmp_path, detail_types=(ORDER_CANCEL,)) as site:
        sign_in(browser, site)
        asked = site.device_authorization(
            "orders:read orders:cancel", [{"type": CANCEL, "order": "A-1001"}]
        )
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        page = browser.find_element(By.TAG_NAME, "main")
        assert conditions_of(page, "orders:cancel") == [ONLY]

        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        assert result_heading(browser).text == "Connected"
        page = browser.find_element(By.TAG_NAME, "main")
        screenshot(browser, "conditions-result.png")
        assert SCOPES["orders:cancel"] in page.text
        assert conditions_of(page, "orders:cancel") == [ONLY]
        assert conditions_of(page, "orders:read") == []
        token = site.poll_token(asked["device_code"])
        assert token["authorization_details"] == [{"type": CANCEL, "order": "A-1001"}]

        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        card = WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "section.agent")
        )
        screenshot(browser, "conditions-connected-agents.png")
        assert conditions_of(card, "orders:cancel") == [ONLY]


@pytest.mark.timeout(60)
def test_an_unticked_scope_takes_its_conditions_with_it(browser: WebDriver, tmp_path: Path) -> None:
    with serve_site(tmp_path, detail_types=(ORDER_CANCEL,)) as site:
        sign_in(browser, site)
        asked = site.device_authorization(
            "orders:read orders:cancel", [{"type": CANCEL, "order": "A-1001"}]
        )
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        browser.find_element(By.CSS_SELECTOR, "input[value='orders:cancel']").click()
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        assert result_heading(browser).text == "Connected"
        text = browser.find_element(By.TAG_NAME, "main").text
        assert ONLY not in text
        assert SCOPES["orders:cancel"] not in text
        assert SCOPES["orders:read"] in text


@pytest.mark.timeout(60)
def test_a_step_up_says_the_conditions_the_agent_already_holds(
    browser: WebDriver, tmp_path: Path
) -> None:
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path, detail_types=(ORDER_CANCEL,)) as site:
        sign_in(browser, site)
        first = site.device_authorization("orders:cancel", [{"type": CANCEL, "order": "A-1001"}])
        browser.get(first["verification_uri_complete"])
        wait.until(has_consent_form)
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        assert result_heading(browser).text == "Connected"
        site.poll_token(first["device_code"])

        # Step-up: the page says what the agent can already do, conditions included.
        step_up = site.device_authorization("orders:track")
        browser.get(step_up["verification_uri_complete"])
        wait.until(has_consent_form)
        screenshot(browser, "conditions-step-up.png")
        already = browser.find_element(By.CSS_SELECTOR, "form > ul")
        assert SCOPES["orders:cancel"] in already.text
        assert conditions_of(already, "orders:cancel") == [ONLY]
