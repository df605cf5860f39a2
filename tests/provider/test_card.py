"""Agent Cards: shape (pact-provider.md §3.1, §3.1a), headers, and the Brand-domain card."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import pytest

from pactmw.provider import Brand, Skill, brand_domain_card, build_card, card_url, interface_url
from pactmw.provider.card import card_response
from tests.provider import A2A, Kit, assert_bare, header

BASE = "https://provider.example"
CARD_HEADERS = {
    "Content-Type": "application/a2a+json",
    "Cache-Control": "public, max-age=300",
    "Access-Control-Allow-Origin": "*",
}
HTTP_SCHEME_KEYS = {
    "httpAuthSecurityScheme",
    "oauth2SecurityScheme",
    "openIdConnectSecurityScheme",
    "apiKeySecurityScheme",
    "mtlsSecurityScheme",
}


def bot(turn: Any) -> str:
    return "hi"


SKYLINE = Brand(
    id="01M3R53Q5SZQ6FQSMSDBSSREAA",
    name="Skyline Airways",
    handler=bot,
    description="Flight status and trip changes.",
    skills=(
        Skill(
            id="flight-status",
            name="Flight status",
            description="Check departure and arrival times for a booked flight.",
            tags=("flight", "flights", "airline"),
            examples=("Is my Friday flight on time?",),
        ),
        Skill(id="bags", name="Bags", description="Baggage rules."),
    ),
)


def test_card_shape() -> None:
    card = build_card(SKYLINE, base_url=BASE)
    interface = f"{BASE}/a2a/01M3R53Q5SZQ6FQSMSDBSSREAA"
    assert card == {
        "name": "Skyline Airways",
        "description": "Flight status and trip changes.",
        "supportedInterfaces": [
            {"url": interface, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ],
        "provider": {"organization": "Skyline Airways", "url": BASE},
        "version": "0.1.0",
        "capabilities": {
            "streaming": False,
            "pushNotifications": False,
            "extendedAgentCard": False,
        },
        "securitySchemes": {
            "platformJwt": {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "bearerFormat": "JWT",
                    "description": card["securitySchemes"]["platformJwt"]["httpAuthSecurityScheme"][
                        "description"
                    ],
                }
            }
        },
        "securityRequirements": [{"schemes": {"platformJwt": {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": "flight-status",
                "name": "Flight status",
                "description": "Check departure and arrival times for a booked flight.",
                "tags": ["flight", "flights", "airline"],
                "examples": ["Is my Friday flight on time?"],
            },
            {"id": "bags", "name": "Bags", "description": "Baggage rules.", "tags": []},
        ],
    }
    assert isinstance(
        card["securitySchemes"]["platformJwt"]["httpAuthSecurityScheme"]["description"], str
    )
    # The card is plain JSON.
    assert json.loads(json.dumps(card)) == card


def test_card_schema_rules() -> None:
    """What the suite's AgentCardSchema and checks require, field by field."""
    card = build_card(Brand(id="b", name="B", handler=bot), base_url=BASE + "/")
    for key in (
        "name",
        "description",
        "supportedInterfaces",
        "version",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
    ):
        assert key in card, key
    assert card["name"]
    assert card["description"] == ""  # empty is allowed, but it must be a string
    assert card["skills"] == []
    assert card["supportedInterfaces"][0] == {
        "url": f"{BASE}/a2a/b",
        "protocolBinding": "HTTP+JSON",
        "protocolVersion": "1.0",
    }
    assert urlparse(card["provider"]["url"]).scheme == "https"
    assert card["provider"]["url"] == BASE  # trailing slash removed
    for value in card["securitySchemes"].values():
        assert len(value) == 1
        assert set(value) <= HTTP_SCHEME_KEYS
    # The identity scheme is listed alone in one requirement entry.
    assert card["securityRequirements"] == [{"schemes": {"platformJwt": {"list": []}}}]


def test_pa_jwt_scheme_name() -> None:
    card = build_card(SKYLINE, base_url=BASE, identity_scheme="paJwt")
    assert list(card["securitySchemes"]) == ["paJwt"]
    scheme = card["securitySchemes"]["paJwt"]["httpAuthSecurityScheme"]
    assert (scheme["scheme"], scheme["bearerFormat"]) == ("Bearer", "JWT")
    assert card["securityRequirements"] == [{"schemes": {"paJwt": {"list": []}}}]


@pytest.mark.parametrize("scheme", ["", "PlatformJwt", "bearer", "userDelegation"])
def test_unknown_scheme_name_is_refused(scheme: str) -> None:
    with pytest.raises(ValueError, match="identity_scheme"):
        build_card(SKYLINE, base_url=BASE, identity_scheme=scheme)


def test_organization_and_version() -> None:
    brand = Brand(id="acme", name="Acme", handler=bot, version="2.3.4")
    card = build_card(brand, base_url=BASE, organization="Example Provider")
    assert card["provider"] == {"organization": "Example Provider", "url": BASE}
    assert card["version"] == "2.3.4"


def test_interface_and_card_urls_encode_the_brand_id() -> None:
    assert interface_url(BASE + "/", "acme") == f"{BASE}/a2a/acme"
    assert interface_url(BASE, "acme co/x") == f"{BASE}/a2a/acme%20co%2Fx"
    assert card_url(BASE, "acme") == f"{BASE}/a2a/acme/.well-known/agent-card.json"
    brand = Brand(id="acme co", name="Acme", handler=bot)
    card = build_card(brand, base_url=BASE)
    assert card["supportedInterfaces"][0]["url"] == f"{BASE}/a2a/acme%20co"


def test_card_response_headers_are_exact() -> None:
    card = build_card(SKYLINE, base_url=BASE)
    response = card_response(card)
    assert response.status == 200
    names = [name for name, _ in response.headers]
    assert len(names) == len(set(names))
    headers = dict(response.headers)
    assert headers == {**CARD_HEADERS, "Content-Length": str(len(response.body))}
    assert json.loads(response.body) == card


def test_brand_domain_card_redirects() -> None:
    target = card_url(BASE, "acme")
    response = brand_domain_card(target)
    assert response.status == 302
    assert header(response, "Location") == [target]
    assert response.body == b""
    assert header(response, "Content-Type") == []
    assert header(response, "Content-Length") == ["0"]


def test_brand_domain_card_serves_the_card() -> None:
    card = build_card(SKYLINE, base_url=BASE)
    response = brand_domain_card(card_url(BASE, SKYLINE.id), card=card)
    assert response == card_response(card)
    assert header(response, "Location") == []
    assert json.loads(response.body) == card


def test_provider_serves_the_card_without_a_token(memory_kit: Kit) -> None:
    provider = memory_kit.provider(SKYLINE, organization="PACT reference provider")
    path = f"/a2a/{SKYLINE.id}/.well-known/agent-card.json"
    for token in (None, "Bearer garbage", memory_kit.token()):
        response = provider.handle(memory_kit.request("GET", path, token=token), _no_body)
        assert response.status == 200
        assert header(response, "Content-Type") == [A2A]
        assert dict(response.headers) == {**CARD_HEADERS, "Content-Length": str(len(response.body))}
        card = json.loads(response.body)
        assert card == provider.card(SKYLINE.id)
        assert card["provider"]["organization"] == "PACT reference provider"
        assert card["supportedInterfaces"][0]["url"] == f"https://provider.example/a2a/{SKYLINE.id}"


def test_provider_card_of_an_unknown_brand_is_404(memory_kit: Kit) -> None:
    provider = memory_kit.provider(SKYLINE)
    response = provider.handle(
        memory_kit.request("GET", "/a2a/nobody/.well-known/agent-card.json"), _no_body
    )
    assert_bare(response, 404)
    with pytest.raises(KeyError):
        provider.card("nobody")


def test_provider_card_of_a_brand_id_with_a_space(memory_kit: Kit) -> None:
    # `Request.path` is decoded: the server turned `/a2a/acme%20co/...` into this, once.
    brand = Brand(id="acme co", name="Acme", handler=bot)
    provider = memory_kit.provider(brand)
    response = provider.handle(
        memory_kit.request("GET", "/a2a/acme co/.well-known/agent-card.json"), _no_body
    )
    assert response.status == 200
    assert json.loads(response.body)["name"] == "Acme"


def _no_body(limit: int) -> bytes | None:
    pytest.fail("the card route read the body")
