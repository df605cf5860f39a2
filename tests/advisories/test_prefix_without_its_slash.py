"""The guarded prefix's own path, without its trailing slash, is guarded too.

`path_prefix="/api/"` guards what is under `/api/`; a route at `/api` itself (FastAPI's
`APIRouter(prefix="/api")` with `@router.get("")`, a Starlette `Route("/api")`, a WSGI app
answering every path) was served to anyone, without a token, beside its guarded `/api/...`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI

from pactmw.adapters import asgi, wsgi
from pactmw.client import AgentSigner
from pactmw.config import in_protected_path
from tests.support.agent import trusting
from tests.support.parties import AUDIENCE
from tests.support.servers import uvicorn_server, werkzeug_server

AGENT = AgentSigner.generate(issuer="https://pa.example")
VERIFIER = trusting(AGENT, AUDIENCE)


def fastapi_app() -> FastAPI:
    router = APIRouter(prefix="/api")

    @router.get("")
    def orders() -> dict[str, str]:
        return {"orders": "all of them"}

    app = FastAPI()
    app.include_router(router)
    app.add_middleware(asgi.PersonalAgentMiddleware, verifier=VERIFIER, path_prefix="/api/")
    return app


def wsgi_app() -> Any:
    def orders(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"all of them"]

    return wsgi.PersonalAgentMiddleware(orders, VERIFIER, path_prefix="/api/")


@pytest.fixture(
    params=[lambda: uvicorn_server(fastapi_app()), lambda: werkzeug_server(wsgi_app())],
    ids=["asgi", "wsgi"],
)
def base(request: pytest.FixtureRequest) -> Iterator[str]:
    with request.param() as url:
        yield url


def test_the_prefix_without_its_slash_needs_a_personal_agent(base: str) -> None:
    refused = httpx.get(base + "/api")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
    token = AGENT.sign("user-1", AUDIENCE)
    assert httpx.get(base + "/api", headers={"Authorization": f"Bearer {token}"}).is_success


@pytest.mark.parametrize(
    ("path", "guarded"),
    [
        ("/api", True),
        ("/api/", True),
        ("/api/x", True),
        ("/apiary", False),
        ("/apiary/x", False),
        ("/", False),
    ],
)
def test_which_paths_a_prefix_guards(path: str, guarded: bool) -> None:
    # The prefix is a path segment, written with its trailing slash or without.
    assert in_protected_path(path, "/api/") is guarded
    assert in_protected_path(path, "/api") is guarded
    assert in_protected_path(path, None) is False
