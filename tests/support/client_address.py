"""What the client-address tests share: a Provider whose consent pages allow `LIMIT`
requests per address in a `WINDOW`, a start well inside one window, and one request to the
consent page with an `X-Forwarded-For` of the test's choosing."""

from __future__ import annotations

from typing import Any

from tests.support.clock import wait_for_room_in_window
from tests.support.net import loopback_client

__all__ = ["LIMIT", "WINDOW", "consent_limited_settings", "consent_status", "start_in_one_window"]

LIMIT = 3
WINDOW = 3600


def consent_limited_settings(**extra: Any) -> dict[str, Any]:
    """Provider settings (`ProviderSettings.from_mapping`, Django's `PACTMW`) with the
    consent pages' per-address limit, and `extra` (a store, a data_dir)."""
    return {
        "base_url": "https://provider.example",
        "audience": "https://provider.example/a2a",
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
        **extra,
    }


def start_in_one_window() -> None:
    """Wait for the next window when this one is about to end, so the requests share one."""
    wait_for_room_in_window(WINDOW, 60)


def consent_status(base: str, forwarded_for: str, **headers: str) -> int:
    """The status of one GET of Acme's consent page with this `X-Forwarded-For`."""
    with loopback_client(base_url=base, timeout=30) as client:
        answer = client.get(
            "/a2a/acme/oauth/consent", headers={"X-Forwarded-For": forwarded_for, **headers}
        )
    return answer.status_code
