"""The apps of the adapter contract suite: one set of routes, built with each adapter.

Every app is configured from the same `PACTMW`-style dict (`guard_from_mapping`), serves the
Provider (`/a2a/...`, and Poppy's documents at the site root for a Brand with Poppy) as its
framework's users add it in one step, guards the settings' `protect_prefix` (`PREFIX`,
`/api`, unless a case configures another) with its middleware, and has
these routes:

* `/api/echo` (GET, POST): the middleware's caller. A POST body must be JSON (else 400).
* `/public`: no protection; reports the caller the adapter attached (None outside `/api/`).
* `/backend/echo` (Starlette only): Starlette's `AuthenticationMiddleware` with
  `PersonalAgentBackend` and `on_auth_error`; reports the caller it authenticated.
* `/apiary`: the same, beside the prefix: `/api` is a path segment, not the start of a word.
* `/decorated-{sync,async}`: the adapter's "personal agent required" decorator/dependency.
* `/optional`: the same in optional mode (anonymous without `Authorization`).
* `/api/scoped-{sync,async}`: "delegation with `orders:read` required".
* `/parafe-{sync,async}` (POST): "Parafé consent for `create_order` required"; the async
  variant reads the body again and echoes its first text part. Under settings whose Brand
  has no Parafé, the Starlette and FastAPI endpoints have no agent (nor `app.state`'s), the
  Flask and Django ones no Brand to take it from, and plain WSGI has no such route.
* `/.well-known/apple-app-site-association`: the app's own document beside the Provider's
  (Poppy's `/.well-known/poppy.json`), routed after them: as `/public`.
* `/a2a/internal/orders` (`APP_UNDER_MOUNT`) and `/a2a/acme/mine` (`APP_UNDER_BRAND`): the
  app's own views under the Provider's mount, as `/public`, routed before the Provider's
  paths (Flask: more specific rules; Django: listed before `a2a_urlpatterns()`). Only the
  adapters that guard once the request is routed have them (Flask, Django): the ASGI and
  WSGI middleware run before routing and leave all of `/a2a/` to the Provider.

A server has only the variants its framework has (plain WSGI has no async views).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request, Security
from flask import Flask
from flask import request as flask_request
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

from pactmw.adapters import asgi, wsgi
from pactmw.adapters import fastapi as fastapi_adapter
from pactmw.adapters import flask as flask_adapter
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.app import Provider
from pactmw.provider.guard import Guard, guard_from_mapping

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

BRAND = "acme"
#: The guarded prefix, written without its trailing slash: the form that could also have
#: guarded `/apiary` (the slash-ended form is proven in tests/advisories).
PREFIX = "/api"
SCOPE = "orders:read"
ACTION = "create_order"
#: The app's own document under /.well-known, where Poppy's are too.
WELL_KNOWN = "/.well-known/apple-app-site-association"
#: The app's own view under `/a2a/`, whose first segment is no Brand's.
APP_UNDER_MOUNT = "/a2a/internal/orders"
#: The app's own view under the Brand's id, a path the Provider would answer otherwise.
APP_UNDER_BRAND = f"/a2a/{BRAND}/mine"


def describe(
    caller: PersonalAgent | None, via: str, named: Any = None, granted: Any = None
) -> dict[str, Any]:
    """What every route reports about the caller it saw: `caller` as the adapter's accessor
    gives it, and (`named`, `granted`) the caller's actor id and delegated scopes as the
    framework's guide says to read them, where that is another place (`request.user`,
    `request.auth.scopes`, `environ["pactmw.personal_agent"]`)."""
    delegation = caller.delegation if caller is not None else None
    actor_id = caller.actor_id if caller is not None else None
    scopes = sorted(delegation.scopes) if delegation is not None else []
    return {
        "actor_id": actor_id,
        "account": delegation.account if delegation is not None else None,
        "scopes": scopes,
        "via": via,
        "named": actor_id if named is None else named,
        "granted": scopes if granted is None else granted,
    }


def asgi_describe(
    request: StarletteRequest, via: str, caller: PersonalAgent | None = None
) -> dict[str, Any]:
    """`describe` of a Starlette/FastAPI request: its caller (`caller`, a dependency's, or
    `current_personal_agent`) and what `request.user` and `request.auth.scopes` say."""
    found = caller if caller is not None else asgi.current_personal_agent(request)
    user = request.scope.get("user")
    auth = request.scope.get("auth")
    named = user.personal_agent.actor_id if isinstance(user, asgi.PersonalAgentUser) else ""
    held = list(auth.scopes) if auth is not None else []
    granted = sorted(scope.removeprefix("scope:") for scope in held if scope.startswith("scope:"))
    return describe(found, via, named if found is not None else None, granted)


def delegation_options(config: dict[str, Any], provider: Provider) -> dict[str, Any]:
    """The delegation arguments of an adapter built by hand, as `PACTMW["delegation_brand"]`
    configures Flask's and Django's: none when the settings name no delegation Brand."""
    brand = config.get("delegation_brand")
    if brand is None:
        return {}
    return {"delegation_provider": provider, "delegation_brand": brand}


def parafe_reply(turn: Any, text: str) -> dict[str, Any]:
    """The A2A message a Parafé-guarded route answers (receipts are added by the adapter)."""
    assert turn is not None
    assert turn.consent is not None
    turn.complete(ACTION, business_ref="C-1")
    return {"message": {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": text}]}}


def first_text(body: bytes) -> str:
    return str(json.loads(body)["message"]["parts"][0]["text"])


# -- Starlette -------------------------------------------------------------------------------


def provider_root_app(config: dict[str, Any]) -> Any:
    """The Provider alone at the site root, as `pactmw serve` runs it (no host app)."""
    provider = guard_from_mapping(config).provider
    assert provider is not None
    return asgi.A2AProviderApp(provider)


def starlette_app(config: dict[str, Any]) -> Any:
    guard = guard_from_mapping(config)
    provider = guard.provider
    assert provider is not None
    options = delegation_options(config, provider)
    required = asgi.personal_agent_required(guard.verifier, **options)
    optional = asgi.personal_agent_required(guard.verifier, optional=True, **options)
    scoped = asgi.delegation_required(SCOPE)
    # Without Parafé, no agent: the endpoint looks in `app.state`, which has none either.
    parafe = asgi.parafe_action(ACTION, provider.parafe.get(BRAND))

    async def echo(request: StarletteRequest) -> Response:
        if request.method == "POST":
            try:
                json.loads(await request.body())
            except ValueError:
                return PlainTextResponse("body is not JSON", status_code=400)
        return JSONResponse(asgi_describe(request, "scope"))

    def sync_view(request: StarletteRequest) -> Response:
        return JSONResponse(asgi_describe(request, "sync"))

    async def async_view(request: StarletteRequest) -> Response:
        return JSONResponse(asgi_describe(request, "async"))

    def parafe_sync(request: StarletteRequest) -> Response:
        return JSONResponse(parafe_reply(asgi.current_parafe(request), "sync"))

    async def parafe_async(request: StarletteRequest) -> Response:
        text = first_text(await request.body())  # the body is still readable
        return JSONResponse(parafe_reply(asgi.current_parafe(request), text))

    return Starlette(
        routes=[
            Route("/api/echo", echo, methods=["GET", "POST"]),
            Route("/public", async_view),
            Route("/apiary", async_view),
            Route("/decorated-sync", required(sync_view)),
            Route("/decorated-async", required(async_view)),
            Route("/optional", optional(async_view)),
            Route("/api/scoped-sync", scoped(sync_view)),
            Route("/api/scoped-async", scoped(async_view)),
            Route("/parafe-sync", parafe(parafe_sync), methods=["POST"]),
            Route("/parafe-async", parafe(parafe_async), methods=["POST"]),
            *asgi.a2a_routes(provider),
            Route(WELL_KNOWN, async_view),
            Mount("/backend", app=_backend_app(guard, options, async_view)),
        ],
        middleware=[
            Middleware(
                asgi.PersonalAgentMiddleware,
                verifier=guard.verifier,
                path_prefix=guard.protect_prefix,
                serves_provider=provider,  # the app serves it: a2a_routes below
                **options,
            )
        ],
    )


def _backend_app(guard: Guard, options: dict[str, Any], view: Any) -> Any:
    """Starlette's own `AuthenticationMiddleware` with `PersonalAgentBackend` (an app that
    mixes schemes), its `on_error` answering the PACT way: `/backend/echo`."""
    backend = asgi.PersonalAgentBackend(guard.verifier, **options)
    return Starlette(
        routes=[Route("/echo", view)],
        middleware=[
            Middleware(AuthenticationMiddleware, backend=backend, on_error=asgi.on_auth_error)
        ],
    )


# -- FastAPI ---------------------------------------------------------------------------------


def fastapi_app(config: dict[str, Any]) -> Any:
    """The FastAPI way: `Security` dependencies; `parafe_action` on a sync endpoint that
    declares no `Request` (the decorator injects one)."""
    guard = guard_from_mapping(config)
    provider = guard.provider
    assert provider is not None
    options = delegation_options(config, provider)
    caller = fastapi_adapter.PersonalAgentScheme(guard.verifier, **options)
    anyone = fastapi_adapter.PersonalAgentScheme(guard.verifier, optional=True, **options)
    parafe = asgi.parafe_action(ACTION, provider.parafe.get(BRAND))
    app = FastAPI(exception_handlers=fastapi_adapter.EXCEPTION_HANDLERS)
    app.add_middleware(
        asgi.PersonalAgentMiddleware,
        verifier=guard.verifier,
        path_prefix=guard.protect_prefix,
        serves_provider=provider,  # the app serves it: a2a_routes below
        **options,
    )

    async def echo(request: Request) -> Any:
        if request.method == "POST":
            try:
                json.loads(await request.body())
            except ValueError:
                return PlainTextResponse("body is not JSON", status_code=400)
        return asgi_describe(request, "scope")

    # One route per method: FastAPI gives each operation of a route the same id otherwise.
    app.add_api_route("/api/echo", echo, methods=["GET"], name="echo_get")
    app.add_api_route("/api/echo", echo, methods=["POST"], name="echo_post")

    @app.get("/public")
    @app.get("/apiary")
    async def public(request: Request) -> Any:
        return asgi_describe(request, "async")

    @app.get("/decorated-sync")
    def decorated_sync(request: Request, agent: PersonalAgent = Security(caller)) -> Any:  # noqa: B008
        return asgi_describe(request, "sync", agent)

    @app.get("/decorated-async")
    async def decorated_async(request: Request, agent: PersonalAgent = Security(caller)) -> Any:  # noqa: B008
        return asgi_describe(request, "async", agent)

    @app.get("/optional")
    async def optional(
        request: Request,
        agent: PersonalAgent | None = Security(anyone),  # noqa: B008
    ) -> Any:
        return asgi_describe(request, "async", agent)

    @app.get("/api/scoped-sync")
    def scoped_sync(
        request: Request,
        agent: PersonalAgent = Security(caller, scopes=[SCOPE]),  # noqa: B008
    ) -> Any:
        return asgi_describe(request, "sync", agent)

    @app.get("/api/scoped-async")
    async def scoped_async(
        request: Request,
        agent: PersonalAgent = Security(caller, scopes=[SCOPE]),  # noqa: B008
    ) -> Any:
        return asgi_describe(request, "async", agent)

    @app.post("/parafe-sync")
    @parafe
    def parafe_sync(request: Request) -> Any:
        return JSONResponse(parafe_reply(asgi.current_parafe(request), "sync"))

    @app.post("/parafe-async")
    @parafe
    async def parafe_async(request: Request) -> Any:
        text = first_text(await request.body())
        return JSONResponse(parafe_reply(asgi.current_parafe(request), text))

    # The decorator on FastAPI endpoints that declare no `Request`, sync and async.
    legacy = asgi.personal_agent_required(guard.verifier, **options)

    @app.get("/legacy-sync")
    @legacy
    def legacy_sync() -> Any:
        return {"ok": "sync"}

    @app.get("/legacy-async")
    @legacy
    async def legacy_async(q: str = "") -> Any:
        return {"ok": "async", "q": q}

    app.router.routes.extend(asgi.a2a_routes(provider))

    @app.get(WELL_KNOWN)
    async def well_known(request: Request) -> Any:
        return asgi_describe(request, "async")

    return app


# -- plain WSGI ------------------------------------------------------------------------------


def _wsgi_json(start_response: StartResponse, status: str, body: Any) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    start_response(status, headers)
    return [data]


def wsgi_describe(environ: WSGIEnvironment, via: str) -> dict[str, Any]:
    """`describe` of a WSGI request: its caller, and what the documented environ key holds."""
    found = wsgi.current_personal_agent(environ)
    named = environ.get("pactmw.personal_agent")
    actor_id = named.actor_id if isinstance(named, PersonalAgent) else ""
    return describe(found, via, actor_id if found is not None else None)


def wsgi_app(config: dict[str, Any]) -> Any:
    guard = guard_from_mapping(config)
    provider = guard.provider
    assert provider is not None
    options = delegation_options(config, provider)

    def view(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return _wsgi_json(start_response, "200 OK", wsgi_describe(environ, "sync"))

    def echo(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "POST":
            try:
                json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
            except ValueError:
                return _wsgi_json(start_response, "400 Bad Request", {"error": "not JSON"})
        return _wsgi_json(start_response, "200 OK", wsgi_describe(environ, "environ"))

    def parafe_view(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
        reply = parafe_reply(wsgi.current_parafe(environ), first_text(body))
        return _wsgi_json(start_response, "200 OK", reply)

    routes = {
        "/api/echo": echo,
        "/public": view,
        "/apiary": view,
        WELL_KNOWN: view,
        "/decorated-sync": wsgi.personal_agent_required(guard.verifier, **options)(view),
        "/optional": wsgi.personal_agent_required(guard.verifier, optional=True, **options)(view),
        "/api/scoped-sync": wsgi.delegation_required(SCOPE)(view),
    }
    agent = provider.parafe.get(BRAND)
    if agent is not None:  # WSGI's `parafe_action` takes its agent: none, no such route
        routes["/parafe-sync"] = wsgi.parafe_action(ACTION, agent)(parafe_view)

    def dispatch(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        route = routes.get(wsgi.neutral_request(environ).path)
        if route is None:
            return _wsgi_json(start_response, "404 Not Found", {"error": "not found"})
        result: Iterable[bytes] = route(environ, start_response)
        return result

    prefix = guard.protect_prefix
    guarded = wsgi.PersonalAgentMiddleware(dispatch, guard.verifier, path_prefix=prefix, **options)
    return wsgi.A2AProviderApp(provider, guarded)


# -- Flask -----------------------------------------------------------------------------------


def flask_app(config: dict[str, Any]) -> Flask:
    """Configured through `app.config["PACTMW"]` and `Pactmw(app)`."""
    app = Flask("pactmw_contract")
    app.config["PACTMW"] = config
    flask_adapter.Pactmw(app)

    def view() -> Any:
        return describe(flask_adapter.current_personal_agent(), "sync")

    async def async_view() -> Any:
        return describe(flask_adapter.current_personal_agent(), "async")

    def echo() -> Any:
        if flask_request.method == "POST":
            flask_request.get_json(force=True)  # 400 on a body that is not JSON
        return describe(flask_adapter.current_personal_agent(), "g")

    def parafe_view() -> Any:
        return parafe_reply(flask_adapter.current_parafe(), first_text(flask_request.get_data()))

    async def parafe_async() -> Any:
        return parafe_reply(flask_adapter.current_parafe(), first_text(flask_request.get_data()))

    required = flask_adapter.personal_agent_required
    scoped = flask_adapter.delegation_required(SCOPE)
    parafe = flask_adapter.parafe_action(ACTION)
    app.add_url_rule("/api/echo", "echo", echo, methods=["GET", "POST"])
    app.add_url_rule("/public", "public", view)
    app.add_url_rule("/apiary", "apiary", view)
    app.add_url_rule(WELL_KNOWN, "well_known", view)
    # More specific than the Provider's `/a2a/<path:rest>`: Flask routes these to the app.
    app.add_url_rule(APP_UNDER_MOUNT, "under_mount", view)
    app.add_url_rule(APP_UNDER_BRAND, "under_brand", view)
    app.add_url_rule("/decorated-sync", "decorated_sync", required(view))
    app.add_url_rule("/decorated-async", "decorated_async", required(async_view))
    app.add_url_rule("/optional", "optional", required(optional=True)(view))
    app.add_url_rule("/api/scoped-sync", "scoped_sync", scoped(view))
    app.add_url_rule("/api/scoped-async", "scoped_async", scoped(async_view))
    app.add_url_rule("/parafe-sync", "parafe_sync", parafe(parafe_view), methods=["POST"])
    app.add_url_rule("/parafe-async", "parafe_async", parafe(parafe_async), methods=["POST"])
    return app


def guard_of(config: dict[str, Any]) -> Guard:
    return guard_from_mapping(config)
