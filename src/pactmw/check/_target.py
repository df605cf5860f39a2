"""What the user typed, and the card's identity scheme."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pactmw.check._wire import CARD_PATH
from pactmw.client import AgentCard
from pactmw.client.http import check_url


def card_url_from(target: str) -> str:
    """The card URL for what the user typed: a card URL is used as is; a bare domain or a
    site's root URL means the Brand domain's `/.well-known/agent-card.json` (PACT §2.1),
    which serves the card or redirects to the Provider's. A bare domain means https."""
    text = target.strip()
    if "://" not in text:
        text = "https://" + text
    try:
        parts = urlsplit(text)
    except ValueError:  # a bracketed host that is no IPv6 address ("http://[::1")
        check_url(text)  # refuses it in the words it has for every bad URL
        raise
    if parts.path in ("", "/") and not parts.query:
        text = urlunsplit((parts.scheme, parts.netloc, CARD_PATH, "", ""))
    check_url(text)
    return text


def _is_identity_scheme(scheme: Any, *, strict: bool) -> bool:
    """An `httpAuthSecurityScheme` Bearer (exactly "Bearer" and bearerFormat JWT when strict,
    as PACT §2.1 writes it and the reference suite compares it)."""
    if not isinstance(scheme, Mapping) or set(scheme) != {"httpAuthSecurityScheme"}:
        return False
    body = scheme["httpAuthSecurityScheme"]
    if not isinstance(body, Mapping) or not isinstance(body.get("scheme"), str):
        return False
    if strict:
        return body["scheme"] == "Bearer" and body.get("bearerFormat") == "JWT"
    return str(body["scheme"]).lower() == "bearer"


def identity_scheme_name(card: AgentCard, *, strict: bool = False) -> str | None:
    """The name of the personal-agent JWT scheme: an `httpAuthSecurityScheme` Bearer listed
    alone in one `securityRequirements` entry (PACT §2.1), or None."""
    for requirement in card.security_requirements:
        named = requirement.get("schemes")
        if isinstance(named, Mapping) and len(named) == 1:
            (name,) = named
            if _is_identity_scheme(card.security_schemes.get(name), strict=strict):
                return str(name)
    return None


__all__ = [
    "card_url_from",
    "identity_scheme_name",
]
