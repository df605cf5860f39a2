"""Under Django's WSGI server the consent pages count `REMOTE_ADDR`: the peer, or what the
proxy middleware of docs/deployment.md ("Behind a proxy") set, run as the page writes it.

With the page's own trusted proxy (10.0.0.5, not this test's client) a client's
X-Forwarded-For changes nothing; when the peer is the trusted proxy, the bucket is the
address that proxy appended, so a client cannot pick it by writing addresses before it, and
two clients behind the proxy do not share one bucket.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.commands import CHECKOUT_ENV
from tests.support.client_address import (
    LIMIT,
    consent_limited_settings,
    consent_status,
    start_in_one_window,
)
from tests.support.servers import django_server


@pytest.fixture
def in_one_window() -> None:
    start_in_one_window()


def _site(tmp_path: Path, name: str, trusted: str | None) -> Any:
    extra = {**CHECKOUT_ENV, **({"PACTMW_TEST_TRUSTED_PROXIES": trusted} if trusted else {})}
    return django_server(
        consent_limited_settings(store="memory://"),
        asgi=False,
        settings="pactmw_testsite.proxy_settings",
        workdir=tmp_path,
        name=name,
        extra_env=extra,
    )


@pytest.fixture
def as_written(tmp_path: Path, in_one_window: None) -> Iterator[str]:
    with _site(tmp_path, "proxy-as-written", None) as base:
        yield base


@pytest.fixture
def behind_the_proxy(tmp_path: Path, in_one_window: None) -> Iterator[str]:
    with _site(tmp_path, "proxy-trusted", "127.0.0.1") as base:
        yield base


def test_a_peer_that_is_not_the_proxy_keeps_its_own_address(as_written: str) -> None:
    statuses = [consent_status(as_written, f"203.0.113.{i}") for i in range(LIMIT + 2)]
    assert statuses == [200] * LIMIT + [429] * 2


def test_behind_the_trusted_proxy_the_address_it_appended_counts(behind_the_proxy: str) -> None:
    # The client wrote the first address; the proxy appended the one it saw.
    statuses = [
        consent_status(behind_the_proxy, f"203.0.113.{i}, 198.51.100.7") for i in range(LIMIT + 2)
    ]
    assert statuses == [200] * LIMIT + [429] * 2
    assert consent_status(behind_the_proxy, "198.51.100.8") == 200  # another client: its own bucket
