"""The Provider added to a Starlette or FastAPI app answers when that app is mounted in another.

Found in a FastAPI trial: a support bot's FastAPI app served below `/support` of a larger
site (`site.mount("/support", app)`, Starlette's `Mount`), its `base_url` holding the path as
the Flask guide says for an app mounted under a path. The app's own routes answered at
`/support/...`, but every Provider path (`/support/a2a/shop/...`: the Agent Card,
`message:send`, the consent pages) was a 404: the Provider judged the path from the outermost
app's root (`/support/a2a/...`), not from the root of the app that serves it (`/a2a/...`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route

from pactmw.adapters.asgi import A2AProviderApp, a2a_mount, a2a_routes
from pactmw.client import AgentSigner
from pactmw.provider import Provider, ProviderSettings, Turn
from tests.support.agent import user_message
from tests.support.net import loopback_client
from tests.support.servers import uvicorn_server

pytestmark = pytest.mark.timeout(120)

AGENT = AgentSigner.generate(issuer="https://pa.example")
SITE = "https://shop.example/support"  # where agents reach the mounted app
AUDIENCE = SITE + "/a2a"


def _bot(turn: Turn) -> str:
    return f"You said: {turn.text}"


def _provider() -> Provider:
    return Provider.from_settings(
        ProviderSettings.from_mapping(
            {
                "base_url": SITE,
                "audience": AUDIENCE,
                "store": "memory://",
                "agents": [{"issuer": AGENT.issuer, "jwks": AGENT.public_jwks()}],
                "brands": {"shop": {"handler": _bot}},
            }
        )
    )


async def _home(request: Request) -> Response:
    return PlainTextResponse("the app's own page")


def fastapi_routes() -> Any:
    app = FastAPI()
    app.add_api_route("/home", _home)
    app.router.routes.extend(a2a_routes(_provider()))
    site = FastAPI()
    site.mount("/support", app)
    return site


def starlette_routes() -> Any:
    app = Starlette(routes=[Route("/home", _home), *a2a_routes(_provider())])
    return Starlette(routes=[Mount("/support", app=app)])


def starlette_a2a_mount() -> Any:
    app = Starlette(routes=[Route("/home", _home), a2a_mount(_provider())])
    return Starlette(routes=[Mount("/support", app=app)])


def around_the_app() -> Any:
    app = A2AProviderApp(_provider(), app=Starlette(routes=[Route("/home", _home)]))
    return Starlette(routes=[Mount("/support", app=app)])


SITES: list[Callable[[], Any]] = [
    fastapi_routes,
    starlette_routes,
    starlette_a2a_mount,
    around_the_app,
]


@pytest.fixture(params=SITES, ids=[site.__name__ for site in SITES])
def base(request: pytest.FixtureRequest) -> Iterator[str]:
    with uvicorn_server(request.param()) as url:
        yield url + "/support"


def test_a_mounted_apps_provider_serves_its_card_and_messages(base: str) -> None:
    with loopback_client(base_url=base) as client:
        assert client.get("/home").text == "the app's own page"
        card = client.get("/a2a/shop/.well-known/agent-card.json")
        assert card.status_code == 200, card.text[:300]
        assert card.json()["supportedInterfaces"][0]["url"] == SITE + "/a2a/shop"
        token = AGENT.sign("user-1", AUDIENCE)
        answered = client.post(
            "/a2a/shop/message:send",
            json={"message": user_message("Where is my order?")},
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        )
        assert answered.status_code == 200, answered.text[:300]
        parts = answered.json()["message"]["parts"]
        assert parts == [{"text": "You said: Where is my order?"}], parts
        # The Provider's own 404 for a Brand it does not serve, and its 401 before a body.
        unknown = client.get("/a2a/nobody/.well-known/agent-card.json")
        assert unknown.status_code == 404
        assert client.post("/a2a/shop/message:send").status_code == 401


def test_the_provider_is_not_served_from_the_outer_sites_root(base: str) -> None:
    # Served below /support, the Provider answers there only, not at the outer site's root.
    outer = base.removesuffix("/support")
    with loopback_client(base_url=outer) as client:
        assert client.get("/a2a/shop/.well-known/agent-card.json").status_code == 404
