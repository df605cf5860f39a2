"""Delegation tokens on an app's own endpoints, through the identity middleware of each adapter.

`request.auth.scopes` (Starlette), the caller's `.delegation` (WSGI, Flask) and the
`delegation_required` decorators, against real servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from flask import Flask, jsonify
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pactmw.adapters import asgi, wsgi
from pactmw.adapters import flask as flask_adapter
from pactmw.provider.guard import Guard
from tests.adapters.support import AUDIENCE, World
from tests.support.servers import uvicorn_server, werkzeug_server


@pytest.fixture(scope="module")
def world() -> World:
    return World()


def starlette_app(world: World) -> Any:
    async def whoami(request: Request) -> JSONResponse:
        return JSONResponse({"scopes": sorted(request.auth.scopes)})

    @asgi.delegation_required("orders:cancel")
    async def cancel(request: Request) -> JSONResponse:
        agent = asgi.current_personal_agent(request)
        assert agent is not None
        assert agent.delegation is not None
        return JSONResponse({"account": agent.delegation.account})

    return Starlette(
        routes=[Route("/a2a/whoami", whoami), Route("/a2a/cancel", cancel)],
        middleware=[
            Middleware(
                asgi.PersonalAgentMiddleware,
                verifier=world.verifier,
                delegation_provider=world.provider,
                delegation_brand="acme",
            )
        ],
    )


def wsgi_app(world: World) -> Any:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        agent = wsgi.current_personal_agent(environ)
        assert agent is not None
        if environ["PATH_INFO"] == "/a2a/cancel" and (
            agent.delegation is None or "orders:cancel" not in agent.delegation.scopes
        ):
            start_response("403 Forbidden", [("Content-Length", "0")])
            return [b""]
        scopes = sorted(agent.delegation.scopes) if agent.delegation else []
        body = httpx.Response(200, json={"scopes": scopes}).content
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    return wsgi.PersonalAgentMiddleware(
        app, world.verifier, delegation_provider=world.provider, delegation_brand="acme"
    )


def flask_app(world: World) -> Flask:
    app = Flask(__name__)
    app.config["PACTMW"] = {"audience": AUDIENCE}
    extension = flask_adapter.Pactmw()
    extension.init_app(app)
    # The Flask extension builds its own guard from config; this test shares the world's
    # verifier and Provider so tokens minted here are known to it.
    app.extensions["pactmw"].guard = Guard(
        world.verifier, provider=world.provider, delegation_brand="acme"
    )

    @app.get("/a2a/whoami")
    def whoami() -> Any:
        agent = flask_adapter.current_personal_agent()
        assert agent is not None
        return jsonify(scopes=sorted(agent.delegation.scopes) if agent.delegation else [])

    @app.get("/a2a/cancel")
    @flask_adapter.delegation_required("orders:cancel")
    def cancel() -> Any:
        return jsonify(ok=True)

    return app


@pytest.fixture(scope="module", params=["starlette", "wsgi", "flask"])
def base(request: pytest.FixtureRequest, world: World) -> Iterator[str]:
    if request.param == "starlette":
        with uvicorn_server(starlette_app(world)) as url:
            yield url
    elif request.param == "wsgi":
        with werkzeug_server(wsgi_app(world)) as url:
            yield url
    else:
        with werkzeug_server(flask_app(world)) as url:
            yield url


def call(base: str, path: str, identity: str, delegation: str | None = None) -> httpx.Response:
    headers = {"Authorization": identity}
    if delegation is not None:
        headers["X-A2A-User-Delegation"] = delegation
    return httpx.get(base + path, headers=headers, timeout=10)


def test_identity_alone_has_no_delegated_scopes(base: str, world: World) -> None:
    answer = call(base, "/a2a/whoami", world.identity())
    assert answer.status_code == 200
    assert not any(
        s.startswith("scope:") or s.startswith("orders:") for s in answer.json()["scopes"]
    )


def test_a_delegation_adds_its_scopes(base: str, world: World) -> None:
    answer = call(base, "/a2a/whoami", world.identity(), world.delegation(("orders:read",)))
    assert answer.status_code == 200
    scopes = answer.json()["scopes"]
    assert ("scope:orders:read" in scopes) or ("orders:read" in scopes)
    assert not any("orders:cancel" in s for s in scopes)


@pytest.mark.parametrize(
    "kind", ["garbage", "revoked", "another_user"], ids=["garbage", "revoked", "other-user"]
)
def test_a_bad_delegation_is_401_invalid_token(base: str, world: World, kind: str) -> None:
    token = {
        "garbage": "Bearer not-a-token",
        "revoked": world.delegation(("orders:read",), revoked=True),
        "another_user": world.delegation(("orders:read",), sub="user-2"),
    }[kind]
    answer = call(base, "/a2a/whoami", world.identity("user-1"), token)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Bearer realm="a2a", error="invalid_token"'
    assert answer.content == b""


def test_delegation_required_refuses_missing_scopes(base: str, world: World) -> None:
    read_only = call(base, "/a2a/cancel", world.identity(), world.delegation(("orders:read",)))
    assert read_only.status_code == 403
    granted = ("orders:read", "orders:cancel")
    assert call(base, "/a2a/cancel", world.identity(), world.delegation(granted)).status_code == 200
