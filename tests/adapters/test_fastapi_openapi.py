"""What `PersonalAgentScheme` and `PoppySessionScheme` put in a FastAPI app's OpenAPI document,
form by form, the refusals their `responses()` document, and that documenting the delegation
header and the refusals changes nothing a caller sees."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI, Security

from pactmw.adapters.fastapi import EXCEPTION_HANDLERS, PersonalAgentScheme, PoppySessionScheme
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider import Brand, Provider
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.poppy import PoppyCaller, PoppyConfig
from pactmw.store import open_store
from tests.adapters.support import BASE, CHALLENGE, INVALID_TOKEN, World, assert_refused
from tests.support.net import loopback_client
from tests.support.parties import ISSUER
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


def delegation_header(brand_id: str) -> dict[str, Any]:
    """The header a scheme that takes delegations documents on each of its operations, naming
    the Brand whose delegation it is (and a string schema, as FastAPI writes it)."""
    return {
        "name": "X-A2A-User-Delegation",
        "in": "header",
        "required": False,
        "description": (
            f"The person's delegation for the Brand `{brand_id}`: `Bearer` and the access "
            "token this site issued to the personal agent for it. Needed by operations that "
            "list scopes; verified when sent."
        ),
    }


DELEGATION_HEADER = delegation_header("acme")


@pytest.fixture(scope="module")
def world() -> World:
    return World()


@pytest.fixture(scope="module")
def two_brands(world: World) -> Iterator[Provider]:
    """A Provider whose Brands `acme` and `shop` each offer delegation and Poppy."""
    delegation = DelegationConfig(scopes={"orders:read": "See orders"}, login_url="/login")
    brands = [
        Brand(
            id=brand_id,
            name=brand_id.title(),
            handler=lambda turn: "hi",
            delegation=delegation,
            poppy=PoppyConfig(domain=f"{brand_id}.example", agents="any"),
        )
        for brand_id in ("acme", "shop")
    ]
    provider = Provider(
        base_url=BASE,
        verifier=world.verifier,
        store=open_store("memory://"),
        brands=brands,
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
    )
    yield provider
    provider.close()


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


def test_the_documented_header_and_refusals_change_no_answer(world: World) -> None:
    # The guard reads X-A2A-User-Delegation from the request itself; the header parameter
    # FastAPI now knows of must never answer a missing or malformed one with its own 422.
    # The documented refusals are documentation only: the answers are the guard's.
    scheme = _delegating(world)
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS, responses=scheme.responses())

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


# -- schemes sharing a name, and Poppy's ------------------------------------------------------


def test_pact_schemes_share_one_entry_and_each_operation_names_its_brand(
    world: World, two_brands: Provider
) -> None:
    # The entry documents the credential in Authorization, the identity JWT: one for every
    # scheme, so one entry (and one token in /docs). What differs between the schemes, which
    # Brand's delegation they take, is on each of their operations.
    plain = PersonalAgentScheme(world.verifier)
    by_brand = {
        brand_id: PersonalAgentScheme(
            world.verifier, delegation_provider=two_brands, delegation_brand=brand_id
        )
        for brand_id in ("acme", "shop")
    }
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/whoami")
    def whoami(agent: PersonalAgent = Security(plain)) -> Any:  # noqa: B008
        return {}

    @app.get("/acme/orders")
    def acme(agent: PersonalAgent = Security(by_brand["acme"], scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    @app.get("/shop/orders")
    def shop(agent: PersonalAgent = Security(by_brand["shop"], scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    document = app.openapi()
    assert document["components"]["securitySchemes"] == {"PersonalAgent": SCHEME}
    paths = document["paths"]
    assert "parameters" not in paths["/whoami"]["get"]
    for brand_id in ("acme", "shop"):
        operation = paths[f"/{brand_id}/orders"]["get"]
        assert operation["security"] == [{"PersonalAgent": ["orders:read"]}]
        assert _parameters(operation) == [delegation_header(brand_id)]


def poppy_scheme_entry(brand_id: str) -> dict[str, Any]:
    """The security scheme a `PoppySessionScheme` for `brand_id` documents by default."""
    return {
        "type": "http",
        "scheme": "DPoP",
        "description": (
            f"Poppy Session Token of the Brand `{brand_id}` (`Authorization: DPoP <token>`), "
            "with a DPoP proof of the request (RFC 9449) in the `DPoP` header, signed with "
            "the Session's key. Where an operation lists scopes, the Session must be signed in "
            "and the person must have approved them."
        ),
    }


def test_a_poppy_scheme_documents_its_brands_session_token(two_brands: Provider) -> None:
    poppy = PoppySessionScheme(two_brands, "shop")
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/orders")
    def orders(caller: PoppyCaller = Security(poppy, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    document = app.openapi()
    assert document["components"]["securitySchemes"] == {
        "PoppySession.shop": poppy_scheme_entry("shop")
    }
    operation = document["paths"]["/orders"]["get"]
    assert operation["security"] == [{"PoppySession.shop": ["orders:read"]}]
    # The scheme reads its headers from the request itself: none is a parameter (FastAPI
    # would answer a missing one with its 422, never Poppy's 401).
    assert "parameters" not in operation


def test_poppy_schemes_of_two_brands_keep_an_entry_each(two_brands: Provider) -> None:
    # Each Brand's Session Token is a credential of its own (one Brand's is refused by the
    # other), so each is an entry of its own, and neither overwrites the other's description.
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)
    for brand_id in ("acme", "shop"):
        poppy = PoppySessionScheme(two_brands, brand_id)

        @app.get(f"/{brand_id}/orders")
        def orders(caller: PoppyCaller = Security(poppy)) -> Any:  # noqa: B008
            return {}

    document = app.openapi()
    assert document["components"]["securitySchemes"] == {
        "PoppySession.acme": poppy_scheme_entry("acme"),
        "PoppySession.shop": poppy_scheme_entry("shop"),
    }
    for brand_id in ("acme", "shop"):
        operation = document["paths"][f"/{brand_id}/orders"]["get"]
        assert operation["security"] == [{f"PoppySession.{brand_id}": []}]
    # A name of the app's own still wins.
    named = PoppySessionScheme(two_brands, "shop", scheme_name="Poppy", description="Ours")
    assert (named.scheme_name, named.model.description) == ("Poppy", "Ours")


# -- the refusals a route documents with `responses=scheme.responses()` ---------------------

#: The response header every documented 401 and 403 carries (as FastAPI writes it).
WWW_AUTHENTICATE = {"schema": {"type": "string"}}

PACT_UNAUTHORIZED = {
    "description": (
        "No personal agent's identity JWT, or a refused one (or a refused delegation): "
        'the PACT challenge in `WWW-Authenticate`, `Bearer realm="a2a"` (with '
        '`error="invalid_token"` for a refused delegation, or none where the operation '
        "lists scopes). Empty body with `EXCEPTION_HANDLERS`."
    ),
    "headers": {
        "WWW-Authenticate": {"description": "The PACT challenge.", **WWW_AUTHENTICATE},
    },
}
PACT_FORBIDDEN = {
    "description": (
        "The delegation does not grant a scope the operation lists: "
        '`error="insufficient_scope"` and the scopes it needs in `WWW-Authenticate`. Empty '
        "body with `EXCEPTION_HANDLERS`."
    ),
    "headers": {
        "WWW-Authenticate": {
            "description": 'The challenge: `Bearer realm="a2a", error="insufficient_scope", '
            'scope="..."`.',
            **WWW_AUTHENTICATE,
        },
    },
}

#: Poppy's JSON error body, as `EXCEPTION_HANDLERS` send it.
POPPY_ERROR = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"error": {"type": "string"}, "scope": {"type": "string"}},
            "required": ["error"],
        }
    }
}
POPPY_CHALLENGE = {
    "WWW-Authenticate": {
        "description": 'The code again: `DPoP error="..."` (and `scope="..."` for a 403).',
        **WWW_AUTHENTICATE,
    }
}
POPPY_RESPONSES = {
    "400": {
        "description": (
            "`invalid_request`: the Session Token in the URL, two `Authorization` headers, or "
            "a write's malformed `Idempotency-Key`."
        ),
        "content": POPPY_ERROR,
    },
    "401": {
        "description": (
            "`invalid_token` (no live Session Token of this Brand, or its agent is no longer "
            "admitted) or `invalid_dpop_proof` (no valid, fresh DPoP proof of this request)."
        ),
        "headers": POPPY_CHALLENGE,
        "content": POPPY_ERROR,
    },
    "403": {
        "description": (
            "`sign_in_required` (the Session is signed out) or `insufficient_scope` (the "
            "person did not approve a scope the operation lists), naming the scopes to ask "
            "for in `scope`."
        ),
        "headers": POPPY_CHALLENGE,
        "content": POPPY_ERROR,
    },
}


def _responses(app: FastAPI, path: str) -> dict[str, Any]:
    """The operation's documented responses besides FastAPI's own 200 and 422."""
    found: dict[str, Any] = app.openapi()["paths"][path]["get"]["responses"]
    return {status: answer for status, answer in found.items() if status not in ("200", "422")}


def test_pact_responses_document_the_challenges_a_scheme_can_answer(world: World) -> None:
    plain = PersonalAgentScheme(world.verifier)
    delegating = _delegating(world)
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/whoami", responses=plain.responses())
    def whoami(agent: PersonalAgent = Security(plain)) -> Any:  # noqa: B008
        return {}

    # On a router, every route under it documents them (its routes all list this scope).
    router = APIRouter(responses=delegating.responses(scopes=["orders:read"]))

    @router.get("/orders")
    def orders(agent: PersonalAgent = Security(delegating, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    app.include_router(router)
    # A scheme that takes no delegation never answers 403: no scope can be granted it.
    assert _responses(app, "/whoami") == {"401": PACT_UNAUTHORIZED}
    assert _responses(app, "/orders") == {"401": PACT_UNAUTHORIZED, "403": PACT_FORBIDDEN}
    # Each call is a mapping of its own: a route that changes its copy changes no other.
    assert plain.responses() is not plain.responses()


def test_the_documented_401_is_what_each_refusal_answers(world: World) -> None:
    # Found in a FastAPI trial: /docs said a refused credential carries
    # `error="invalid_token"`, but a refused identity JWT (expired, another audience) gets
    # PACT's bare challenge, as a missing one does; only the delegation's refusals carry it.
    scheme = _delegating(world)
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/orders", responses=scheme.responses(scopes=["orders:read"]))
    def orders(agent: PersonalAgent = Security(scheme, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    assert _responses(app, "/orders")["401"] == PACT_UNAUTHORIZED
    now = int(time.time())
    elsewhere = {"iss": ISSUER, "sub": "user-1", "aud": "urn:other", "iat": now, "exp": now + 60}
    refused_identity = "Bearer " + sign_compact(elsewhere, world.agent_key, typ="JWT")
    identity = world.identity()
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        assert_refused(client.get("/orders"), CHALLENGE)  # no identity JWT
        assert_refused(client.get("/orders", headers={"Authorization": refused_identity}))
        # No delegation where the operation lists scopes, or a refused one.
        assert_refused(client.get("/orders", headers={"Authorization": identity}), INVALID_TOKEN)
        sent = {"Authorization": identity, "X-A2A-User-Delegation": "Bearer not-a-jwt"}
        assert_refused(client.get("/orders", headers=sent), INVALID_TOKEN)


def test_poppy_responses_document_poppys_errors(two_brands: Provider) -> None:
    poppy = PoppySessionScheme(two_brands, "shop")
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/orders", responses=poppy.responses(scopes=["orders:read"]))
    def orders(caller: PoppyCaller = Security(poppy, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    assert _responses(app, "/orders") == POPPY_RESPONSES


def test_a_route_without_scopes_documents_no_403(world: World, two_brands: Provider) -> None:
    # Found in an operations review: `responses()` listed 403 `insufficient_scope` on every
    # route of a scheme that takes delegations, and Poppy's 403 on every Poppy route, though
    # only a route that lists scopes can answer it. Read from a real server's /openapi.json.
    delegating = _delegating(world)
    poppy = PoppySessionScheme(two_brands, "shop")
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.get("/whoami", responses=delegating.responses())
    def whoami(agent: PersonalAgent = Security(delegating)) -> Any:  # noqa: B008
        return {}

    @app.get("/orders", responses=delegating.responses(scopes=["orders:read"]))
    def orders(agent: PersonalAgent = Security(delegating, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    @app.get("/session", responses=poppy.responses())
    def session(caller: PoppyCaller = Security(poppy)) -> Any:  # noqa: B008
        return {}

    @app.get("/poppy-orders", responses=poppy.responses(scopes=["orders:read"]))
    def poppy_orders(caller: PoppyCaller = Security(poppy, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {}

    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        paths = client.get("/openapi.json").json()["paths"]

    def documented(path: str) -> dict[str, Any]:
        found: dict[str, Any] = paths[path]["get"]["responses"]
        return {status: answer for status, answer in found.items() if status not in ("200", "422")}

    assert documented("/whoami") == {"401": PACT_UNAUTHORIZED}
    assert documented("/orders") == {"401": PACT_UNAUTHORIZED, "403": PACT_FORBIDDEN}
    assert documented("/session") == {
        status: answer for status, answer in POPPY_RESPONSES.items() if status != "403"
    }
    assert documented("/poppy-orders") == POPPY_RESPONSES
    # Scopes asked of a scheme that takes no delegation: still no 403 (a 401, always).
    assert PersonalAgentScheme(world.verifier).responses(scopes=["orders:read"]).keys() == {401}
