"""An error page of the consent or connected agents pages leads on: to the code entry page
from the consent pages, to the connected agents page from itself (the 429 page too). A
person stuck on one had to guess the URL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.provider.ratelimit import RateLimit
from tests.delegated.support import Env, assert_page_headers, delegated_brand, new_sub, serve

CODE_ENTRY = "Enter a code"
AGENTS = "Go to your connected agents page"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    store = f"sqlite:///{tmp_path_factory.mktemp('errors')}/pactmw.db"
    with serve(store, [delegated_brand("acme", "Acme", [])]) as running:
        yield running


def links(answer: httpx.Response) -> dict[str, str]:
    """The links of an error page: text -> href."""
    assert_page_headers(answer)
    assert "<h1>That did not work</h1>" in answer.text, answer.text
    found = re.findall(r'<a href="([^"]*)">([^<]*)</a>', answer.text)
    return {unescape(text): unescape(href) for href, text in found}


def test_a_consent_error_leads_to_the_code_entry_page(env: Env) -> None:
    decision = env.oauth("acme", "consent/decision")
    expired = env.decide(decision, "stale", ["orders:read"], user="alice")
    assert expired.status_code == 400
    assert links(expired) == {CODE_ENTRY: env.oauth("acme", "consent")}
    # The code entry page it leads to is one the person can use.
    entry = env.get(env.oauth("acme", "consent"), user="alice")
    assert 'name="user_code"' in entry.text
    _, action, session = env.open_consent("acme", "orders:read", sub=new_sub())
    elsewhere = env.decide(
        action, session, ["orders:read"], user="alice", headers={"origin": "https://evil.example"}
    )
    assert elsewhere.status_code == 403
    assert links(elsewhere) == {CODE_ENTRY: env.oauth("acme", "consent")}


def test_a_connected_agents_error_leads_to_that_page_again(env: Env) -> None:
    agents = env.oauth("acme", "agents")
    expired = env.post(agents, user="alice", data={"session": "x", "action": "revoke"})
    assert expired.status_code == 400
    assert links(expired) == {AGENTS: agents}
    unknown = env.post(agents, user="alice", content=b"session=\xff")
    assert links(unknown) == {AGENTS: agents}


def test_the_rate_limited_page_leads_back_to_the_page_it_refused(tmp_path: Path) -> None:
    store: Any = f"sqlite:///{tmp_path}/limited.db"
    with serve(
        store, [delegated_brand("acme", "Acme", [])], consent_rate_limit=RateLimit(per_agent=2)
    ) as env:
        for page, link in (("consent", CODE_ENTRY), ("agents", AGENTS)):
            url = env.oauth("acme", page)
            # Two pages a window: the third is refused, or a later one should a window
            # boundary fall in between (bounded).
            for _ in range(6):
                answer = env.get(url, user="alice")
                if answer.status_code == 429:
                    break
            assert answer.status_code == 429, answer.text
            assert links(answer) == {link: url}
