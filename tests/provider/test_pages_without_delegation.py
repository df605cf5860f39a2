"""A Brand that offers no delegation (no `delegation` table), its person-facing page paths
opened in a browser: an old consent link, a bookmarked connected agents page.

They answered an empty 404, which a browser shows as a blank page. They answer the pages' own
error page (HTML, 404) saying the service takes no agent authorizations, on every adapter. The
agent-facing paths of its (absent) authorization server, an unknown Brand's pages and any
other unmatched path keep the bare 404 of routing.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.page_sites import ADAPTERS, BRAND, page_site

#: The person-facing pages a Brand with delegation serves: path below the Brand, method.
PAGES = (
    ("oauth/consent", "GET"),
    ("oauth/consent?user_code=BCDF-GHJK", "GET"),
    ("oauth/consent/decision", "POST"),
    ("oauth/connected?status=approved", "GET"),
    ("oauth/agents", "GET"),
    ("oauth/agents", "POST"),
)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_brand_without_delegation_answers_its_page_paths_with_a_404_page(
    adapter: str, tmp_path: Path
) -> None:
    with page_site(adapter, tmp_path, tmp_path / "no-templates", offers_delegation=False) as (
        base,
        _,
    ):
        for path, method in PAGES:
            url = f"{base}/a2a/{BRAND}/{path}"
            answer = httpx.request(method, url, data={"x": "1"} if method == "POST" else None)
            assert answer.status_code == 404, (path, answer.text)
            assert answer.headers["content-type"] == "text/html; charset=utf-8", path
            assert "does not take authorizations for personal agents" in answer.text, path
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["cache-control"] == "no-store"
        head = httpx.head(f"{base}/a2a/{BRAND}/oauth/consent")
        assert head.status_code == 404
        assert head.content == b""
        # Agents read statuses, not pages: the authorization server's own paths, an unknown
        # Brand's pages and unmatched paths keep routing's bare 404.
        for path in (
            f"/a2a/{BRAND}/oauth/.well-known/oauth-authorization-server",
            f"/a2a/{BRAND}/oauth/jwks.json",
            "/a2a/nobody/oauth/consent",
            f"/a2a/{BRAND}/oauth/nothing",
        ):
            bare = httpx.get(base + path)
            assert bare.status_code == 404, path
            assert bare.content == b"", path
