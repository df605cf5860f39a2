"""The connected agents page in a real headless Chromium (same-app mode, ASGI host app).

Jane connects her personal agent through the consent page, follows the result page's link to
her connected agents, sees the agent with what it can do and when it was last used, and
revokes it; the agent's next request fails. Screenshots are saved and checked.
"""

from __future__ import annotations

import struct
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import WAIT
from tests.browser.test_consent_page import (
    AGENT_NAME,
    BRAND_ID,
    BRAND_NAME,
    PA_ISSUER,
    SCOPES,
    Site,
    has_consent_form,
    screenshot,
    serve_site,
    sign_in,
)
from tests.support.agent import user_message


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


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

        # Keyboard first: the first Tab stop is the Revoke button of the only agent.
        browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        focused = browser.switch_to.active_element
        assert focused.text == f"Revoke {AGENT_NAME}"
        focused.send_keys(Keys.ENTER)

        notice = wait.until(EC.presence_of_element_located((By.ID, "notice")))
        assert notice.text == f"{AGENT_NAME} can no longer act for you."
        assert browser.find_elements(By.CSS_SELECTOR, "section.agent") == []
        assert "No personal agent can act for you" in browser.find_element(By.ID, "no-agents").text
        screenshot(browser, "connected-agents-after-revoke.png")

        # Revocation takes effect on the agent's very next request.
        refused = agent_send(site, token)
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]
