"""The in-process apps under test: Starlette (two ways), plain WSGI and Flask.

Every app has the same three kinds of route, so one set of cases runs against all of them:

* `/a2a/echo` (GET and POST) is under the guarded prefix and answers with JSON naming the
  caller the endpoint saw (`issuer`, `sub`, `actor_id`, `via`, plus framework extras). A POST
  body must be JSON, else 400: a 401 for a bad body therefore proves authentication ran first.
* `/public` is outside the prefix and unprotected.
* `/decorated` is outside the prefix and protected by the adapter's decorator alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from flask import Flask
from flask import request as flask_request
from starlette.applications import Starlette
from starlette.endpoints import HTTPEndpoint
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from pactmw.adapters import asgi, wsgi
from pactmw.adapters import flask as flask_adapter
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


def caller(personal_agent: PersonalAgent | None, via: str) -> dict[str, Any]:
    """What every echo endpoint reports about the verified caller."""
    if personal_agent is None:
        return {"issuer": None, "sub": None, "actor_id": None, "via": via}
    return {
        "issuer": personal_agent.issuer,
        "sub": personal_agent.sub,
        "actor_id": personal_agent.actor_id,
        "via": via,
    }


# -- Starlette ---------------------------------------------------------------------------------


async def _starlette_echo(request: Request) -> Response:
    if request.method == "POST":
        try:
            json.loads(await request.body())
        except ValueError:
            return PlainTextResponse("body is not JSON", status_code=400)
    body = caller(asgi.current_personal_agent(request), 'scope["pactmw.personal_agent"]')
    body.update(
        is_authenticated=request.user.is_authenticated,
        display_name=request.user.display_name,
        scopes=list(request.auth.scopes),
    )
    return JSONResponse(body)


async def _starlette_public(request: Request) -> Response:
    return JSONResponse({"public": True, "actor_id": None})


def starlette_middleware_app(verifier: IdentityVerifier) -> Any:
    """Starlette behind the pure ASGI `PersonalAgentMiddleware` guarding `/a2a/`."""

    @asgi.personal_agent_required(verifier)
    async def decorated(request: Request) -> Response:
        return await _starlette_echo(request)

    app = Starlette(
        routes=[
            Route("/a2a/echo", _starlette_echo, methods=["GET", "POST"]),
            Route("/public", _starlette_public),
            Route("/decorated", decorated, methods=["GET", "POST"]),
        ]
    )
    return asgi.PersonalAgentMiddleware(app, verifier, path_prefix="/a2a/")


def starlette_auth_backend_app(verifier: IdentityVerifier) -> Any:
    """Starlette's own `AuthenticationMiddleware` with `PersonalAgentBackend` + `on_auth_error`.

    The way a FastAPI service mixes auth schemes: the backend authenticates any request that
    carries `Authorization`, and the endpoints that need a personal agent are decorated (a
    plain endpoint function for `/a2a/echo`, an `HTTPEndpoint` method for `/decorated`).
    """
    required = asgi.personal_agent_required(verifier)

    @required
    async def echo(request: Request) -> Response:
        return await _starlette_echo(request)

    class Decorated(HTTPEndpoint):
        @required
        async def get(self, request: Request) -> Response:
            return await _starlette_echo(request)

        @required
        async def post(self, request: Request) -> Response:
            return await _starlette_echo(request)

    return Starlette(
        routes=[
            Route("/a2a/echo", echo, methods=["GET", "POST"]),
            Route("/public", _starlette_public),
            Route("/decorated", Decorated),
        ],
        middleware=[
            Middleware(
                AuthenticationMiddleware,
                backend=asgi.PersonalAgentBackend(verifier),
                on_error=asgi.on_auth_error,
            )
        ],
    )


# -- plain WSGI --------------------------------------------------------------------------------


def _wsgi_json(start_response: StartResponse, status: str, body: Any) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]


def _wsgi_echo(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    if environ["REQUEST_METHOD"] == "POST":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            json.loads(environ["wsgi.input"].read(length))
        except ValueError:
            return _wsgi_json(start_response, "400 Bad Request", {"error": "body is not JSON"})
    found = environ.get(wsgi.ENVIRON_KEY)
    return _wsgi_json(start_response, "200 OK", caller(found, 'environ["pactmw.personal_agent"]'))


def wsgi_app(verifier: IdentityVerifier) -> Any:
    """A bare WSGI callable wrapped in `wsgi.PersonalAgentMiddleware`."""
    decorated = wsgi.personal_agent_required(verifier)(_wsgi_echo)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/a2a/echo":
            return _wsgi_echo(environ, start_response)
        if path == "/decorated":
            result: Iterable[bytes] = decorated(environ, start_response)
            return result
        if path == "/public":
            return _wsgi_json(start_response, "200 OK", {"public": True, "actor_id": None})
        return _wsgi_json(start_response, "404 Not Found", {"error": "not found"})

    return wsgi.PersonalAgentMiddleware(app, verifier, path_prefix="/a2a/")


# -- Flask -------------------------------------------------------------------------------------


def flask_app(config: dict[str, Any]) -> Flask:
    """A Flask app configured through `app.config["PACTMW"]` and `Pactmw(app)`."""
    app = Flask("pactmw_adapter_tests")
    app.config["PACTMW"] = config
    flask_adapter.Pactmw(app)

    def echo() -> Any:
        if flask_request.method == "POST":
            flask_request.get_json(force=True)  # 400 on a body that is not JSON
        return caller(flask_adapter.current_personal_agent(), "current_personal_agent()")

    app.add_url_rule("/a2a/echo", "echo", echo, methods=["GET", "POST"])
    app.add_url_rule(
        "/decorated",
        "decorated",
        flask_adapter.personal_agent_required(echo),
        methods=["GET", "POST"],
    )
    app.add_url_rule("/public", "public", lambda: {"public": True, "actor_id": None})
    return app
