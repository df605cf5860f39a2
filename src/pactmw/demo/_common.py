"""What every part of the demo shares: who takes part, Acme's scopes, the timeouts, and how a
step fails."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pactmw.brand_login import BrandUser
from pactmw.core.errors import JoseError, PactmwError
from pactmw.core.jose import parse_compact

#: The personal agent's registered issuer.
ISSUER = "https://pa.example"
BRAND_ID = "acme"
#: When set (by the demo, for the server process), `demo_bot` appends one line per run here,
#: so the demo can show that a retried message did not run the bot again.
BOT_LOG_ENV = "PACTMW_DEMO_BOT_LOG"
START_TIMEOUT = 20.0
REQUEST_TIMEOUT = 10.0
#: The Delegated part: Acme's scopes (card order) and the person who signs in at Acme.
SCOPES: Mapping[str, str] = MappingProxyType(
    {
        "orders:read": "Look up your orders and their status",
        "orders:cancel": "Cancel an order that has not shipped",
    }
)
DEMO_USER = BrandUser(
    username="jane",
    password="demo-password",  # noqa: S106 - the demo's printed, throwaway password
    account="acct-jane",
    email="jane@example.com",
)
_SHOWN_ALGS = frozenset({"ES256", "RS256"})


class DemoFailed(PactmwError):
    """A step did not behave as PACT 1.0 says; the message says what was expected."""


def acme_card_url(base_url: str) -> str:
    """Where the demo's Provider serves Acme's Agent Card, as a personal agent is told."""
    return f"{base_url}/a2a/{BRAND_ID}/.well-known/agent-card.json"


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise DemoFailed(message)


def peek(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a compact JWS, not verified: for the transcript only (what
    is checked is checked by the client, or by the party the token is for)."""
    try:
        jws = parse_compact(token, allowed_algs=_SHOWN_ALGS)
        return dict(jws.header), jws.claims()
    except JoseError as exc:
        raise DemoFailed(f"not a compact JWS: {exc}") from exc


__all__ = [
    "BOT_LOG_ENV",
    "BRAND_ID",
    "DEMO_USER",
    "ISSUER",
    "REQUEST_TIMEOUT",
    "SCOPES",
    "START_TIMEOUT",
    "DemoFailed",
    "acme_card_url",
    "expect",
    "peek",
]
