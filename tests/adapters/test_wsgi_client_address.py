"""Under a WSGI server the consent pages count `REMOTE_ADDR`: the peer, or what ProxyFix set.

Without ProxyFix a client's own X-Forwarded-For changes nothing; with `ProxyFix(x_for=1)`
the bucket is the address the one proxy appended, so a client cannot pick it either, and
two clients behind the proxy do not share one bucket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from werkzeug.middleware.proxy_fix import ProxyFix

from pactmw.adapters.wsgi import A2AProviderApp
from pactmw.provider import Provider, ProviderSettings
from pactmw.store import open_store
from tests.support.servers import werkzeug_server

LIMIT = 3
WINDOW = 3600


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Provider]:
    settings = ProviderSettings.from_mapping(
        {
            "base_url": "https://provider.example",
            "audience": "https://provider.example/a2a",
            "data_dir": str(tmp_path / "data"),
            "consent_rate_limit": {"per_agent": LIMIT, "window": WINDOW},
            "brands": {
                "acme": {
                    "handler": "examples.bots:order_bot",
                    "delegation": {
                        "login_url": "/login",
                        "scopes": {"orders:read": "Look up your orders"},
                    },
                }
            },
        }
    )
    left = WINDOW - time.time() % WINDOW
    if left < 60:  # start well inside a window, so the requests share one
        time.sleep(left + 1)
    built = Provider.from_settings(settings, store=open_store("memory://"))
    try:
        yield built
    finally:
        built.close()


def _consent(base: str, forwarded_for: str) -> int:
    answer = httpx.get(
        f"{base}/a2a/acme/oauth/consent", headers={"X-Forwarded-For": forwarded_for}, timeout=30
    )
    return answer.status_code


def test_without_proxy_fix_forwarded_for_is_ignored(provider: Provider) -> None:
    with werkzeug_server(A2AProviderApp(provider)) as base:
        statuses = [_consent(base, f"203.0.113.{i}") for i in range(LIMIT + 2)]
    assert statuses == [200] * LIMIT + [429] * 2


def test_behind_proxy_fix_the_proxys_address_counts(provider: Provider) -> None:
    app = ProxyFix(A2AProviderApp(provider), x_for=1)
    with werkzeug_server(app) as base:
        # The client wrote the first address; the proxy appended the one it saw.
        statuses = [_consent(base, f"203.0.113.{i}, 198.51.100.7") for i in range(LIMIT + 2)]
        assert statuses == [200] * LIMIT + [429] * 2
        assert _consent(base, "198.51.100.8") == 200  # another client: its own bucket
