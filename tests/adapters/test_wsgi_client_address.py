"""Under a WSGI server the consent pages count `REMOTE_ADDR`: the peer, or what ProxyFix set.

Without ProxyFix a client's own X-Forwarded-For changes nothing; with `ProxyFix(x_for=1)`
the bucket is the address the one proxy appended, so a client cannot pick it either, and
two clients behind the proxy do not share one bucket.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.middleware.proxy_fix import ProxyFix

from pactmw.adapters.wsgi import A2AProviderApp
from pactmw.provider import Provider, ProviderSettings
from pactmw.store import open_store
from tests.support.client_address import (
    LIMIT,
    consent_limited_settings,
    consent_status,
    start_in_one_window,
)
from tests.support.servers import werkzeug_server


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Provider]:
    settings = ProviderSettings.from_mapping(
        consent_limited_settings(data_dir=str(tmp_path / "data"))
    )
    start_in_one_window()
    built = Provider.from_settings(settings, store=open_store("memory://"))
    try:
        yield built
    finally:
        built.close()


def test_without_proxy_fix_forwarded_for_is_ignored(provider: Provider) -> None:
    with werkzeug_server(A2AProviderApp(provider)) as base:
        statuses = [consent_status(base, f"203.0.113.{i}") for i in range(LIMIT + 2)]
    assert statuses == [200] * LIMIT + [429] * 2


def test_behind_proxy_fix_the_proxys_address_counts(provider: Provider) -> None:
    app = ProxyFix(A2AProviderApp(provider), x_for=1)
    with werkzeug_server(app) as base:
        # The client wrote the first address; the proxy appended the one it saw.
        statuses = [consent_status(base, f"203.0.113.{i}, 198.51.100.7") for i in range(LIMIT + 2)]
        assert statuses == [200] * LIMIT + [429] * 2
        assert consent_status(base, "198.51.100.8") == 200  # another client: its own bucket
