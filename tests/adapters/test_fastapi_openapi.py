"""What `PersonalAgentScheme` puts in a FastAPI app's OpenAPI document, form by form, and
that documenting the delegation header changes nothing a caller sees."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI, Security

from pactmw.adapters.fastapi import EXCEPTION_HANDLERS, PersonalAgentScheme
from pactmw.protocols.identity import PersonalAgent
from tests.adapters.support import CHALLENGE, INVALID_TOKEN, World, assert_refused
from tests.support.net import loopback_client
from tests.support.servers import uvicorn_server

pytestmark = pytest.mark.timeout(60)

#: The security scheme every form shows, whichever of them an app uses.
SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "bearerFormat": "JWT",
    "description": (
        "PACT 1.0 identity JWT of the person's personal agent. Where an operation lists "
        "scopes, they are delegated scopes: the person's delegation, sent in "
        "X-A2A-User-Delegation, must grant them."
    ),
}

#: The header a scheme that takes delegations documents on each of its operations (and a
#: string schema, as FastAPI writes it).
DELEGATION_HEADER = {
    "name": "X-A2A-User-Delegation",
    "in": "header",
    "required": False,
    "description": (
        "The person's delegation: `Bearer` and the access token this site issued to the "
        "personal agent. Needed by operations that list scopes; verified when sent."
    ),
}


@pytest.fixture(scope="module")
def world() -> World:
    return World()


def _operation(scheme: PersonalAgentScheme, scopes: list[str] | None = None) -> dict[str, Any]:
    """The OpenAPI operation of a route whose caller is `Security(scheme, scopes=scopes)`,
    checking the security scheme it names on the way."""
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/orders")
    def orders(agent: PersonalAgent | None = Security(scheme, scopes=scopes)) -> Any:  # noqa: B008
        return {}

    document = app.openapi()
    assert document["components"]["securitySchemes"] == {"PersonalAgent": SCHEME}
    operation: dict[str, Any] = document["paths"]["/orders"]["get"]
    return operation


def _parameters(operation: dict[str, Any]) -> list[dict[str, Any]]:
    """The operation's parameters, each without its schema once that is checked to be an
    optional string (FastAPI's own way of writing it is no concern here)."""
    found: list[dict[str, Any]] = operation["parameters"]
    for parameter in found:
        assert {"type": "string"} in parameter["schema"]["anyOf"], parameter
    return [{k: v for k, v in p.items() if k != "schema"} for p in found]


def _delegating(world: World, **options: Any) -> PersonalAgentScheme:
    return PersonalAgentScheme(
        world.verifier, delegation_provider=world.provider, delegation_brand="acme", **options
    )


def test_a_scheme_without_delegation_documents_the_bearer_token_only(world: World) -> None:
    operation = _operation(PersonalAgentScheme(world.verifier))
    assert operation["security"] == [{"PersonalAgent": []}]
    # It refuses a delegation: the header is no parameter of its operations.
    assert "parameters" not in operation


def test_an_optional_scheme_documents_what_a_required_one_does(world: World) -> None:
    operation = _operation(PersonalAgentScheme(world.verifier, optional=True))
    assert operation["security"] == [{"PersonalAgent": []}]
    assert "parameters" not in operation
    optional = _operation(_delegating(world, optional=True))
    assert optional["security"] == [{"PersonalAgent": []}]
    assert _parameters(optional) == [DELEGATION_HEADER]


def test_a_scheme_taking_delegations_documents_its_header(world: World) -> None:
    operation = _operation(_delegating(world))
    assert operation["security"] == [{"PersonalAgent": []}]
    assert _parameters(operation) == [DELEGATION_HEADER]


def test_scopes_are_the_operations_security_requirement(world: World) -> None:
    operation = _operation(_delegating(world), ["orders:read", "orders:cancel"])
    assert operation["security"] == [{"PersonalAgent": ["orders:read", "orders:cancel"]}]
    assert _parameters(operation) == [DELEGATION_HEADER]


def test_the_documented_header_changes_no_answer(world: World) -> None:
    # The guard reads X-A2A-User-Delegation from the request itself; the header parameter
    # FastAPI now knows of must never answer a missing or malformed one with its own 422.
    scheme = _delegating(world)
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/orders")
    def orders(agent: PersonalAgent = Security(scheme, scopes=["orders:read"])) -> Any:  # noqa: B008
        assert agent.delegation is not None
        return {"account": agent.delegation.account}

    @app.get("/whoami")
    def whoami(agent: PersonalAgent = Security(scheme)) -> Any:  # noqa: B008
        return {"delegated": agent.delegation is not None}

    identity = world.identity()
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        assert_refused(client.get("/orders"), CHALLENGE)
        assert_refused(client.get("/orders", headers={"Authorization": identity}), INVALID_TOKEN)
        for malformed in ("", "Bearer", "Bearer not-a-jwt", "Basic dXNlcjpwYXNz"):
            sent = {"Authorization": identity, "X-A2A-User-Delegation": malformed}
            assert_refused(client.get("/whoami", headers=sent), INVALID_TOKEN)
        twice = [
            ("Authorization", identity),
            ("X-A2A-User-Delegation", world.delegation(("orders:read",))),
            ("X-A2A-User-Delegation", world.delegation(("orders:read",))),
        ]
        assert_refused(client.get("/whoami", headers=twice), INVALID_TOKEN)
        assert client.get("/whoami", headers={"Authorization": identity}).json() == {
            "delegated": False
        }
        delegated = {
            "Authorization": identity,
            "X-A2A-User-Delegation": world.delegation(("orders:read",)),
        }
        answered = client.get("/orders", headers=delegated)
        assert answered.status_code == 200, answered.text
        assert answered.json()["account"].startswith("acct-user-1-")
        # The served document is the one the app makes, and its page is there to render it.
        assert client.get("/openapi.json").json() == app.openapi()
        page = client.get("/docs")
        assert page.status_code == 200
        assert "/openapi.json" in page.text
