"""Every page a person can reach, audited by axe-core in a real headless Chromium.

Each page state (code entry, with and without an error; consent, first time and a step-up
with what the agent already holds and conditions; the result pages: approved, denied, a
declined step-up, a request already answered, no decision to show; the connected agents page
with agents, empty, and after a revoke; an error page; the rate-limited page) is loaded as a
person reaches it, then axe-core checks it against the WCAG 2.0 and 2.1 level A and AA rules,
on a desktop window and on a phone (375 px wide). Any violation fails the test, listed with
the page state, the rule, the elements and axe's reasons.

Two checks of WCAG 2.1 AA that axe-core cannot make are made on every page state as well: a
visible focus indicator on each Tab stop (2.4.7), and no sideways scrolling at 320 px (1.4.10).
What a screen reader is told about a consent checkbox (its name and description, from
Chromium's accessibility tree) is checked too: a condition on a scope must reach it.

axe-core comes from the `axe-playwright-python` dev dependency, which ships a recent
`axe.min.js` (only that file is used here: Selenium injects it, Playwright is never started).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from pactmw.provider.ratelimit import RateLimit
from tests.browser.support import (
    ANSWERED,
    BRAND_ID,
    CANCEL,
    ORDER_CANCEL,
    PA_ISSUER,
    SCOPES,
    axe_violations,
    has_consent_form,
    open_consent,
    press,
    result_heading,
    revoke,
    screenshot,
    serve_site,
    sign_in,
    two_tabs_on_the_form,
)
from tests.support.chromium import WAIT
from tests.support.parties import AGENT_NAME

#: A desktop window (the `browser` fixture's width) and a phone.
WIDTHS = (1024, 375)
#: WCAG 1.4.10 (Reflow): content reads without scrolling sideways at 320 CSS px.
REFLOW_WIDTH = 320
#: Enough Tab presses to reach every control of any of these pages and come back round.
TAB_STOPS = 12


def focus_without_indicator(browser: WebDriver) -> list[str]:
    """Tab from the top through the page until focus comes round again: each element that
    took focus and shows no focus indicator (no outline, no box shadow)."""
    browser.execute_script("document.activeElement && document.activeElement.blur()")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    missing: list[str] = []
    first: str | None = None
    for _ in range(TAB_STOPS):
        focused = browser.switch_to.active_element
        html, shown = browser.execute_script(
            """
            const e = arguments[0], s = getComputedStyle(e);
            const outline = s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 1;
            return [e.outerHTML.slice(0, 100), outline || s.boxShadow !== "none"];
            """,
            focused,
        )
        if html == first or focused.tag_name == "body":
            break  # round again, or out of the page (a page without controls: at once)
        first = first or html
        if not shown:
            missing.append(html)
        focused.send_keys(Keys.TAB)
    return missing


def readable(state: str, violations: list[dict[str, Any]]) -> str:
    """One block per violated rule: what it is, and each element with axe's reasons."""
    lines = []
    for violation in violations:
        lines.append(
            f"{state}: {violation['id']} ({violation['impact']}, "
            f"{len(violation['nodes'])} elements): {violation['help']}"
        )
        for node in violation["nodes"]:
            lines.append(f"    {' '.join(map(str, node['target']))}: {node['html'][:160]}")
            for check in node["any"] + node["all"] + node["none"]:
                lines.append(f"        - {check['message']}")
    return "\n".join(lines)


class Audit:
    """The violations found on each page state, asserted on together at the end, so that one
    failing page does not hide the others."""

    def __init__(self, browser: WebDriver) -> None:
        self.browser = browser
        self.found: dict[str, list[dict[str, Any]]] = {}
        #: What the checks beyond axe-core found, one line each.
        self.problems: list[str] = []

    def check(self, state: str) -> None:
        """Audit the page shown now at each width (then back to the desktop width)."""
        for width in WIDTHS:
            self.browser.set_window_size(width, 900)
            assert self.browser.execute_script("return window.innerWidth") == width
            name = f"{state} @ {width}px"
            screenshot(self.browser, f"a11y-{state}-{width}.png")
            violations = axe_violations(self.browser)
            if violations:
                self.found[name] = violations
        self.browser.set_window_size(REFLOW_WIDTH, 900)
        sizes = self.browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert sizes[1] == REFLOW_WIDTH
        if sizes[0] > sizes[1]:
            self.problems.append(f"{state}: {sizes[0]} px wide at {REFLOW_WIDTH} px (1.4.10)")
        self.browser.set_window_size(WIDTHS[0], 900)
        for html in focus_without_indicator(self.browser):
            self.problems.append(f"{state}: no visible focus on {html} (2.4.7)")

    def assert_clean(self) -> None:
        report = [readable(state, found) for state, found in self.found.items()]
        if report:
            report.insert(0, "axe-core found WCAG 2.1 A/AA violations:")
        if self.problems:
            report += ["Beyond axe-core:", *self.problems]
        if report:
            pytest.fail("\n".join(report))


def allow(browser: WebDriver) -> None:
    browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()


def test_axe_finds_a_violation_where_there_is_one(browser: WebDriver) -> None:
    """Control: the audit is real; a page with an unlabelled field and no lang fails it."""
    browser.get("data:text/html,<!doctype html><title>x</title><main><input></main>")
    ids = {violation["id"] for violation in axe_violations(browser)}
    assert {"html-has-lang", "label"} <= ids, ids


@pytest.mark.timeout(120)
def test_code_entry_pages(browser: WebDriver, tmp_path: Path) -> None:
    audit = Audit(browser)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/consent")
        field = WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "user_code"))
        audit.check("code-entry")

        field.send_keys("BCDF-GHJK")
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "code-error")))
        audit.check("code-entry-error")
    audit.assert_clean()


@pytest.mark.timeout(180)
def test_consent_result_and_connected_agents_pages(browser: WebDriver, tmp_path: Path) -> None:
    """First consent (with conditions), approved; a step-up (what is held, with conditions),
    declined; the connected agents page with the agent, then after revoking it."""
    audit = Audit(browser)
    with serve_site(tmp_path, detail_types=(ORDER_CANCEL,)) as site:
        sign_in(browser, site)
        first = site.device_authorization(
            "orders:read orders:cancel", [{"type": CANCEL, "order": "A-1001"}]
        )
        browser.get(first["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        assert browser.find_elements(By.CSS_SELECTOR, "fieldset ul.conditions li")
        audit.check("consent-first")

        allow(browser)
        assert result_heading(browser).text == "Connected"
        audit.check("result-approved")
        site.poll_token(first["device_code"])

        step_up = site.device_authorization("orders:track")
        browser.get(step_up["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        assert browser.find_elements(By.CSS_SELECTOR, "form > ul ul.conditions li")
        audit.check("consent-step-up")

        browser.find_element(By.CSS_SELECTOR, "input[type=checkbox][name=scope]").click()
        allow(browser)
        assert result_heading(browser).text == "Nothing new allowed"
        audit.check("result-step-up-declined")

        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        card = WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "section.agent")
        )
        audit.check("connected-agents")

        revoke(browser, card, "Demo PA")
        assert browser.find_elements(By.ID, "no-agents")
        audit.check("connected-agents-after-revoke")
    audit.assert_clean()


@pytest.mark.timeout(120)
def test_denied_result_empty_agents_and_error_pages(browser: WebDriver, tmp_path: Path) -> None:
    audit = Audit(browser)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        asked = site.device_authorization("orders:read")
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=deny]").click()
        assert result_heading(browser).text == "Not connected"
        audit.check("result-denied")

        # The result page of a decision already taken (a second form, Allow pressed there).
        later = site.device_authorization("orders:read")
        first, second = two_tabs_on_the_form(browser, later["verification_uri_complete"])
        browser.switch_to.window(first)
        assert press(browser, "deny") == "Not connected"
        browser.switch_to.window(second)
        assert press(browser, "allow") == "Not connected"
        assert ANSWERED in browser.find_element(By.TAG_NAME, "body").text
        audit.check("result-already-answered")
        browser.close()
        browser.switch_to.window(first)

        # The result page without a decision to show (an old link): "Your choice".
        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/connected")
        assert result_heading(browser).text == "Your choice"
        audit.check("result-unknown")

        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "no-agents")))
        audit.check("connected-agents-empty")

        # A consent page whose session no longer reads (as after an expiry): the error page.
        again = site.device_authorization("orders:read")
        browser.get(again["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        browser.execute_script("document.querySelector('input[name=session]').value = 'stale'")
        allow(browser)
        heading = WebDriverWait(browser, WAIT).until(
            lambda d: not has_consent_form(d) and d.find_element(By.TAG_NAME, "h1")
        )
        assert heading.text == "That did not work"
        message = browser.find_element(By.TAG_NAME, "p").text
        assert message == "This consent page is no longer valid. Start again."
        audit.check("error")
        # The error page leads on: to the code entry page, where the flow starts again.
        browser.find_element(By.LINK_TEXT, "Enter a code").click()
        WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.ID, "user_code"))
        assert browser.current_url == f"{site.base}/a2a/{BRAND_ID}/oauth/consent"
    audit.assert_clean()


@pytest.mark.timeout(120)
def test_rate_limited_page(browser: WebDriver, tmp_path: Path) -> None:
    audit = Audit(browser)
    with serve_site(tmp_path, consent_rate_limit=RateLimit(per_agent=3, window=60)) as site:
        sign_in(browser, site)
        code_entry = f"{site.base}/a2a/{BRAND_ID}/oauth/consent"
        # Three pages a window: the fourth is refused, or the one after it should a window
        # boundary fall in between (bounded).
        for _ in range(8):
            browser.get(code_entry)
            text = browser.find_element(By.TAG_NAME, "body").text
            if "Too many requests came from your network." in text:
                break
        else:
            pytest.fail(f"never rate limited: {text}")
        audit.check("rate-limited")
        # A way on once the minute is over, not a URL to guess.
        link = browser.find_element(By.LINK_TEXT, "Enter a code")
        assert link.get_attribute("href") == code_entry
    audit.assert_clean()


def accessible(browser: WebDriver, role: str) -> list[tuple[str, str]]:
    """What Chromium's accessibility tree (what a screen reader reads) says of each element
    of `role` on the page, in order: (its name, its description, "" without one)."""
    tree: dict[str, Any] = browser.execute_cdp_cmd("Accessibility.getFullAXTree", {})
    return [
        (node["name"]["value"].strip(), node.get("description", {}).get("value", ""))
        for node in tree["nodes"]
        if node.get("role", {}).get("value") == role and not node.get("ignored")
    ]


def accessible_checkboxes(browser: WebDriver) -> dict[str, str]:
    """Each checkbox's name, and its description."""
    return dict(accessible(browser, "checkbox"))


@pytest.mark.timeout(60)
def test_a_consent_checkbox_tells_a_screen_reader_its_conditions(
    browser: WebDriver, tmp_path: Path
) -> None:
    """Shown under its scope's checkbox, "Only order A-1001" narrows what Allow gives; someone
    who Tabs from checkbox to checkbox with a screen reader hears the checkbox alone, so the
    condition must be its description, not only text placed near it (WCAG 1.3.1)."""
    with serve_site(tmp_path, detail_types=(ORDER_CANCEL,)) as site:
        sign_in(browser, site)
        asked = site.device_authorization(
            "orders:read orders:cancel",
            [{"type": CANCEL, "order": "A-1001"}, {"type": CANCEL, "order": "B-2002"}],
        )
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        assert accessible_checkboxes(browser) == {
            SCOPES["orders:read"]: "",
            SCOPES["orders:cancel"]: "Only order A-1001 Only order B-2002",
        }


def accessible_buttons(browser: WebDriver) -> list[tuple[str, str]]:
    """Each button's (name, description)."""
    return accessible(browser, "button")


@pytest.mark.timeout(90)
def test_a_revoke_button_names_its_agent_once(browser: WebDriver, tmp_path: Path) -> None:
    """A screen reader says a button's name, then its description: "Revoke Demo PA", then the
    agent's name again said nothing new. The description now tells which of the agent's users
    it is for and where the agent comes from (two cards may show the same name)."""
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        open_consent(browser, site, "orders:read")
        allow(browser)
        assert result_heading(browser).text == "Connected"
        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "section.agent")
        )
        # Then which user of the agent it is for, and where the agent comes from.
        assert accessible_buttons(browser) == [(f"Revoke {AGENT_NAME}", f"pa-user-1 {PA_ISSUER}")]


def accessible_regions(browser: WebDriver) -> list[str]:
    """The names of the page's regions (landmarks), white space folded."""
    return [" ".join(name.split()) for name, _ in accessible(browser, "region")]


@pytest.mark.timeout(120)
def test_two_users_of_one_agent_are_two_cards_a_person_tells_apart(
    browser: WebDriver, tmp_path: Path
) -> None:
    """One personal agent, two of its users (say a family's shared assistant), both approved
    by one person: two grants. Each card says which user of the agent it is for, in words and
    in its accessible name, so the person knows which one a Revoke stops (axe's
    landmark-unique flagged two regions of one name)."""
    audit = Audit(browser)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        for sub in ("pa-user-1", "pa-user-2"):
            open_consent(browser, site, "orders:read", sub=sub)
            allow(browser)
            assert result_heading(browser).text == "Connected"
        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        WebDriverWait(browser, WAIT).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "section.agent")) == 2
        )
        cards = browser.find_elements(By.CSS_SELECTOR, "section.agent")
        subs = ("pa-user-1", "pa-user-2")
        shown = sorted([sub for sub in subs if sub in card.text] for card in cards)
        assert shown == [["pa-user-1"], ["pa-user-2"]]
        assert all("Your user ID at the agent" in card.text for card in cards)
        regions = accessible_regions(browser)
        assert len(regions) == 2, regions
        assert len(set(regions)) == 2, regions
        assert all(AGENT_NAME in name for name in regions), regions
        audit.check("connected-agents-two-users")
    audit.assert_clean()


def dark_background(browser: WebDriver) -> bool:
    """The page is drawn dark: light text (each of R, G, B above 190) on a dark canvas (the
    used colour scheme is dark, so the browser's canvas, fields and scrollbars are dark)."""
    text, scheme = browser.execute_script(
        "return [getComputedStyle(document.body).color,"
        " getComputedStyle(document.documentElement).colorScheme]"
    )
    channels = [int(part) for part in text[text.index("(") + 1 : -1].split(",")[:3]]
    return min(channels) > 190 and "dark" in scheme


@pytest.mark.timeout(180)
def test_the_pages_follow_a_dark_colour_scheme(browser: WebDriver, tmp_path: Path) -> None:
    """A person whose system is dark met a white page at night, the link still the light
    default blue: the pages now follow `prefers-color-scheme`, and pass the audit there too
    (axe's contrast rules read the dark colours)."""
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
    )
    audit = Audit(browser)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/consent")
        field = WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "user_code"))
        assert dark_background(browser)
        audit.check("dark-code-entry")
        field.send_keys("BCDF-GHJK")
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "code-error")))
        audit.check("dark-code-entry-error")

        asked = site.device_authorization("orders:read")
        browser.get(asked["verification_uri_complete"])
        WebDriverWait(browser, WAIT).until(has_consent_form)
        assert dark_background(browser)
        audit.check("dark-consent")
        allow(browser)
        assert result_heading(browser).text == "Connected"
        assert dark_background(browser)
        audit.check("dark-result-approved")
        site.poll_token(asked["device_code"])

        browser.get(f"{site.base}/a2a/{BRAND_ID}/oauth/agents")
        WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.CSS_SELECTOR, "section"))
        assert dark_background(browser)
        audit.check("dark-connected-agents")
    audit.assert_clean()
