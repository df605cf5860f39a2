"""Agent Cards (PACT §2.1; reference card shape, pact-provider.md §3)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pactmw.core.encoding import json_dumps
from pactmw.core.http import PROVIDER_MOUNT as MOUNT
from pactmw.core.http import Response
from pactmw.provider.a2a import a2a_json
from pactmw.provider.brand import Brand

#: The reference and its conformance suite look the identity scheme up by this name; the
#: spec's examples say `paJwt`. Configurable, `platformJwt` by default for interop.
DEFAULT_IDENTITY_SCHEME = "platformJwt"
IDENTITY_SCHEMES = frozenset({"platformJwt", "paJwt"})


def interface_url(base_url: str, brand_id: str) -> str:
    """The Brand's A2A interface URL, `{base_url}/a2a/{brand_id}`."""
    return f"{base_url.rstrip('/')}{MOUNT}{quote(brand_id, safe='')}"


def card_url(base_url: str, brand_id: str) -> str:
    """Where the Provider serves the Brand's Agent Card."""
    return interface_url(base_url, brand_id) + "/.well-known/agent-card.json"


def build_card(
    brand: Brand,
    *,
    base_url: str,
    identity_scheme: str = DEFAULT_IDENTITY_SCHEME,
    organization: str = "",
) -> dict[str, Any]:
    """The Agent Card of `brand`: HTTP+JSON 1.0 interface first, identity scheme alone.

    Capabilities are all false, so the unsupported operations answer with the reasons the
    conformance suite expects. A Brand with Parafé lists the extension in
    `capabilities.extensions` (spec §2).
    """
    if identity_scheme not in IDENTITY_SCHEMES:
        raise ValueError(f"identity_scheme must be one of {sorted(IDENTITY_SCHEMES)}")
    base = base_url.rstrip("/")
    card: dict[str, Any] = {
        "name": brand.name,
        "description": brand.description,
        "supportedInterfaces": [
            {
                "url": interface_url(base, brand.id),
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": "1.0",
            }
        ],
        "provider": {"organization": organization or brand.name, "url": base},
        "version": brand.version,
        "capabilities": {
            "streaming": False,
            "pushNotifications": False,
            "extendedAgentCard": False,
        },
        "securitySchemes": {
            identity_scheme: {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "bearerFormat": "JWT",
                    "description": "PACT 1.0 personal-agent JWT (ES256 or RS256).",
                }
            }
        },
        "securityRequirements": [{"schemes": {identity_scheme: {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [skill.to_card() for skill in brand.skills],
    }
    if brand.parafe is not None:
        # Only Brands with Parafé list extensions: PACT-only cards stay as they were.
        card["capabilities"]["extensions"] = brand.parafe.card_entries()
    return card


#: How a card, and the redirect to one, is cached and shared: the reference's headers, one
#: policy for both answers of a card URL.
_SHARED_PUBLIC = (("Cache-Control", "public, max-age=300"), ("Access-Control-Allow-Origin", "*"))


def card_response(card: dict[str, Any]) -> Response:
    """The card with the reference's caching and CORS headers."""
    return a2a_json(200, json_dumps(card), _SHARED_PUBLIC)


def brand_domain_card(target_card_url: str, *, card: dict[str, Any] | None = None) -> Response:
    """What a Brand's own `/.well-known/agent-card.json` answers (PACT §2.1).

    With `card`, the card is served there directly; otherwise a 302 redirect to the
    Provider's card URL, which personal agents follow.
    """
    if card is not None:
        return card_response(card)
    return Response(
        status=302,
        headers=(
            ("Location", target_card_url),
            ("Content-Length", "0"),
            *_SHARED_PUBLIC,
        ),
    )


__all__ = [
    "DEFAULT_IDENTITY_SCHEME",
    "IDENTITY_SCHEMES",
    "brand_domain_card",
    "build_card",
    "card_response",
    "card_url",
    "interface_url",
]
