"""Starlette and FastAPI apps whose `PersonalAgentMiddleware` is given a wrong argument, for
uvicorn to serve in its own process (`uvicorn --factory tests.adapters.misconfigured_asgi:NAME`).

`MISCONFIGURED` (the environment variable) picks the mistake: `path_prefix` ("a2a", without
its leading "/", a `ConfigError`) or `unknown` (a keyword the middleware does not take,
`prefix=`, a `TypeError`). Each factory adds the middleware one way: in the app's
constructor (`Middleware(...)`) or with `add_middleware(...)`, both of which Starlette builds
on the app's first call, or by wrapping the app directly, which runs at once.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp
from starlette.websockets import WebSocket

from pactmw.adapters.asgi import PersonalAgentMiddleware
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier
from tests.support.parties import AUDIENCE

__all__ = [
    "fastapi_add_middleware",
    "fastapi_middleware",
    "fastapi_wrapped",
    "starlette_add_middleware",
    "starlette_middleware",
    "starlette_wrapped",
]


def _arguments() -> dict[str, Any]:
    """The middleware's keyword arguments, with the mistake `MISCONFIGURED` names."""
    verifier = IdentityVerifier(audience=AUDIENCE, registry=AgentRegistry([]))
    mistake = os.environ.get("MISCONFIGURED", "path_prefix")
    if mistake == "path_prefix":
        return {"verifier": verifier, "path_prefix": "a2a"}
    if mistake == "unknown":
        return {"verifier": verifier, "prefix": "/a2a/"}
    raise LookupError(f"MISCONFIGURED={mistake!r}")


async def _public(request: Request) -> PlainTextResponse:
    return PlainTextResponse("public")


async def _socket(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("open")
    await websocket.close()


def _routes() -> list[Route | WebSocketRoute]:
    return [Route("/public", _public), WebSocketRoute("/ws", _socket)]


def _fastapi() -> FastAPI:
    app = FastAPI()
    app.router.routes.extend(_routes())
    return app


def starlette_middleware() -> ASGIApp:
    return Starlette(
        routes=_routes(), middleware=[Middleware(PersonalAgentMiddleware, **_arguments())]
    )


def starlette_add_middleware() -> ASGIApp:
    app = Starlette(routes=_routes())
    app.add_middleware(PersonalAgentMiddleware, **_arguments())
    return app


def starlette_wrapped() -> ASGIApp:
    return PersonalAgentMiddleware(Starlette(routes=_routes()), **_arguments())


def fastapi_middleware() -> ASGIApp:
    app = FastAPI(middleware=[Middleware(PersonalAgentMiddleware, **_arguments())])
    app.router.routes.extend(_routes())
    return app


def fastapi_add_middleware() -> ASGIApp:
    app = _fastapi()
    app.add_middleware(PersonalAgentMiddleware, **_arguments())
    return app


def fastapi_wrapped() -> ASGIApp:
    return PersonalAgentMiddleware(_fastapi(), **_arguments())
