"""pactmw's Django admin lists read at a laptop's width, in a real headless Chromium: at
1280 px and at 1024 px, with Django's navigation sidebar open and the filters beside the
table, no list scrolls sideways and every row is one line, with the ids, agents and scopes
real state holds (time-ordered grant ids, long issuer URLs, several scopes, UUID context ids).

The site is made by tests/adapters/django_sites.py, as for the admin tests: a `django-admin
startproject` set up as docs/getting-started/django.md says, served by `runserver`, the
superuser signed in through the admin's own login form. Each page's screenshot is kept under
test-artifacts/browser/ (admin-MODEL-list-WIDTH.png, admin-MODEL-change-WIDTH.png).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from tests.adapters.django_sites import (
    PASSWORD,
    TEST_SETTINGS,
    guide_block,
    new_site,
    runserver,
    shell,
)
from tests.browser.support import screenshot
from tests.support.chromium import WAIT

LONG_ISSUER = "https://assistant.personal-agents.example.com/tenants/eu-west-1/agents"
MODELS = ("registeredagent", "agentoverride", "grant", "conversation", "messageid")

#: What a site holds after a few weeks: grants with the ids the Provider mints, several
#: scopes, a long issuer; agents with long issuer and JWKS URLs, one of them blocked;
#: conversations with their UUID context ids, an agent's opaque user id and a bound account;
#: Poppy message ids as the SDK's agents make them, each held by its conversation.
STATE = f"""
from pactmw.provider.delegated._codes import new_grant_id
issuers = [{LONG_ISSUER!r} + f"/{{n}}" for n in range(3)] + ["https://pa.example"]
for n, issuer in enumerate(issuers):
    store.add_agent(issuer=issuer, name=f"Assistant number {{n}} of the household",
        jwks_uri=issuer + "/.well-known/jwks.json", now=now - n * 86400)
store.set_agent_enabled(issuers[0], False)
store.set_agent_enabled(issuers[1], True)
scopes = ("orders:read", "orders:cancel", "returns:create", "profile:read", "addresses:read")
for n, issuer in enumerate(issuers * 2):
    grant = store.upsert_grant(grant_id=new_grant_id(now - n), brand_id="shop",
        account=f"customer-{{n:06d}}@shop.example", client_id=issuer,
        pa_sub=f"user-{{n}}-7f3c9a1e4b2d", scopes=scopes[: 1 + n % 5], now=now - n * 3600,
        expires_at=now + (n - 2) * 86400 * 30)
    if n == 5:
        store.revoke_grant(grant.grant_id, now=now)
for n, issuer in enumerate(issuers * 2):
    ctx = store.create_conversation(brand_id="shop", issuer=issuer,
        sub=f"agent-user-{{n}}-0c0ffee0c0ffee", now=now - n * 600)
    store.bind_account(ctx, f"customer-{{n:06d}}@shop.example")
    store.claim_message(context_id=ctx, message_id=f"msg-{{n}}-6b0e2f1d", text="Hello",
        now=now, lease_seconds=30)
    if n % 3 == 0:
        store.close_conversation(ctx)
for n, issuer in enumerate(issuers * 2):
    owner = dict(brand_id="shop", issuer="poppy " + issuer, sub=f"pairwise-user-{{n}}-9d2c41a7")
    message_id = f"msg_{{n}}Xk2vQ9pLr7TzYw4bN8cMfA"
    ctx = store.start_conversation(**owner, account=None, message_id=message_id,
        text="Hello", now=now - n * 600)
    store.claim_message_id(**owner, message_id=message_id, context_id=ctx)
"""


@pytest.fixture
def admin_site(tmp_path: Path) -> Iterator[str]:
    """The guide's admin site with `STATE`, served; its base URL."""
    settings_tail = guide_block("the end of mysite/settings.py") + TEST_SETTINGS
    env = new_site(tmp_path, settings_tail, guide_block("the end of mysite/urls.py"))
    shell(tmp_path, env, STATE)
    port, server = runserver(tmp_path, env, "runserver")
    with server:
        yield f"http://127.0.0.1:{port}"


def sign_in(browser: WebDriver, base: str) -> None:
    browser.get(f"{base}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys("ops")
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "user-tools")))


def show(browser: WebDriver, url: str, width: int, height: int) -> None:
    browser.set_window_size(width, height)
    browser.get(url)
    WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "content")))
    assert browser.execute_script("return window.innerWidth") == width


#: For each row of the results table: how many lines the tallest of its cells takes (the
#: distinct tops of its text's line boxes).
ROW_LINES = """
return [...document.querySelectorAll('#result_list tbody tr')].map(row => {
  let most = 0;
  for (const cell of row.cells) {
    const tops = new Set();
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const rect of range.getClientRects()) tops.add(Math.round(rect.top));
    }
    most = Math.max(most, tops.size);
  }
  return [row.querySelector('th').textContent.trim(), most];
});
"""


#: The cells cut short that should not be: any header (a column's name is read whole, and
#: the lists' stylesheet cuts it inside the cell, in its `.text`), and a row's cell whose
#: whole value is not in a title (the shown text may lose a leading "…").
CUT = """
const cut = cell => cell.scrollWidth > cell.clientWidth + 1;
const hidden = [];
for (const cell of document.querySelectorAll('#result_list thead th, #result_list thead .text'))
  if (cut(cell))
    hidden.push(`header ${cell.className} (${cell.scrollWidth} > ${cell.clientWidth} px)`);
for (const cell of document.querySelectorAll('#result_list tbody th, #result_list tbody td')) {
  const titled = cell.querySelector('[title]');
  const shown = cell.textContent.trim().replace(/^\u2026/, '');
  if (cut(cell) && !(titled && titled.title.endsWith(shown)))
    hidden.push(`${cell.className} ${shown} (${cell.scrollWidth} > ${cell.clientWidth} px)`);
}
return hidden;
"""


def layout_problems(browser: WebDriver, model: str) -> dict[str, Any]:
    """What is wrong with the list on screen, beside the open sidebar and the filters: a
    results box that scrolls sideways, rows of several lines, cells cut without a title."""
    problems: dict[str, Any] = {}
    sidebar_open = "return getComputedStyle(document.getElementById('nav-sidebar')).display"
    assert browser.execute_script(sidebar_open) != "none"
    rows: list[Any] = browser.execute_script(ROW_LINES)
    assert len(rows) >= 2, (model, rows)
    sizes: dict[str, int] = browser.execute_script(
        "const box = document.querySelector('#changelist .results');"
        "return {scroll: box.scrollWidth, client: box.clientWidth};"
    )
    if sizes["scroll"] > sizes["client"]:
        problems["scrolls sideways"] = sizes
    tall = {key: lines for key, lines in rows if lines > 1}
    if tall:
        problems["rows of several lines"] = tall
    hidden: list[str] = browser.execute_script(CUT)
    if hidden:
        problems["cut without a title"] = hidden
    return problems


@pytest.mark.timeout(300)
def test_the_admin_lists_are_one_line_a_row_without_scrolling_sideways(
    browser: WebDriver, admin_site: str
) -> None:
    sign_in(browser, admin_site)
    problems: dict[str, Any] = {}  # every list's at each width, after every screenshot
    for model in MODELS:
        changelist = f"{admin_site}/admin/pactmw/{model}/"
        for width, height in ((1024, 768), (1280, 900)):
            show(browser, changelist, width, height)
            screenshot(browser, f"admin-{model}-list-{width}.png")
            for problem, seen in layout_problems(browser, model).items():
                problems[f"{model} at {width} px: {problem}"] = seen
        # Each row's page, from its link in the list.
        link = browser.find_element(By.CSS_SELECTOR, "#result_list tbody tr a")
        change = str(link.get_attribute("href"))
        for width, height in ((1024, 768), (1280, 900)):
            show(browser, change, width, height)
            screenshot(browser, f"admin-{model}-change-{width}.png")
    assert problems == {}
