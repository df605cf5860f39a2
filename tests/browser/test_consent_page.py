"""The PACT Delegated consent page, used by a person in a real headless Chromium.

A Provider (sqlite store) runs on uvicorn inside a small host app with a real login page and a
signed session cookie; the personal agent's side (device authorization, token polling) is
httpx. A second server on another port is "another origin" that tries to frame the page.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.support import (
    BRAND_ID,
    BRAND_NAME,
    COOKIE,
    FRAMER,
    PASSWORD,
    SCOPES,
    UNTICKED,
    USER,
    USERNAME,
    fill_login,
    has_consent_form,
    open_consent,
    result_heading,
    screenshot,
    serve_site,
    sign_in,
)
from tests.support.chromium import WAIT
from tests.support.parties import AGENT_NAME
from tests.support.servers import uvicorn_server

# -- tests --------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_person_signs_in_and_allows_some_scopes(browser: WebDriver, tmp_path: Path) -> None:
    # Regression: consent pages once sent `Referrer-Policy: no-referrer`, so Chromium posted
    # the decision with `Origin: null` and the Origin check refused every real Allow (403).
    variant = "consent"
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        authorization = site.device_authorization()
        link = authorization["verification_uri_complete"]
        consent_path = urlsplit(link).path

        # Signed out: the consent link sends the person to the host app's login page.
        browser.get(link)
        wait.until(EC.presence_of_element_located((By.ID, "login-form")))
        here = urlsplit(browser.current_url)
        assert (here.path, parse_qs(here.query)["next"]) == ("/login", [link])
        fill_login(browser)

        # Signed in: back on the consent page of this very code.
        wait.until(lambda d: urlsplit(d.current_url).path == consent_path and has_consent_form(d))
        assert browser.current_url == link
        heading = browser.find_element(By.TAG_NAME, "h1").text
        assert AGENT_NAME in heading
        assert BRAND_NAME in heading
        assert USER.label in browser.find_element(By.TAG_NAME, "body").text
        labels = [label.text.strip() for label in browser.find_elements(By.CSS_SELECTOR, "label")]
        assert labels == list(SCOPES.values())
        boxes = {
            box.get_attribute("value"): box
            for box in browser.find_elements(By.CSS_SELECTOR, "input[type=checkbox][name=scope]")
        }
        assert list(boxes) == list(SCOPES)
        assert all(box.is_selected() for box in boxes.values())
        boxes[UNTICKED].click()
        assert not boxes[UNTICKED].is_selected()
        assert sum(box.is_selected() for box in boxes.values()) == len(SCOPES) - 1
        screenshot(browser, f"{variant}-consent-page.png")

        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        wait.until(lambda d: urlsplit(d.current_url).path != consent_path)
        heading = wait.until(EC.presence_of_element_located((By.TAG_NAME, "h1"))).text
        text = browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, f"{variant}-after-allow.png")
        assert "did not come from the consent page" not in text
        assert urlsplit(browser.current_url).path == f"/a2a/{BRAND_ID}/oauth/connected"
        assert heading == "Connected"
        assert browser.title == "Personal agent: Connected"
        granted = [scope for scope in SCOPES if scope != UNTICKED]
        # The person reads what the agent can now do, in the Brand's words, not scope ids.
        assert all(SCOPES[scope] in text for scope in granted)
        assert SCOPES[UNTICKED] not in text
        assert not any(scope in text for scope in SCOPES)
        assert f"{AGENT_NAME} can now do this for you at {BRAND_NAME} until" in text

        token = site.poll_token(authorization["device_code"])
        assert sorted(token["scope"].split()) == sorted(granted)  # a set (RFC 6749 §3.3)


@pytest.mark.timeout(60)
def test_a_declined_step_up_says_what_the_agent_still_can_do(
    browser: WebDriver, tmp_path: Path
) -> None:
    """Issue 15 point 2: untick everything on a step-up; the earlier grant stays, and the
    result page says so (it used to say "Nothing was shared ... cannot act for you")."""
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        first = open_consent(browser, site, "orders:read")
        text = browser.find_element(By.TAG_NAME, "body").text
        assert "This approval lasts 30 days." in text
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        wait.until(lambda d: urlsplit(d.current_url).path.endswith("/oauth/connected"))
        site.poll_token(first["device_code"])

        # Step-up: the agent asks to cancel orders; the page says what it already holds.
        open_consent(browser, site, "orders:cancel")
        text = browser.find_element(By.TAG_NAME, "body").text
        assert f"{AGENT_NAME} can already do this for you" in text
        assert SCOPES["orders:read"] in text
        box = browser.find_element(By.CSS_SELECTOR, "input[type=checkbox][name=scope]")
        box.click()  # untick the only new scope
        assert not box.is_selected()
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        heading = result_heading(browser)
        assert heading.text == "Nothing new allowed"
        text = browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, "step-up-declined.png")
        assert "Your earlier approval still stands." in text
        assert "cannot act for you" not in text
        assert f"{AGENT_NAME} can now do this for you at {BRAND_NAME} until" in text
        assert SCOPES["orders:read"] in text
        assert SCOPES["orders:cancel"] not in text


@pytest.mark.timeout(60)
def test_a_declined_request_with_nothing_live_says_nothing_was_shared(
    browser: WebDriver, tmp_path: Path
) -> None:
    """Deny with nothing approved before: the page says nothing was shared and offers
    nothing to revoke, only where to see every agent that can act for the person."""
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        open_consent(browser, site, "orders:read")
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=deny]").click()
        heading = result_heading(browser)
        assert heading.text == "Not connected"
        text = browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, "declined-nothing-live.png")
        assert f"Nothing was shared. {AGENT_NAME} cannot act for you at {BRAND_NAME}." in text
        assert "revoke" not in text.lower()
        assert SCOPES["orders:read"] not in text
        browser.find_element(By.LINK_TEXT, "connected agents page").click()
        wait.until(EC.presence_of_element_located((By.ID, "no-agents")))
        assert urlsplit(browser.current_url).path == f"/a2a/{BRAND_ID}/oauth/agents"


@pytest.mark.timeout(60)
def test_consent_page_is_not_rendered_in_a_frame_of_another_origin(
    browser: WebDriver, tmp_path: Path
) -> None:
    with serve_site(tmp_path) as site, uvicorn_server(FRAMER) as other:
        assert urlsplit(other).netloc != urlsplit(site.base).netloc
        sign_in(browser, site)
        link = site.device_authorization()["verification_uri_complete"]
        # Top level, the very same URL shows the consent form to this person...
        browser.get(link)
        WebDriverWait(browser, WAIT).until(has_consent_form)
        # selenium's get_log has no annotations.
        browser.get_log("browser")  # type: ignore[no-untyped-call]  # drop what came before

        def framed(src: str) -> tuple[str, bool]:
            """Load `src` in an iframe of the other origin; (frame's URL, consent form in it)."""
            browser.get(f"{other}/frame?{urlencode({'src': src})}")
            frame = browser.find_element(By.ID, "victim")
            WebDriverWait(browser, WAIT).until(lambda _: frame.get_attribute("data-loaded"))
            browser.switch_to.frame(frame)
            try:
                return browser.execute_script("return location.href"), has_consent_form(browser)
            finally:
                browser.switch_to.default_content()

        # ...but framed by another origin, Chromium refuses to render it.
        url, form = framed(link)
        screenshot(browser, "framed-consent-page.png")
        assert url.startswith("chrome-error://"), url
        assert not form
        entries = browser.get_log("browser")  # type: ignore[no-untyped-call]  # as above
        logs = " ".join(entry["message"] for entry in entries)
        assert "frame-ancestors 'none'" in logs or "X-Frame-Options" in logs, logs

        # Control: the same markup without the anti-framing headers does render in the frame.
        control = f"{site.base}/control"
        url, form = framed(control)
        screenshot(browser, "framed-control-page.png")
        assert url == control
        assert form


def test_login_only_returns_to_this_site_or_the_consent_page(tmp_path: Path) -> None:
    """The test's own login page must not be an open redirect."""
    with serve_site(tmp_path) as site:
        consent = f"{site.oauth}/consent?user_code=BCDF-GHJK"
        good = {"username": USERNAME, "password": PASSWORD}
        for target in (consent, "/", "/somewhere?x=1"):
            response = httpx.post(f"{site.base}/login", data={**good, "next": target})
            assert response.status_code == 303, target
            assert response.headers["location"] == target
            assert COOKIE in response.cookies
        for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "x"):
            response = httpx.post(f"{site.base}/login", data={**good, "next": target})
            assert response.status_code == 400, target
        response = httpx.post(f"{site.base}/login", data={**good, "password": "no", "next": "/"})
        assert response.status_code == 401
        assert response.cookies.get(COOKIE) is None
