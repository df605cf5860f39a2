"""What each framework's users expect of its adapter, over real servers (issue "One guard,
four faithful adapters", defects 4 to 9). The shared rules are in `test_contract.py`."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI, Security
from flask import Flask
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from pactmw.adapters import asgi, wsgi
from pactmw.adapters import fastapi as fastapi_adapter
from pactmw.adapters import flask as flask_adapter
from pactmw.config import ConfigError
from pactmw.core.http import Request as NeutralRequest
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.delegation import mint_access_token
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.guard import guard_from_mapping
from pactmw.store import open_store
from tests.adapters.commands import CHECKOUT_ENV, django_check
from tests.adapters.contract_harness import BASE_URL, Harness, Target, config, harness
from tests.adapters.support import CHALLENGE, INVALID_TOKEN, assert_refused
from tests.adapters.tokens import AgentKey, claims, forge_hs256
from tests.parafe_integration.support import a2a_message
from tests.support.logs import HOSTILE, assert_logs_tame
from tests.support.net import loopback_client
from tests.support.parties import ISSUER
from tests.support.servers import django_server, uvicorn_server, werkzeug_server

pytestmark = pytest.mark.timeout(120)

DJANGO_PROJECT = Path(__file__).resolve().parent / "django_project"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("idioms")) as started:
        yield started


@pytest.fixture(scope="module")
def settings(world: Harness) -> dict[str, Any]:
    return config(world.workdir, "idioms", world.agent, world.parafe)


def token(world: Harness, **overrides: Any) -> str:
    return world.agent.sign(claims(ISSUER, **overrides))


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


# -- 4. Starlette's AuthenticationMiddleware with other schemes ---------------------------------


def _backend_app(settings: dict[str, Any]) -> Any:
    guard = guard_from_mapping(settings)

    async def public(request: Request) -> Response:
        user = request.user
        return JSONResponse({"authenticated": user.is_authenticated, "scopes": request.auth.scopes})

    @asgi.requires("personal_agent")
    async def agents_only(request: Request) -> Response:
        return JSONResponse({"actor_id": request.user.identity})

    @asgi.requires(["personal_agent", "scope:orders:read"])
    def orders(request: Request) -> Response:
        return JSONResponse({"scopes": request.auth.scopes})

    # Starlette's `status_code`: what a caller without an app role gets (here, to hide it).
    @asgi.requires(["personal_agent", "admin"], status_code=404)
    async def admin(request: Request) -> Response:
        return JSONResponse({"admin": True})

    backend = asgi.PersonalAgentBackend(
        guard.verifier, delegation_provider=guard.provider, delegation_brand="acme"
    )
    return Starlette(
        routes=[
            Route("/public", public),
            Route("/pa", agents_only),
            Route("/orders", orders),
            Route("/admin", admin),
        ],
        middleware=[
            Middleware(AuthenticationMiddleware, backend=backend, on_error=asgi.on_auth_error)
        ],
    )


def test_other_credentials_pass_as_not_a_personal_agent(
    world: Harness, settings: dict[str, Any]
) -> None:
    stranger = AgentKey.generate("ES256", "stranger")
    others = [
        {"Authorization": "Basic dXNlcjpwYXNz"},
        bearer("an-opaque-api-token"),
        bearer(stranger.sign(claims("https://another-idp.example"))),
        bearer(forge_hs256(claims(ISSUER), b"some-api-secret", "k")),
    ]
    with uvicorn_server(_backend_app(settings)) as base, loopback_client(base_url=base) as client:
        for headers in others:
            response = client.get("/public", headers=headers)
            assert response.status_code == 200, (headers, response.text)
            assert response.json() == {"authenticated": False, "scopes": []}
            assert_refused(client.get("/pa", headers=headers))
            # A delegation is bound to a personal agent's identity: never ignored beside one.
            delegated = {**headers, "X-A2A-User-Delegation": "a.b.c"}
            assert_refused(client.get("/public", headers=delegated))
        # A personal agent's token that fails is still refused, even on a public route.
        expired = token(world, iat=1_000_000_000, exp=1_000_000_100)
        assert_refused(client.get("/public", headers=bearer(expired)))
        good = client.get("/public", headers=bearer(token(world)))
        assert good.json()["authenticated"] is True


def test_requires_answers_the_pact_challenge_and_scope_refusals(
    world: Harness, settings: dict[str, Any]
) -> None:
    with uvicorn_server(_backend_app(settings)) as base, loopback_client(base_url=base) as client:
        refused = client.get("/pa")
        assert_refused(refused)  # Starlette's own `requires` would answer a bare 403
        assert client.get("/pa", headers=bearer(token(world))).status_code == 200
        no_delegation = client.get("/orders", headers=bearer(token(world)))
        assert_refused(no_delegation, 'Bearer realm="a2a", error="invalid_token"')
        delegation, _ = _grants(world, settings).delegation("orders:cancel")
        wrong = client.get(
            "/orders", headers={**bearer(token(world)), "X-A2A-User-Delegation": delegation}
        )
        assert wrong.status_code == 403
        assert 'scope="orders:read"' in wrong.headers["www-authenticate"]


def test_requires_takes_starlettes_status_code_for_a_missing_app_role(
    world: Harness, settings: dict[str, Any]
) -> None:
    with uvicorn_server(_backend_app(settings)) as base, loopback_client(base_url=base) as client:
        assert_refused(client.get("/admin"))  # no personal agent: still PACT's challenge
        assert client.get("/admin", headers=bearer(token(world))).status_code == 404


@pytest.mark.parametrize(
    ("status_code", "shown"),
    [
        ("404", "str '404'"),
        (True, "bool True"),
        (404.0, "float 404.0"),
        (200, "int 200"),
        (99, "int 99"),
        (1000, "int 1000"),
    ],
)
def test_requires_refuses_a_status_code_that_is_no_error_status_where_it_is_built(
    status_code: object, shown: str
) -> None:
    # Found in a Starlette trial: the status went unchecked to the response of a caller
    # without the app role, a 500 ("404") or an answer no client reads as a refusal (200, 99).
    with pytest.raises(ConfigError) as caught:
        asgi.requires(["personal_agent", "admin"], status_code=status_code)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"requires: status_code must be an HTTP error status, an int from 400 to 599; got {shown}"
    )


def _requires_outside_the_prefix(settings: dict[str, Any], path: str) -> Starlette:
    """An app whose `path` route is under `requires("personal_agent")` but outside the
    middleware's guarded prefix: nothing authenticates its callers."""

    async def outside(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    verifier = guard_from_mapping(settings).verifier
    return Starlette(
        routes=[Route(path, asgi.requires("personal_agent")(outside))],
        middleware=[Middleware(asgi.PersonalAgentMiddleware, verifier=verifier)],
    )


def test_requires_without_any_authentication_says_what_it_needs(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Outside the middleware's prefix nothing verifies the caller: `requires` refuses a valid
    # token, and the log says why once (Starlette's own raises an AssertionError, a 500).
    app = _requires_outside_the_prefix(settings, "/outside")
    caplog.set_level(logging.WARNING, logger="pactmw")
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        for _ in range(2):
            assert_refused(client.get("/outside", headers=bearer(token(world))))
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert warned == [
        "requires() on /outside found no authentication: it reads what "
        "AuthenticationMiddleware with PersonalAgentBackend, or PersonalAgentMiddleware under "
        "its prefix, verified; elsewhere use personal_agent_required(verifier)"
    ]


def _scoped_outside_the_prefix(settings: dict[str, Any], kind: str) -> Any:
    """A Starlette or a WSGI app whose `/outside` route is under `delegation_required` alone,
    outside the middleware's guarded prefix: nothing verifies its callers; `/stacked` is
    under `personal_agent_required(optional=True)` too, which verifies them."""
    guard = guard_from_mapping(settings)
    options: dict[str, Any] = {"delegation_provider": guard.provider, "delegation_brand": "acme"}
    if kind == "wsgi":

        def view(environ: Any, start_response: Any) -> list[bytes]:
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]

        scoped = wsgi.delegation_required("orders:read")
        routes = {
            "/outside": scoped(view),
            "/stacked": wsgi.personal_agent_required(guard.verifier, optional=True, **options)(
                scoped(view)
            ),
        }

        def dispatch(environ: Any, start_response: Any) -> Any:
            route = routes.get(environ["PATH_INFO"])
            if route is not None:
                return route(environ, start_response)
            start_response("404 Not Found", [])
            return [b""]

        return wsgi.PersonalAgentMiddleware(dispatch, guard.verifier, **options)

    async def outside(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    scoped = asgi.delegation_required("orders:read")
    anyone = asgi.personal_agent_required(guard.verifier, optional=True, **options)
    return Starlette(
        routes=[
            Route("/outside", scoped(outside)),
            Route("/stacked", anyone(scoped(outside))),
        ],
        middleware=[Middleware(asgi.PersonalAgentMiddleware, verifier=guard.verifier, **options)],
    )


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_delegation_required_without_any_verification_says_what_it_needs(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # Reported in the contract audit: outside the middleware's prefix nothing verifies the
    # caller, so `delegation_required` refused a valid delegation (401 invalid_token) and
    # nothing said why; Flask's and Django's verify the caller themselves (they have the
    # settings), and Starlette's `requires` says so in the log. Now it says so too, once.
    app = _scoped_outside_the_prefix(settings, kind)
    serve = uvicorn_server if kind == "asgi" else werkzeug_server
    target = _grants(world, settings)
    delegation, _ = target.delegation("orders:read")
    headers = {**bearer(token(world)), "X-A2A-User-Delegation": delegation}
    caplog.set_level(logging.WARNING, logger="pactmw")
    with serve(app) as base, loopback_client(base_url=base) as client:
        for _ in range(2):
            assert_refused(client.get("/outside", headers=headers), INVALID_TOKEN)
        # Verified first, by the decorator: a delegation passes, and an anonymous caller
        # (verified as none) is refused as one without a delegation, with nothing to warn of.
        assert client.get("/stacked", headers=headers).text == "ok"
        assert_refused(client.get("/stacked"), INVALID_TOKEN)
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert warned == [
        "delegation_required() on /outside found no verified caller: it reads what "
        "PersonalAgentMiddleware verified under its prefix; elsewhere put "
        "personal_agent_required(verifier, delegation_provider=..., delegation_brand=...) "
        "above it"
    ]


def test_the_decorator_verifies_a_request_whatever_else_sits_under_its_key(
    world: Harness, settings: dict[str, Any]
) -> None:
    # Only a verified `PersonalAgent` under the key spares the decorator its check (as on every
    # other adapter): anything else another middleware left there (here None, as the WSGI and
    # Django adapters keep an unverified request's) is no caller.
    async def endpoint(request: Request) -> JSONResponse:
        caller = asgi.current_personal_agent(request)
        return JSONResponse({"actor_id": caller.actor_id if caller else None})

    def leaves_none(app: Any) -> Any:
        async def middleware(scope: Any, receive: Any, send: Any) -> None:
            scope[asgi.SCOPE_KEY] = None
            await app(scope, receive, send)

        return middleware

    verifier = guard_from_mapping(settings).verifier
    app = Starlette(
        routes=[Route("/decorated", asgi.personal_agent_required(verifier)(endpoint))],
        middleware=[Middleware(leaves_none)],
    )
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        assert_refused(client.get("/decorated"))
        verified = client.get("/decorated", headers=bearer(token(world)))
        assert verified.status_code == 200, verified.text
        assert verified.json()["actor_id"] is not None


def _grants(world: Harness, settings: dict[str, Any]) -> Target:
    """Grants in the store these settings name, signed with the configured key."""
    store = open_store(str(settings["store"]))
    world.stack.callback(store.close)
    return Target(
        "idioms", loopback_client(), (), store, world.signing, world.agent, world.parafe, settings
    )


# -- 5. FastAPI ---------------------------------------------------------------------------------


def test_fastapi_decorator_on_endpoints_without_request(world: Harness) -> None:
    client = world.get("fastapi").client
    assert client.get("/legacy-sync", headers=bearer(token(world))).json() == {"ok": "sync"}
    answered = client.get("/legacy-async?q=lamp", headers=bearer(token(world)))
    assert answered.json() == {"ok": "async", "q": "lamp"}
    assert_refused(client.get("/legacy-sync"))
    assert_refused(client.get("/legacy-async"))


def test_fastapi_security_scheme_is_in_openapi(world: Harness) -> None:
    document = world.get("fastapi").client.get("/openapi.json").json()
    scheme = document["components"]["securitySchemes"]["PersonalAgent"]
    assert (scheme["type"], scheme["scheme"], scheme["bearerFormat"]) == ("http", "bearer", "JWT")
    paths = document["paths"]
    assert paths["/api/scoped-sync"]["get"]["security"] == [{"PersonalAgent": ["orders:read"]}]
    assert paths["/decorated-async"]["get"]["security"] == [{"PersonalAgent": []}]
    # The injected request of a decorated endpoint is not a parameter of the API.
    assert "parameters" not in paths["/legacy-sync"]["get"]
    assert [p["name"] for p in paths["/legacy-async"]["get"]["parameters"]] == ["q"]


def test_fastapi_without_the_handlers_keeps_fastapis_error_body(
    world: Harness, settings: dict[str, Any]
) -> None:
    guard = guard_from_mapping(settings)
    scheme = fastapi_adapter.PersonalAgentScheme(guard.verifier)
    app = FastAPI()

    @app.get("/me")
    def me(caller: PersonalAgent = Security(scheme)) -> Any:  # noqa: B008
        return {"actor_id": caller.actor_id}

    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        refused = client.get("/me")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == CHALLENGE
        assert refused.json() == {"detail": "missing_token"}
        assert client.get("/me", headers=bearer(token(world))).status_code == 200


def test_fastapi_scopes_on_a_scheme_without_delegation_say_what_it_needs(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Found in a FastAPI trial: `Security(scheme, scopes=[...])` with a scheme made without
    # `delegation_provider`/`delegation_brand` refused every caller, one with a valid
    # delegation too (401 invalid_token), and nothing in the log said why. As
    # `delegation_required` on a route nothing verified, it now says so, once.
    guard = guard_from_mapping(settings)
    bare = fastapi_adapter.PersonalAgentScheme(guard.verifier)
    delegating = fastapi_adapter.PersonalAgentScheme(
        guard.verifier, delegation_provider=guard.provider, delegation_brand="acme"
    )
    app = FastAPI(exception_handlers=fastapi_adapter.EXCEPTION_HANDLERS)

    @app.get("/bare")
    def bare_orders(caller: PersonalAgent = Security(bare, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {"actor_id": caller.actor_id}

    @app.get("/delegating")
    def orders(caller: PersonalAgent = Security(delegating, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {"actor_id": caller.actor_id}

    delegation, _ = _grants(world, settings).delegation("orders:read")
    delegated = {**bearer(token(world)), "X-A2A-User-Delegation": delegation}
    caplog.set_level(logging.WARNING, logger="pactmw")
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        for headers in (delegated, bearer(token(world)), delegated):
            assert_refused(client.get("/bare", headers=headers), INVALID_TOKEN)
        # A scheme that takes delegations: the same delegation passes, and a caller without
        # one is refused with nothing to warn of.
        assert client.get("/delegating", headers=delegated).status_code == 200
        assert_refused(client.get("/delegating", headers=bearer(token(world))), INVALID_TOKEN)
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert warned == [
        "Security(PersonalAgentScheme(...), scopes=[...]) on /bare refuses every caller: the "
        "scheme takes no delegation; give it delegation_provider=... and delegation_brand=..."
    ]


def test_fastapi_scopes_the_brand_does_not_offer_say_so(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Found in a FastAPI trial: a misspelt scope, or `scopes="orders:read"` (FastAPI reads a
    # string one character a scope), asks for a scope no person can ever grant, since the
    # Brand does not offer it: every caller got the 403, and nothing said why.
    guard = guard_from_mapping(settings)
    scheme = fastapi_adapter.PersonalAgentScheme(
        guard.verifier, delegation_provider=guard.provider, delegation_brand="acme"
    )
    app = FastAPI(exception_handlers=fastapi_adapter.EXCEPTION_HANDLERS)

    @app.get("/misspelt")
    def misspelt(caller: PersonalAgent = Security(scheme, scopes=["order:read"])) -> Any:  # noqa: B008
        return {"actor_id": caller.actor_id}

    @app.get("/string")
    def string(caller: PersonalAgent = Security(scheme, scopes="orders:read")) -> Any:  # noqa: B008
        return {"actor_id": caller.actor_id}

    @app.get("/offered")
    def offered(caller: PersonalAgent = Security(scheme, scopes=["orders:read"])) -> Any:  # noqa: B008
        return {"actor_id": caller.actor_id}

    delegation, _ = _grants(world, settings).delegation("orders:read")
    delegated = {**bearer(token(world)), "X-A2A-User-Delegation": delegation}
    caplog.set_level(logging.WARNING, logger="pactmw")
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        # The answers stay the guard's: 401 without a delegation, 403 without the scope.
        assert_refused(client.get("/misspelt", headers=bearer(token(world))), INVALID_TOKEN)
        for path in ("/misspelt", "/string", "/misspelt"):
            refused = client.get(path, headers=delegated)
            assert refused.status_code == 403, (path, refused.status_code)
            assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
        assert client.get("/offered", headers=delegated).status_code == 200
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert warned == [
        "Security(PersonalAgentScheme(...), scopes=[...]) on /misspelt refuses every caller: "
        "Brand 'acme' does not offer 'order:read' (it offers: orders:read, orders:cancel)",
        "Security(PersonalAgentScheme(...), scopes=[...]) on /string refuses every caller: "
        "Brand 'acme' does not offer 'o', 'r', 'd', 'e', 's', ':', 'a' (it offers: "
        "orders:read, orders:cancel); scopes= takes a list: a string is read one character "
        "a scope",
    ], warned


# -- 6. consent pages inside the host app's session middleware ----------------------------------


def _session_user(connection: HTTPConnection) -> SignedInUser | None:
    name = connection.session.get("user")
    return SignedInUser(account=name, label=name) if name else None


async def _async_session_user(connection: HTTPConnection) -> SignedInUser | None:
    # A FastAPI app's user lookup is often async (its database): `current_user` may be too.
    return _session_user(connection)


async def _login(request: Request) -> Response:
    request.session["user"] = "jane"
    return PlainTextResponse("signed in")


CONSENT = "/a2a/acme/oauth/consent?user_code=BCDF-GHJK"


@pytest.mark.parametrize("current_user", [_session_user, _async_session_user])
def test_consent_pages_mounted_inside_the_host_app_see_its_session(
    settings: dict[str, Any], current_user: Any
) -> None:
    provider = guard_from_mapping(settings).provider
    assert provider is not None
    web = Starlette(
        routes=[Route("/login", _login), asgi.a2a_mount(provider, current_user=current_user)],
        middleware=[Middleware(SessionMiddleware, secret_key="test-only-secret")],
    )
    with uvicorn_server(web) as base, loopback_client(base_url=base) as client:
        signed_out = client.get(CONSENT)
        assert signed_out.status_code in (302, 303), signed_out.text[:200]
        assert signed_out.headers["location"].startswith("/login?next=")
        client.get("/login")
        signed_in = client.get(CONSENT)  # now the session's user: an unknown code
        assert signed_in.status_code == 400, signed_in.text[:300]
        assert signed_in.headers["content-type"].startswith("text/html")
        assert "This code is unknown, expired or already used." in signed_in.text
        card = client.get("/a2a/acme/.well-known/agent-card.json")
        assert card.json()["name"] == "Acme"


def test_a_consent_page_that_fails_is_html_never_an_a2a_error(
    settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    provider = guard_from_mapping(settings).provider
    assert provider is not None
    web = Starlette(
        routes=[Route("/login", _login)],
        middleware=[Middleware(SessionMiddleware, secret_key="test-only-secret")],
    )
    # Around the host app, its session middleware has not run when the page asks for the user.
    app = asgi.A2AProviderApp(provider, app=web, current_user=_session_user)
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        response = client.get(CONSENT)
    # A misconfiguration, named in the log (test_consent_without_host_middleware.py): the
    # pages' 503, not a 500.
    assert response.status_code == 503
    assert response.headers["content-type"].startswith("text/html")
    assert "a2a" not in response.headers["content-type"]
    assert "a2a_routes" in caplog.text


# -- 7. Django: settings checked at startup, other pages untouched ------------------------------


def _manage_py_check(
    tmp_path: Path, settings: dict[str, Any], **env: str
) -> subprocess.CompletedProcess[str]:
    """`manage.py check` of the test site with `settings` as its PACTMW, in a new process
    (`env` added to its environment)."""
    return django_check(settings, tmp_path / "pactmw.json", **env)


#: Bad `PACTMW` settings and what the report names: Django's system check and Flask's
#: `init_app` report each at startup, alike.
BAD_SETTINGS = [
    pytest.param({"audiance": "x"}, "audiance", id="typo"),
    pytest.param({"audience": None}, "audience", id="no-audience"),
    pytest.param({"brands": {"acme": {"handler": "nowhere.module:bot"}}}, "nowhere", id="handler"),
    pytest.param({"delegation_brand": "globex"}, "delegation_brand", id="unknown-brand"),
    # The Brand whose Parafé `parafe_action` takes by default: unknown, or one without Parafé.
    pytest.param({"parafe_brand": "globex"}, "parafe_brand 'globex'", id="unknown-parafe-brand"),
    pytest.param(
        {
            "parafe_brand": "acme",
            "delegation_brand": None,
            "brands": {"acme": {"name": "Acme", "handler": "examples.bots:order_bot"}},
        },
        "parafe_brand 'acme' has no [brands.X.parafe]",
        id="parafe-brand-without-parafe",
    ),
    pytest.param(
        {"signing_keys": ["/nowhere/pactmw-signing.jwk"]},
        "signing_keys: cannot read /nowhere/pactmw-signing.jwk: No such file or directory",
        id="signing-key-file",
    ),
    # A new user's trial: an issuer without its scheme loaded, then refused every token.
    pytest.param(
        {"agents": [{"issuer": "pa.example", "jwks_uri": "https://pa.example/jwks.json"}]},
        "agents[0].issuer must be an absolute http(s) URL, exactly as the agent's tokens have "
        "it in iss (e.g. https://pa.example): 'pa.example'",
        id="issuer-without-scheme",
    ),
    pytest.param(
        {"protect_prefix": "api/"},
        "protect_prefix must be a path starting with '/' (got 'api/')",
        id="prefix-without-slash",
    ),
]


@pytest.mark.parametrize(("broken", "named"), BAD_SETTINGS)
def test_manage_py_check_reports_a_bad_pactmw_setting(
    tmp_path: Path, settings: dict[str, Any], broken: dict[str, Any], named: str
) -> None:
    bad = {k: v for k, v in {**settings, **broken}.items() if v is not None}
    done = _manage_py_check(tmp_path, bad)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "pactmw.E001" in done.stderr
    assert "PACTMW" in done.stderr
    assert named in done.stderr


def _identity_only(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` without `brands` and the keys only a Provider reads: an app that verifies
    personal agents and serves no Provider."""
    return {key: settings[key] for key in ("audience", "agents", "protect_prefix")}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("store", "postgresql://nouser@127.0.0.1:1/x"),
        ("admin_show_message_text", True),
        ("retention_days", 30),
    ],
)
def test_manage_py_check_reports_a_provider_setting_without_brands(
    tmp_path: Path, settings: dict[str, Any], key: str, value: Any
) -> None:
    done = _manage_py_check(tmp_path, {**_identity_only(settings), key: value})
    assert done.returncode != 0, done.stdout + done.stderr
    assert "pactmw.E001" in done.stderr
    assert f"settings.PACTMW is invalid: {key} is a Provider setting: it needs brands" in (
        done.stderr
    )


def test_manage_py_check_passes_templates_without_brands(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    identity_only = {**_identity_only(settings), "templates": [str(tmp_path)]}
    done = _manage_py_check(tmp_path, identity_only)
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


def test_manage_py_check_names_a_django_store_without_its_database(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    done = _manage_py_check(tmp_path, {**settings, "store": "django:replica"})
    assert done.returncode != 0, done.stdout + done.stderr
    assert "pactmw.E003" in done.stderr
    assert "PACTMW['store'] = 'django:replica' names database 'replica'" in done.stderr


def test_manage_py_check_passes_a_good_setting(tmp_path: Path, settings: dict[str, Any]) -> None:
    # On a site with request.user (django.contrib.auth): the Brand's same-app consent pages
    # need it, and a site without it is warned (pactmw.W002, test_signed_in_user_source.py).
    with_users = {
        "DJANGO_SETTINGS_MODULE": "pactmw_testsite.middleware_settings",
        "PACTMW_TEST_MIDDLEWARE": "pactmw.adapters.django.PersonalAgentMiddleware",
        "PACTMW_TEST_AUTH": "1",
    }
    done = _manage_py_check(tmp_path, settings, **with_users)
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


#: The test site's environment that routes its Poppy views (the Brand "shop"'s, which these
#: settings do not have: fine where no system check runs), or its `delegation_required` views
#: (without `delegation_brand`).
ROUTE_POPPY_VIEWS = {"PACTMW_TEST_POPPY_APIS": "1"}
ROUTE_DELEGATION_VIEWS = {"PACTMW_TEST_DELEGATION_VIEWS": "1"}


def _without_delegation_brand(settings: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in settings.items() if key != "delegation_brand"}


def _without_delegation(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` where no Brand offers delegation (nor names `delegation_brand`)."""
    brands = {
        brand_id: {key: value for key, value in table.items() if key != "delegation"}
        for brand_id, table in settings["brands"].items()
    }
    return {**_without_delegation_brand(settings), "brands": brands}


#: What the Django and Flask `delegation_required("orders:read")` on /api/scoped-sync say
#: where no Brand offers delegation.
NO_DELEGATION_OFFERED = (
    "delegation_required('orders:read') on /api/scoped-sync refuses every caller: no Brand "
    "offers delegation ([brands.X.delegation]), so no delegation can be verified"
)


#: What the Django and Flask `delegation_required("orders:read")` on /api/scoped-sync say
#: without `delegation_brand` (`{}`: where the app's settings are).
NO_DELEGATION_BRAND = (
    "delegation_required('orders:read') on /api/scoped-sync refuses every caller: "
    "{}['delegation_brand'] is not set, so no delegation is verified; set it to the Brand "
    "(one with [brands.X.delegation]) whose grants the view checks"
)


def _sent_in_vain(world: Harness) -> list[dict[str, str]]:
    """What callers send a view behind `delegation_required` on a site without
    `delegation_brand`: a delegation (refused where none is offered), an identity alone."""
    delegated = {**bearer(token(world)), "X-A2A-User-Delegation": "Bearer a.b.c"}
    return [delegated, bearer(token(world)), delegated]


def test_manage_py_check_reports_delegation_required_without_a_delegation_brand(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # A routed view behind `delegation_required` refuses every caller while `PACTMW` names
    # no `delegation_brand`: said at startup (runserver runs the check), naming the setting.
    done = _manage_py_check(tmp_path, _without_delegation_brand(settings), **ROUTE_DELEGATION_VIEWS)
    assert done.returncode != 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "pactmw.E005" in said, said
    assert NO_DELEGATION_BRAND.format("settings.PACTMW") in said, said
    assert "/api/scoped-async" in said, said  # each view, sync or async
    # With it set, the same views pass.
    passed = _manage_py_check(tmp_path, settings, **ROUTE_DELEGATION_VIEWS)
    assert "pactmw.E005" not in passed.stderr, passed.stderr


def test_manage_py_check_warns_of_delegation_views_where_no_brand_offers_delegation(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # Found with the Django example: configured without delegation (its README says the
    # chat keeps working), its DRF view behind HasDelegatedScope was pactmw.E005, an error
    # that stopped runserver, for a setting that cannot be set without a delegation table.
    # Such a view cannot work in that deployment: said as a warning, the site still starts.
    done = _manage_py_check(tmp_path, _without_delegation(settings), **ROUTE_DELEGATION_VIEWS)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "pactmw.W005" in said, said
    assert NO_DELEGATION_OFFERED in said, said
    assert "pactmw.E005" not in said, said


def test_delegation_required_without_a_delegation_brand_is_logged_where_no_check_runs(
    world: Harness, tmp_path: Path, settings: dict[str, Any]
) -> None:
    # Under uvicorn no system check runs: the first refused request says why, once, at
    # ERROR, naming the setting; every caller is refused meanwhile.
    without = _without_delegation_brand(settings)
    with _site_under_uvicorn(tmp_path, without, env=ROUTE_DELEGATION_VIEWS) as client:
        for headers in _sent_in_vain(world):
            assert_refused(client.get("/api/scoped-sync", headers=headers), INVALID_TOKEN)
    said = (tmp_path / "site.log").read_text()
    assert said.count(NO_DELEGATION_BRAND.format("settings.PACTMW")) == 1, said


@contextlib.contextmanager
def _site_under_uvicorn(
    tmp_path: Path,
    config: dict[str, Any],
    settings_module: str = "pactmw_testsite.contract_settings",
    env: dict[str, str] | None = None,
) -> Iterator[httpx.Client]:
    """The Django test site with `config` as its PACTMW under uvicorn, as in production: no
    system check runs before the first request (runserver's would refuse a bad setting)."""
    server = django_server(
        config,
        asgi=True,
        settings=settings_module,
        workdir=tmp_path,
        name="site",
        extra_env={**CHECKOUT_ENV, **(env or {})},
    )
    with server as base, loopback_client(base_url=base) as client:
        yield client


def test_a_bad_setting_never_turns_other_pages_into_500s(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    broken = {**settings, "audiance": "typo"}
    with _site_under_uvicorn(tmp_path, broken, env=ROUTE_POPPY_VIEWS) as client:
        for _ in range(2):
            assert client.get("/public").status_code == 200
            guarded = client.get("/api/echo")
            assert guarded.status_code == 503
            assert guarded.content == b""
            assert client.get("/a2a/acme/.well-known/agent-card.json").status_code == 503
            # A Brand's own-site discovery view too (it reads the same Provider).
            discovery = client.get("/brand-site/poppy.json")
            assert (discovery.status_code, discovery.content) == (503, b"")
            # A Parafé view too: it reads the same settings for its Brand's Parafé.
            parafe = client.post("/parafe-sync", json={"message": a2a_message("lamp")})
            assert (parafe.status_code, parafe.content) == (503, b"")
    log = tmp_path / "site.log"
    said = log.read_text()
    assert said.count("settings.PACTMW is invalid") == 1, said  # logged once
    assert "audiance" in said


def test_a_prefix_without_its_slash_still_closes_what_it_meant_to_guard(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # Under uvicorn no system check refuses "api/" (pactmw.E001 does under runserver): the
    # paths it meant must not be served unguarded meanwhile, and the others stay up.
    broken = {**settings, "protect_prefix": "api/"}
    with _site_under_uvicorn(tmp_path, broken) as client:
        assert client.get("/public").status_code == 200
        guarded = client.get("/api/echo")
        assert (guarded.status_code, guarded.content) == (503, b"")
    said = (tmp_path / "site.log").read_text()
    assert "protect_prefix must be a path starting with '/' (got 'api/')" in said


def test_a_bad_setting_is_a_503_from_the_views_without_the_middleware(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # The views answer for themselves: a site that serves the Provider (or only a Brand's
    # discovery document) without pactmw's middleware gets 503s, never 500s.
    broken = {**settings, "audiance": "typo"}
    without_middleware = {"PACTMW_TEST_MIDDLEWARE": "", **ROUTE_POPPY_VIEWS}
    with _site_under_uvicorn(
        tmp_path, broken, "pactmw_testsite.middleware_settings", without_middleware
    ) as client:
        for path in ("/brand-site/poppy.json", "/a2a/acme/.well-known/agent-card.json"):
            answer = client.get(path)
            assert (answer.status_code, answer.content) == (503, b""), path


# -- 8. Flask: error handlers and optional verification -----------------------------------------


def _flask_app(settings: dict[str, Any]) -> Flask:
    app = Flask("idioms")
    app.config["PACTMW"] = settings
    flask_adapter.Pactmw(app)

    @app.errorhandler(401)
    def unauthorized(error: Any) -> Any:
        reason = (
            error.failure.reason if isinstance(error, flask_adapter.PersonalAgentRefused) else "?"
        )
        return {"custom": True, "reason": reason}, 401

    @app.get("/mine")
    @flask_adapter.personal_agent_required
    def mine() -> Any:
        caller = flask_adapter.current_personal_agent()
        return {"actor_id": caller.actor_id if caller else None}

    @app.get("/api/inside")
    def inside() -> Any:
        return {"ok": True}

    @app.get("/maybe")
    def maybe() -> Any:
        caller = flask_adapter.verify_personal_agent(optional=True)
        return {"actor_id": caller.actor_id if caller else None}

    return app


def _scoped_view(app: Flask) -> None:
    @app.get("/api/scoped-sync")
    @flask_adapter.delegation_required("orders:read")
    def scoped() -> Any:
        return {"ok": True}


def test_flask_refuses_delegation_required_without_a_delegation_brand_at_init_app(
    settings: dict[str, Any],
) -> None:
    # A view decorated before `Pactmw(app)` (a blueprint registered first, say): init_app
    # sees it and refuses to start, naming the setting.
    app = Flask("idioms")
    app.config["PACTMW"] = _without_delegation_brand(settings)
    _scoped_view(app)
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert str(caught.value) == NO_DELEGATION_BRAND.format("app.config['PACTMW']")
    # With it set, the same app starts.
    app = Flask("idioms")
    app.config["PACTMW"] = settings
    _scoped_view(app)
    flask_adapter.Pactmw(app)


def test_flask_warns_of_delegation_required_where_no_brand_offers_delegation_at_init_app(
    settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # As Django's pactmw.W005: an app configured without delegation starts, and says which
    # views cannot work in it.
    app = Flask("idioms")
    app.config["PACTMW"] = _without_delegation(settings)
    _scoped_view(app)
    caplog.set_level(logging.WARNING, logger="pactmw.adapters")
    flask_adapter.Pactmw(app)
    warned = [r for r in caplog.records if r.name == "pactmw.adapters"]
    assert [(r.levelno, r.getMessage()) for r in warned] == [
        (logging.WARNING, NO_DELEGATION_OFFERED)
    ]


def test_flask_logs_delegation_required_without_a_delegation_brand_added_after_init_app(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # A view added after `Pactmw(app)` (as most single-file apps do): Flask has no hook that
    # tells the extension, so its first refused request says why, once, at ERROR.
    app = Flask("idioms")
    app.config["PACTMW"] = _without_delegation_brand(settings)
    flask_adapter.Pactmw(app)
    _scoped_view(app)
    caplog.set_level(logging.WARNING, logger="pactmw")
    with werkzeug_server(app) as base, loopback_client(base_url=base) as client:
        for headers in _sent_in_vain(world):
            assert_refused(client.get("/api/scoped-sync", headers=headers), INVALID_TOKEN)
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "pactmw.adapters"]
    assert said == [(logging.ERROR, NO_DELEGATION_BRAND.format("app.config['PACTMW']"))]


#: The test site's environment that routes its `parafe_action` views under settings without
#: Parafé, and also those naming the Brand "shop" (which these settings do not have).
ROUTE_PARAFE_VIEWS = {"PACTMW_TEST_PARAFE_VIEWS": "1"}
ROUTE_PARAFE_SHOP = {"PACTMW_TEST_PARAFE_VIEWS": "1", "PACTMW_TEST_PARAFE_SHOP": "1"}


def _without_parafe(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` where no Brand configures Parafé (nor names `parafe_brand`)."""
    brands = {
        brand_id: {key: value for key, value in table.items() if key != "parafe"}
        for brand_id, table in settings["brands"].items()
    }
    rest = {key: value for key, value in settings.items() if key != "parafe_brand"}
    return {**rest, "brands": brands}


def _two_parafe_brands(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with a second Brand with Parafé, and no `parafe_brand` to choose."""
    rest = {key: value for key, value in settings.items() if key != "parafe_brand"}
    globex = {**copy.deepcopy(settings["brands"]["acme"]), "name": "Globex"}
    return {**rest, "brands": {**settings["brands"], "globex": globex}}


#: What `parafe_action("create_order")` on `{}` says where no Brand configures Parafé.
NO_PARAFE = (
    "parafe_action('create_order') on {} refuses every request: no Brand configures Parafé "
    "([brands.X.parafe]), so no consent can be checked"
)
#: What `parafe_action("create_order", brand="shop")` on `{}` says: "shop" is no Brand.
PARAFE_SHOP_UNKNOWN = (
    "parafe_action('create_order', brand='shop') on {} refuses every request: 'shop' is not "
    "one of brands; name a Brand with Parafé ('acme') in brand=..."
)
#: What `parafe_action("create_order")` on `{0}` says where two Brands configure Parafé and
#: the settings (`{1}`) name neither.
PARAFE_BRAND_UNSET = (
    "parafe_action('create_order') on {0} refuses every request: several Brands configure "
    "Parafé ('acme', 'globex'); pass brand=... or set {1}['parafe_brand']"
)


def test_manage_py_check_reports_a_parafe_view_naming_a_brand_without_parafe(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # Reported: a routed view behind `parafe_action(..., brand=...)` naming a Brand without
    # Parafé was a RuntimeError (a 500) at each request, and nothing said at startup. A
    # class-based view's method decorated with `method_decorator` is found too.
    done = _manage_py_check(tmp_path, settings, **ROUTE_PARAFE_SHOP)
    assert done.returncode != 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "pactmw.E007" in said, said
    assert PARAFE_SHOP_UNKNOWN.format("/parafe-shop") in said, said
    assert PARAFE_SHOP_UNKNOWN.format("/parafe-method (ParafeMethod.post)") in said, said
    # The views naming no Brand take the settings' `parafe_brand`: nothing to say of them.
    assert "/parafe-sync" not in said, said


def test_manage_py_check_reports_parafe_views_where_several_brands_have_parafe(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    done = _manage_py_check(tmp_path, _two_parafe_brands(settings))
    assert done.returncode != 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "pactmw.E007" in said, said
    assert PARAFE_BRAND_UNSET.format("/parafe-sync", "settings.PACTMW") in said, said
    assert PARAFE_BRAND_UNSET.format("/parafe-async", "settings.PACTMW") in said, said
    # Naming the Brand in the settings settles it.
    named = _manage_py_check(tmp_path, {**_two_parafe_brands(settings), "parafe_brand": "acme"})
    assert "pactmw.E007" not in named.stderr, named.stderr


def test_manage_py_check_warns_of_parafe_views_where_no_brand_configures_parafe(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # Test sites and examples route Parafé views under settings without Parafé: said as a
    # warning, which does not stop the site, as pactmw.W005 says of delegation views.
    done = _manage_py_check(tmp_path, _without_parafe(settings), **ROUTE_PARAFE_SHOP)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "pactmw.W007" in said, said
    assert "pactmw.E007" not in said, said
    assert NO_PARAFE.format("/parafe-sync") in said, said
    assert NO_PARAFE.format("/parafe-async") in said, said
    shop = NO_PARAFE.replace("'create_order'", "'create_order', brand='shop'")
    assert shop.format("/parafe-method (ParafeMethod.post)") in said, said


def test_a_parafe_view_naming_a_brand_without_parafe_is_a_503_where_no_check_runs(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    # Under uvicorn no system check runs: each request is a 503, and the log says why once.
    with _site_under_uvicorn(tmp_path, settings, env=ROUTE_PARAFE_SHOP) as client:
        for path in ("/parafe-shop", "/parafe-method", "/parafe-shop"):
            answer = client.post(path, json={"message": a2a_message("lamp")})
            assert answer.status_code == 503, (path, answer.text[:300])
            assert answer.json()["error"] == "temporarily_unavailable"
    said = (tmp_path / "site.log").read_text().splitlines()
    assert said.count(PARAFE_SHOP_UNKNOWN.format("/parafe-shop")) == 1, said
    assert said.count(PARAFE_SHOP_UNKNOWN.format("/parafe-method")) == 1, said


def _parafe_view(app: Flask, brand: str | None = None) -> None:
    @app.post("/parafe")
    @flask_adapter.parafe_action("create_order", brand=brand)
    def parafe_view() -> Any:
        return {"ok": True}


def test_flask_refuses_a_parafe_view_naming_a_brand_without_parafe_at_init_app(
    settings: dict[str, Any],
) -> None:
    app = Flask("idioms")
    app.config["PACTMW"] = settings
    _parafe_view(app, brand="shop")
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert str(caught.value) == PARAFE_SHOP_UNKNOWN.format("/parafe")
    # Naming the Brand with Parafé, the same app starts.
    app = Flask("idioms")
    app.config["PACTMW"] = settings
    _parafe_view(app, brand="acme")
    flask_adapter.Pactmw(app)


def test_flask_refuses_parafe_views_where_several_brands_have_parafe_at_init_app(
    settings: dict[str, Any],
) -> None:
    app = Flask("idioms")
    app.config["PACTMW"] = _two_parafe_brands(settings)
    _parafe_view(app)
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert str(caught.value) == PARAFE_BRAND_UNSET.format("/parafe", "app.config['PACTMW']")


def test_flask_warns_of_parafe_views_where_no_brand_configures_parafe_at_init_app(
    settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    app = Flask("idioms")
    app.config["PACTMW"] = _without_parafe(settings)
    _parafe_view(app)
    caplog.set_level(logging.WARNING, logger="pactmw.adapters")
    flask_adapter.Pactmw(app)
    warned = [r for r in caplog.records if r.name == "pactmw.adapters"]
    assert [(r.levelno, r.getMessage()) for r in warned] == [
        (logging.WARNING, NO_PARAFE.format("/parafe"))
    ]


def test_flask_answers_503_for_a_parafe_view_added_after_init_app(
    settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # A view added after `Pactmw(app)`: Flask tells the extension nothing of it, so each
    # request is a 503 (it was a RuntimeError, a 500) and the first says why at ERROR.
    app = Flask("idioms")
    app.config["PACTMW"] = settings
    flask_adapter.Pactmw(app)
    _parafe_view(app, brand="shop")
    caplog.set_level(logging.WARNING, logger="pactmw")
    with werkzeug_server(app) as base, loopback_client(base_url=base) as client:
        for _ in range(2):
            answer = client.post("/parafe", json={"message": a2a_message("lamp")})
            assert answer.status_code == 503, answer.text[:300]
            assert answer.json()["error"] == "temporarily_unavailable"
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "pactmw.adapters"]
    assert said == [(logging.ERROR, PARAFE_SHOP_UNKNOWN.format("/parafe"))]


def test_flask_refusals_go_through_the_apps_error_handlers(
    world: Harness, settings: dict[str, Any]
) -> None:
    with werkzeug_server(_flask_app(settings)) as base, loopback_client(base_url=base) as client:
        refused = client.get("/mine")
        assert refused.status_code == 401
        assert refused.json() == {"custom": True, "reason": "missing_token"}
        assert client.get("/mine", headers=bearer(token(world))).status_code == 200
        # The guarded prefix keeps PACT's empty-bodied challenge, whatever the app's handlers.
        assert_refused(client.get("/api/inside"))


def test_flask_sees_a_valid_token_outside_the_prefix_on_request(
    world: Harness, settings: dict[str, Any]
) -> None:
    with werkzeug_server(_flask_app(settings)) as base, loopback_client(base_url=base) as client:
        assert client.get("/maybe").json() == {"actor_id": None}
        seen = client.get("/maybe", headers=bearer(token(world))).json()
        assert seen["actor_id"] is not None
        # An opaque token is another scheme's (anonymous); a personal agent's bad one is not.
        assert client.get("/maybe", headers=bearer("junk")).json() == {"actor_id": None}
        expired = token(world, iat=1_000_000_000, exp=1_000_000_100)
        assert client.get("/maybe", headers=bearer(expired)).status_code == 401


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("store", "postgresql://nouser@127.0.0.1:1/x"),
        ("rate_limit", {"per_agent": 5}),
        ("signing_keys", ["/nowhere/pactmw-signing.jwk"]),
    ],
)
def test_flask_refuses_a_provider_setting_without_brands_at_init_app(
    settings: dict[str, Any], key: str, value: Any
) -> None:
    app = Flask("idioms")
    app.config["PACTMW"] = {**_identity_only(settings), key: value}
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert str(caught.value) == (
        f"{key} is a Provider setting: it needs brands (add brands, or remove {key})"
    )


def test_flask_refuses_a_prefix_without_its_leading_slash_at_init_app(
    settings: dict[str, Any],
) -> None:
    # "api/" never matches a request path (they start with "/"): it would guard nothing.
    app = Flask("idioms")
    app.config["PACTMW"] = {**_identity_only(settings), "protect_prefix": "api/"}
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert str(caught.value) == "protect_prefix must be a path starting with '/' (got 'api/')"


@pytest.mark.parametrize(("broken", "named"), BAD_SETTINGS)
def test_flask_refuses_a_bad_pactmw_setting_at_init_app(
    settings: dict[str, Any], broken: dict[str, Any], named: str
) -> None:
    # The cases Django's system check reports (pactmw.E001), at Flask's startup.
    app = Flask("idioms")
    app.config["PACTMW"] = {k: v for k, v in {**settings, **broken}.items() if v is not None}
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert named in str(caught.value)


def test_flask_names_a_missing_pactmw_setting_at_init_app() -> None:
    # Pactmw(app) before app.config["PACTMW"] is set (an app factory that loads its config
    # later, a config object that names it otherwise) says which setting is missing, not
    # "audience is required" of a dict the app never wrote.
    app = Flask("idioms")
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert str(caught.value) == (
        "app.config['PACTMW'] is not set: set it to a dict (audience, agents, ...) "
        "before Pactmw(app) or init_app(app)"
    )


@pytest.mark.parametrize("value", ["pactmw.toml", None, ["audience"]])
def test_flask_names_a_pactmw_setting_that_is_not_a_dict_at_init_app(value: object) -> None:
    app = Flask("idioms")
    app.config["PACTMW"] = value
    with pytest.raises(ConfigError) as caught:
        flask_adapter.Pactmw(app)
    assert str(caught.value) == (
        f"app.config['PACTMW'] must be a dict (audience, agents, ...), not {type(value).__name__}"
    )


def test_flask_refuses_a_second_init_app_on_the_same_app(settings: dict[str, Any]) -> None:
    # Found in a Flask trial: `Pactmw(app)` at import and `pactmw.init_app(app)` in the
    # factory too built a second Provider (the first one's store left open), added a second
    # guard to every request and routed the Provider twice, silently. Flask's extensions
    # refuse it (Flask-SQLAlchemy: "already registered on this Flask app").
    app = Flask("idioms")
    app.config["PACTMW"] = settings
    extension = flask_adapter.Pactmw(app)
    provider = app.extensions["pactmw"].guard.provider
    hooks = list(app.before_request_funcs[None])
    for again in (lambda: extension.init_app(app), lambda: flask_adapter.Pactmw(app)):
        with pytest.raises(ConfigError) as caught:
            again()
        assert str(caught.value) == (
            "pactmw is already initialised on this app: call Pactmw(app) or "
            "Pactmw().init_app(app) once per app"
        )
    assert app.extensions["pactmw"].guard.provider is provider  # the first one still serves
    assert app.before_request_funcs[None] == hooks
    card = app.test_client().get("/a2a/acme/.well-known/agent-card.json")
    assert card.status_code == 200, card.text
    assert len([rule for rule in app.url_map.iter_rules() if rule.rule.startswith("/a2a/")]) == 1


@pytest.mark.parametrize("templates", ["app's loader", "folder"])
def test_flask_starts_without_brands_with_templates(
    tmp_path: Path, world: Harness, settings: dict[str, Any], templates: str
) -> None:
    identity_only = _identity_only(settings)
    if templates == "folder":  # else init_app adds the app's own Jinja loader as templates
        identity_only["templates"] = [str(tmp_path)]
    client = _flask_app(identity_only).test_client()  # init_app raised nothing
    assert client.get("/mine").status_code == 401
    assert client.get("/mine", headers=bearer(token(world))).status_code == 200


# -- 9. logging -----------------------------------------------------------------------------


def test_misconfiguration_refusals_log_at_warning_routine_ones_at_info(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    provider = guard_from_mapping(settings).provider
    assert provider is not None
    caplog.set_level(logging.DEBUG, logger="pactmw")
    stranger = AgentKey.generate("ES256", "stranger")
    cases = {
        "unknown_issuer": (stranger.sign(claims("https://unknown.example")), logging.WARNING),
        "bad_audience": (token(world, aud="https://elsewhere.example/a2a"), logging.WARNING),
        "expired": (token(world, iat=1_000_000_000, exp=1_000_000_100), logging.INFO),
    }
    for reason, (sent, level) in cases.items():
        caplog.clear()
        request = NeutralRequest(
            "POST", "/a2a/acme/message:send", headers=(("authorization", f"Bearer {sent}"),)
        )
        assert provider.handle(request, lambda limit: b"{}").status == 401
        (record,) = [r for r in caplog.records if r.name == "pactmw.identity"]
        assert record.levelno == level, reason
        message = record.getMessage()
        assert f"reason={reason}" in message
        assert "brand=acme" in message
        assert sent not in caplog.text
        assert sent.split(".")[1] not in caplog.text
        issuer = "https://unknown.example" if reason == "unknown_issuer" else ISSUER
        assert f"issuer={issuer}" in message


def test_a_hostile_issuer_or_path_cannot_forge_hide_or_flood_a_log_line(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # What the caller wrote (a token's `iss`, a path) reaches the log escaped and cut short.
    unguarded = _requires_outside_the_prefix(settings, "/outside/{rest}")
    stranger = AgentKey.generate("ES256", "stranger")
    caplog.set_level(logging.DEBUG, logger="pactmw")
    with uvicorn_server(_backend_app(settings)) as base, loopback_client(base_url=base) as client:
        for issuer in (HOSTILE, "https://" + HOSTILE):
            assert_refused(client.get("/pa", headers=bearer(stranger.sign(claims(issuer)))))
    with uvicorn_server(unguarded) as base, loopback_client(base_url=base) as client:
        path = "/outside/" + quote(HOSTILE, safe="")
        assert_refused(client.get(path, headers=bearer(token(world))))
    messages = assert_logs_tame(caplog.records)
    assert sum(m.startswith("personal agent refused: reason=unknown_issuer") for m in messages) == 2
    (warned,) = [m for m in messages if m.startswith("requires() on /outside/x")]
    assert "forged\\x1b[2K" in warned  # the URL drops the newline on the way; ESC remains


#: A Provider's public routes: what a middleware in front of it refuses says once how to fix it.
_PUBLIC_ROUTES = [
    ("GET", "/a2a/acme/.well-known/agent-card.json"),
    ("GET", "/a2a/acme/oauth/.well-known/oauth-authorization-server"),
    ("GET", "/a2a/acme/oauth/jwks.json"),
    ("GET", "/a2a/acme/oauth/consent"),
    ("POST", "/a2a/acme/oauth/consent/decision"),
    ("GET", "/a2a/acme/oauth/agents"),
]


def _provider_behind_a_middleware(kind: str, settings: dict[str, Any]) -> Any:
    """`PersonalAgentMiddleware` in front of the Provider, not told it serves it."""
    provider = guard_from_mapping(settings).provider
    assert provider is not None
    if kind == "asgi":
        return Starlette(
            routes=asgi.a2a_routes(provider),
            middleware=[Middleware(asgi.PersonalAgentMiddleware, verifier=provider.verifier)],
        )
    return wsgi.PersonalAgentMiddleware(wsgi.A2AProviderApp(provider), provider.verifier)


def _middleware_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("pactmw.adapters")]


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_middleware_in_front_of_the_providers_card_says_what_it_needs(
    kind: str, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Reported: `PersonalAgentMiddleware` (default prefix `/a2a/`) in front of `a2a_routes`
    # answered the public Agent Card with 401, logged at INFO only (a missing token), so no
    # agent found the Brand and nothing said why. It still refuses (told nothing, it cannot
    # know what the app serves), and says once what fixes it.
    serve = uvicorn_server if kind == "asgi" else werkzeug_server
    caplog.set_level(logging.WARNING, logger="pactmw")
    app = _provider_behind_a_middleware(kind, settings)
    with serve(app) as base, loopback_client(base_url=base) as client:
        for brand in ("acme", "acme", "other"):
            assert_refused(client.get(f"/a2a/{brand}/.well-known/agent-card.json"))
        assert_refused(client.get("/a2a/acme/nothing"))
    assert _middleware_warnings(caplog) == [
        "PersonalAgentMiddleware refused /a2a/acme/.well-known/agent-card.json, a Provider's "
        "public route (an Agent Card, an authorization server's metadata or JWKS, a consent "
        "page): when the app behind it serves the Provider (a2a_routes, A2AProviderApp), give "
        "the middleware serves_provider=provider"
    ]


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
@pytest.mark.parametrize(("method", "path"), _PUBLIC_ROUTES)
def test_a_middleware_in_front_of_any_public_route_of_the_provider_says_it(
    kind: str, method: str, path: str, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Only the card was said: the authorization server's metadata and JWKS (which an agent
    # reads to check a receipt) and the consent pages (a person's browser, which carries no
    # JWT) were refused in silence. The operations that need a JWT are not said: a refusal
    # there is the middleware's job.
    serve = uvicorn_server if kind == "asgi" else werkzeug_server
    caplog.set_level(logging.WARNING, logger="pactmw")
    app = _provider_behind_a_middleware(kind, settings)
    with serve(app) as base, loopback_client(base_url=base) as client:
        assert_refused(client.post("/a2a/acme/message:send", json={}))
        assert_refused(client.post("/a2a/acme/oauth/jwks.json"))  # no such route
        assert _middleware_warnings(caplog) == []
        assert_refused(client.request(method, path))
    (warned,) = _middleware_warnings(caplog)
    assert warned.startswith(f"PersonalAgentMiddleware refused {path}, a Provider's public route")


# -- 10. refusals the log used to keep silent (FastAPI new-user trial) -----------------------


def _whoami_app(kind: str, verifier: Any, *, optional: bool = False) -> Any:
    """`/a2a/whoami` guarded by a check that takes no delegation: the FastAPI guide's first
    sample (`fastapi`), or the ASGI or WSGI middleware; with `optional`, the adapter's
    optional mode instead (FastAPI's `optional=True` scheme, the ASGI or WSGI decorator's)."""
    if kind == "fastapi":
        scheme = fastapi_adapter.PersonalAgentScheme(verifier, optional=optional)
        app = FastAPI(exception_handlers=fastapi_adapter.EXCEPTION_HANDLERS)

        @app.get("/a2a/whoami")
        def whoami(caller: PersonalAgent | None = Security(scheme)) -> Any:  # noqa: B008
            return {"actor_id": caller.actor_id if caller else None}

        return app
    if kind == "asgi":

        async def endpoint(request: Request) -> JSONResponse:
            caller = asgi.current_personal_agent(request)
            return JSONResponse({"actor_id": caller.actor_id if caller else None})

        if optional:
            return Starlette(
                routes=[
                    Route(
                        "/a2a/whoami",
                        asgi.personal_agent_required(verifier, optional=True)(endpoint),
                    )
                ]
            )
        return Starlette(
            routes=[Route("/a2a/whoami", endpoint)],
            middleware=[Middleware(asgi.PersonalAgentMiddleware, verifier=verifier)],
        )

    def view(environ: Any, start_response: Any) -> list[bytes]:
        caller = wsgi.current_personal_agent(environ)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"actor_id": caller.actor_id if caller else None}).encode()]

    if optional:
        return wsgi.personal_agent_required(verifier, optional=True)(view)
    return wsgi.PersonalAgentMiddleware(view, verifier)


def _serve(kind: str, app: Any) -> Any:
    return werkzeug_server(app) if kind == "wsgi" else uvicorn_server(app)


@pytest.mark.parametrize("kind", ["fastapi", "asgi", "wsgi"])
def test_a_delegation_where_none_is_offered_is_logged_with_its_reason(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # Found in a FastAPI trial: the guide's first sample refused a valid identity sent with
    # a delegation (401 invalid_token, `not_offered`) and nothing was logged, at any level.
    app = _whoami_app(kind, guard_from_mapping(settings).verifier)
    sent = "x.y.z"
    caplog.set_level(logging.DEBUG, logger="pactmw")
    with _serve(kind, app) as base, loopback_client(base_url=base) as client:
        headers = {**bearer(token(world)), "X-A2A-User-Delegation": f"Bearer {sent}"}
        assert_refused(client.get("/a2a/whoami", headers=headers), INVALID_TOKEN)
    records = [r for r in caplog.records if r.name.startswith("pactmw")]
    assert [(r.name, r.levelno, r.getMessage()) for r in records] == [
        (
            "pactmw.identity",
            logging.INFO,
            f"personal agent refused: reason=not_offered issuer={ISSUER} brand=- "
            "credential=delegation_token "
            "detail='this Brand offers no delegation'",
        )
    ]
    assert sent not in caplog.text


def _foreign_delegations(target: Target) -> dict[str, str]:
    """`X-A2A-User-Delegation` values `target`'s Provider refuses, by the reason it logs: one
    signed with a key it does not hold, one expired, one for another Brand's interface."""
    now = time.time()
    stranger = generate_private_jwk("ES256", kid="sign-1")  # the harness key's kid, not its key

    def minted(key: Any, interface: str, at: float) -> str:
        token = mint_access_token(
            key=key,
            interface_url=f"{BASE_URL}/a2a/{interface}",
            account="acct-1",
            client_id=ISSUER,
            scopes=("orders:read",),
            grant_id="g-unknown",
            now=at,
        )
        return f"Bearer {token}"

    return {
        "bad_signature": minted(stranger, "acme", now),
        "expired": minted(target.signing.signer, "acme", now - 7200),  # a 1 h token, 2 h old
        "bad_issuer": minted(target.signing.signer, "elsewhere", now),
    }


def _refusals(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, str]]:
    return [
        (r.name, r.levelno, r.getMessage())
        for r in caplog.records
        if r.name.startswith("pactmw") and "refused" in r.getMessage()
    ]


@pytest.mark.parametrize("name", ["starlette", "wsgi"])
def test_a_delegation_the_providers_own_routes_refuse_is_logged_as_the_guard_logs_it(
    world: Harness, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    # The guard logged a delegation it refused where none is offered, but `message:send`
    # refused a forged, expired or foreign delegation (401 invalid_token) with nothing in
    # the log at any level, and so did the guard itself on the app's own routes.
    target = world.get(name)
    message = {"message": a2a_message("hello")}
    caplog.set_level(logging.DEBUG, logger="pactmw")
    expected = []
    for reason, delegation in _foreign_delegations(target).items():
        headers = target.headers(target.token(), delegation)
        sent = target.client.post("/a2a/acme/message:send", json=message, headers=headers)
        assert_refused(sent, INVALID_TOKEN)
        assert_refused(target.client.get("/api/echo", headers=headers), INVALID_TOKEN)
        line = (
            f"personal agent refused: reason={reason} issuer={ISSUER} brand=acme "
            "credential=delegation_token"  # no detail: the forgery names a kid it has
        )
        expected += [("pactmw.identity", logging.INFO, line)] * 2
        assert delegation.split()[1] not in caplog.text
    assert_logs_tame(caplog.records)
    assert _refusals(caplog) == expected


@pytest.mark.parametrize("serve", ["asgi", "wsgi"])
def test_a_delegation_sent_to_a_brand_without_delegation_is_logged(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture, serve: str
) -> None:
    # The Provider's own route of a Brand that offers no delegation refused one (401
    # invalid_token, `not_offered`) without a word, where the guard says it.
    undelegated = copy.deepcopy(settings)
    del undelegated["brands"]["acme"]["delegation"]
    undelegated["delegation_brand"] = None
    provider = guard_from_mapping(undelegated).provider
    assert provider is not None
    app = asgi.A2AProviderApp(provider) if serve == "asgi" else wsgi.A2AProviderApp(provider)
    sent = "x.y.z"
    caplog.set_level(logging.DEBUG, logger="pactmw")
    with _serve(serve, app) as base, loopback_client(base_url=base) as client:
        headers = {**bearer(token(world)), "X-A2A-User-Delegation": f"Bearer {sent}"}
        message = {"message": a2a_message("hello")}
        answer = client.post("/a2a/acme/message:send", json=message, headers=headers)
        assert_refused(answer, INVALID_TOKEN)
    assert_logs_tame(caplog.records)
    assert _refusals(caplog) == [
        (
            "pactmw.identity",
            logging.INFO,
            f"personal agent refused: reason=not_offered issuer={ISSUER} brand=acme "
            "credential=delegation_token "
            "detail='this Brand offers no delegation'",
        )
    ]
    assert sent not in caplog.text


@pytest.mark.parametrize("kind", ["fastapi", "asgi", "wsgi"])
def test_another_scheme_in_optional_mode_is_no_refusal_in_the_log(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # Found in the same trial: an optional scheme let `Authorization: Basic ...` through as
    # anonymous (200), as it should, but logged `personal agent refused:
    # reason=malformed_header` at INFO for it. A Bearer token that is no PACT JWT stays as
    # it was decided: anonymous, and logged, since it may be a personal agent's gone wrong.
    app = _whoami_app(kind, guard_from_mapping(settings).verifier, optional=True)
    caplog.set_level(logging.INFO, logger="pactmw")
    with _serve(kind, app) as base, loopback_client(base_url=base) as client:
        for basic in ("Basic dXNlcjpwYXNz", "Digest username=jane"):
            answer = client.get("/a2a/whoami", headers={"Authorization": basic})
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"actor_id": None}
        assert [r for r in caplog.records if r.name.startswith("pactmw")] == []
        answer = client.get("/a2a/whoami", headers=bearer("x.y.z"))
        assert answer.json() == {"actor_id": None}
        # A delegation beside another scheme is still refused (bound to an identity).
        delegated = {"Authorization": "Basic dXNlcjpwYXNz", "X-A2A-User-Delegation": "a.b.c"}
        assert_refused(client.get("/a2a/whoami", headers=delegated))
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert messages == [
        "personal agent refused: reason=malformed_token issuer=- brand=- credential=identity_jwt",
        # The delegation needs a Bearer identity: what is refused is the missing identity.
        "personal agent refused: reason=malformed_header issuer=- brand=- credential=identity_jwt",
    ]


def test_requires_a_scope_behind_a_backend_without_delegation_says_so(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # `requires([... "scope:x"])` behind `PersonalAgentBackend(verifier)` without delegation
    # arguments refused every caller (401 invalid_token) and nothing said why.
    verifier = guard_from_mapping(settings).verifier

    @asgi.requires(["personal_agent", "scope:orders:read"])
    async def orders(request: Request) -> Response:
        return JSONResponse({"scopes": request.auth.scopes})

    @asgi.requires("personal_agent")
    async def plain(request: Request) -> Response:
        return JSONResponse({"ok": True})

    backend = asgi.PersonalAgentBackend(verifier)
    app = Starlette(
        routes=[Route("/orders", orders), Route("/plain", plain)],
        middleware=[
            Middleware(AuthenticationMiddleware, backend=backend, on_error=asgi.on_auth_error)
        ],
    )
    caplog.set_level(logging.WARNING, logger="pactmw")
    with uvicorn_server(app) as base, loopback_client(base_url=base) as client:
        for _ in range(2):
            assert_refused(client.get("/orders", headers=bearer(token(world))), INVALID_TOKEN)
        assert client.get("/plain", headers=bearer(token(world))).status_code == 200
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert warned == [
        "requires() with scope:... on /orders refuses every caller: the check that verified "
        "it (PersonalAgentMiddleware, PersonalAgentBackend or personal_agent_required) takes "
        "no delegation; give it delegation_provider=... and delegation_brand=..."
    ]


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_delegation_required_under_a_decorator_without_delegation_says_so(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # `delegation_required` under `personal_agent_required(verifier)` without delegation
    # arguments refused every caller and said nothing. It is said per request, not where
    # the decorators are stacked: the decorator reuses a caller that a middleware (which may
    # take delegations) verified, so only the request tells which check verified it.
    verifier = guard_from_mapping(settings).verifier
    app: Any
    if kind == "asgi":

        async def endpoint(request: Request) -> PlainTextResponse:
            return PlainTextResponse("ok")

        scoped = asgi.personal_agent_required(verifier)(
            asgi.delegation_required("orders:read")(endpoint)
        )
        app = Starlette(routes=[Route("/orders", scoped)])
    else:

        def view(environ: Any, start_response: Any) -> list[bytes]:
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]

        app = wsgi.personal_agent_required(verifier)(wsgi.delegation_required("orders:read")(view))
    caplog.set_level(logging.WARNING, logger="pactmw")
    with _serve(kind, app) as base, loopback_client(base_url=base) as client:
        for _ in range(2):
            assert_refused(client.get("/orders", headers=bearer(token(world))), INVALID_TOKEN)
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert warned == [
        "delegation_required() on /orders refuses every caller: the check that verified it "
        "(PersonalAgentMiddleware, PersonalAgentBackend or personal_agent_required) takes "
        "no delegation; give it delegation_provider=... and delegation_brand=..."
    ]


@pytest.mark.parametrize("kind", ["fastapi", "asgi", "wsgi"])
def test_scopes_under_a_middleware_without_delegation_say_so(
    world: Harness, settings: dict[str, Any], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # FastAPI's `Security(scopes=...)` (and the ASGI or WSGI `delegation_required`) under a
    # `PersonalAgentMiddleware` prefix whose middleware takes no delegation refused every
    # caller and said nothing: the scheme, though it takes delegations, reuses the caller the
    # middleware verified.
    guard = guard_from_mapping(settings)
    options: dict[str, Any] = {"delegation_provider": guard.provider, "delegation_brand": "acme"}
    if kind == "fastapi":
        scheme = fastapi_adapter.PersonalAgentScheme(guard.verifier, **options)
        fast = FastAPI(exception_handlers=fastapi_adapter.EXCEPTION_HANDLERS)

        @fast.get("/a2a/orders")
        def orders(caller: PersonalAgent = Security(scheme, scopes=["orders:read"])) -> Any:  # noqa: B008
            return {"actor_id": caller.actor_id}

        app: Any = asgi.PersonalAgentMiddleware(fast, guard.verifier)
        what = "Security(PersonalAgentScheme(...), scopes=[...])"
    elif kind == "asgi":

        async def endpoint(request: Request) -> PlainTextResponse:
            return PlainTextResponse("ok")

        app = Starlette(
            routes=[Route("/a2a/orders", asgi.delegation_required("orders:read")(endpoint))],
            middleware=[Middleware(asgi.PersonalAgentMiddleware, verifier=guard.verifier)],
        )
        what = "delegation_required()"
    else:

        def view(environ: Any, start_response: Any) -> list[bytes]:
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]

        scoped = wsgi.delegation_required("orders:read")(view)
        app = wsgi.PersonalAgentMiddleware(scoped, guard.verifier)
        what = "delegation_required()"
    caplog.set_level(logging.WARNING, logger="pactmw")
    with _serve(kind, app) as base, loopback_client(base_url=base) as client:
        for _ in range(2):
            assert_refused(client.get("/a2a/orders", headers=bearer(token(world))), INVALID_TOKEN)
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]
    assert warned == [
        f"{what} on /a2a/orders refuses every caller: the check that verified it "
        "(PersonalAgentMiddleware, PersonalAgentBackend or personal_agent_required) takes "
        "no delegation; give it delegation_provider=... and delegation_brand=..."
    ]
