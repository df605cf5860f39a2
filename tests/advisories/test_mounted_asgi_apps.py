"""An app guarded by `PersonalAgentMiddleware` stays guarded when it is mounted in another.

Starlette's `Mount("/v1", app=sub)` (FastAPI's `app.mount`) hands `sub` the full path with
`root_path="/v1"`, and `sub` routes on the path below `root_path`. The middleware once judged
the path from the outermost app's root, so `/v1/a2a/orders` was not under `/a2a/` for it while
`sub` still served its `/a2a/orders` route: every guarded route answered without a token.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from pactmw.adapters.asgi import PersonalAgentMiddleware, current_personal_agent
from pactmw.client import AgentSigner
from tests.support.agent import trusting
from tests.support.parties import AUDIENCE
from tests.support.servers import uvicorn_server

AGENT = AgentSigner.generate(issuer="https://pa.example")
VERIFIER = trusting(AGENT, AUDIENCE)


async def orders(request: Request) -> Response:
    agent = current_personal_agent(request)
    return JSONResponse({"user": agent.actor_id if agent else None})


def starlette_sub() -> Starlette:
    return Starlette(
        routes=[Route("/a2a/orders", orders), Route("/public", orders)],
        middleware=[Middleware(PersonalAgentMiddleware, verifier=VERIFIER)],
    )


def fastapi_sub() -> FastAPI:
    sub = FastAPI()
    sub.add_middleware(PersonalAgentMiddleware, verifier=VERIFIER)
    sub.add_api_route("/a2a/orders", orders)
    sub.add_api_route("/public", orders)
    return sub


def starlette_host() -> Starlette:
    return Starlette(routes=[Mount("/v1", app=starlette_sub())])


def fastapi_host() -> FastAPI:
    host = FastAPI()
    host.mount("/v1", fastapi_sub())
    return host


@pytest.fixture(params=[starlette_host, fastapi_host], ids=["starlette", "fastapi"])
def base(request: pytest.FixtureRequest) -> Iterator[str]:
    with uvicorn_server(request.param()) as url:
        yield url


def test_a_mounted_app_refuses_a_request_without_a_token(base: str) -> None:
    refused = httpx.get(base + "/v1/a2a/orders")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
    assert refused.content == b""


def test_a_mounted_app_admits_a_personal_agent_and_leaves_other_paths_open(base: str) -> None:
    token = AGENT.sign("user-1", AUDIENCE)
    admitted = httpx.get(base + "/v1/a2a/orders", headers={"Authorization": f"Bearer {token}"})
    assert admitted.status_code == 200
    assert admitted.json()["user"].startswith("pa:")
    assert httpx.get(base + "/v1/public").json() == {"user": None}


def test_an_app_served_below_a_root_path_stays_guarded() -> None:
    # uvicorn --root-path: the whole app sits below /proxy, as behind a path-routing proxy.
    with uvicorn_server(starlette_sub(), root_path="/proxy") as url:
        assert httpx.get(url + "/a2a/orders").status_code == 401
        assert httpx.get(url + "/public").status_code == 200
