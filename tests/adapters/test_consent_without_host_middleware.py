"""A same-app consent page whose `current_user` reads what a Starlette middleware the app lacks
would set (`request.session` without `SessionMiddleware`, `request.user` without
`AuthenticationMiddleware`) answers the pages' 503 page and names the missing middleware once.

Found in a FastAPI trial: a FastAPI app serving the Provider with `a2a_routes` but without
`SessionMiddleware` answered every consent page 500, and the log's hint said to serve the
Provider inside the host app with `a2a_routes`, which it already did.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import HTTPConnection

from pactmw.adapters.asgi import A2AProviderApp, a2a_routes
from pactmw.client import AgentSigner
from pactmw.core.jwk import generate_private_jwk
from pactmw.provider import Provider, ProviderSettings, SignedInUser, Turn
from tests.support.net import loopback_client
from tests.support.servers import uvicorn_server

pytestmark = pytest.mark.timeout(120)

AGENT = AgentSigner.generate(issuer="https://pa.example")
CONSENT = "/a2a/shop/oauth/consent"


def _bot(turn: Turn) -> str:
    return "hello"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Provider:
    key = tmp_path_factory.mktemp("keys") / "signing.jwk"
    key.write_text(json.dumps(generate_private_jwk("ES256", kid="s1").to_dict()))
    return Provider.from_settings(
        ProviderSettings.from_mapping(
            {
                "base_url": "https://shop.example",
                "audience": "https://shop.example/a2a",
                "store": "memory://",
                "agents": [{"issuer": AGENT.issuer, "jwks": AGENT.public_jwks()}],
                "signing_keys": [str(key)],
                "brands": {
                    "shop": {
                        "handler": _bot,
                        "delegation": {
                            "scopes": {"orders:read": "See your orders"},
                            "login_url": "/login",
                        },
                    }
                },
            }
        )
    )


def from_session(connection: HTTPConnection) -> SignedInUser | None:
    name = connection.session.get("username")
    return SignedInUser(account=name, label=name) if name else None


async def from_user(connection: HTTPConnection) -> SignedInUser | None:
    user = connection.user
    return SignedInUser(account=user.identity, label=user.display_name)


def fastapi_without_sessions(provider: Provider) -> Any:
    app = FastAPI()
    app.router.routes.extend(a2a_routes(provider, current_user=from_session))
    return app


def starlette_without_authentication(provider: Provider) -> Any:
    middleware = [Middleware(SessionMiddleware, secret_key="test")]
    return Starlette(routes=a2a_routes(provider, current_user=from_user), middleware=middleware)


def around_the_app(provider: Provider) -> Any:
    # The host app has its sessions, but the Provider runs before them.
    web = Starlette(middleware=[Middleware(SessionMiddleware, secret_key="test")])
    return A2AProviderApp(provider, app=web, current_user=from_session)


CASES: list[tuple[Callable[[Provider], Any], str, str]] = [
    (fastapi_without_sessions, "SessionMiddleware", "request.session"),
    (starlette_without_authentication, "AuthenticationMiddleware", "request.user"),
    (around_the_app, "SessionMiddleware", "request.session"),
]


@pytest.mark.parametrize(
    ("build", "middleware", "read"), CASES, ids=[case[0].__name__ for case in CASES]
)
def test_the_missing_middleware_is_named_on_a_503_page(
    caplog: pytest.LogCaptureFixture,
    provider: Provider,
    build: Callable[[Provider], Any],
    middleware: str,
    read: str,
) -> None:
    app = build(provider)
    with (
        caplog.at_level(logging.ERROR, logger="pactmw"),
        uvicorn_server(app) as url,
        loopback_client(base_url=url) as client,
    ):
        for _ in range(2):
            page = client.get(CONSENT)
            assert page.status_code == 503, page.text[:300]
            assert page.headers["content-type"].startswith("text/html")
            assert "Please try again later" in page.text
    said = [r for r in caplog.records if r.name.startswith("pactmw")]
    assert len(said) == 1, [r.getMessage() for r in said]  # once, not on every request
    message = said[0].getMessage()
    assert said[0].levelno == logging.ERROR
    for named in (middleware, read, "current_user", "'shop'"):
        assert named in message, message
    if build is around_the_app:
        # Around the host app, its middleware runs after the Provider: serve it inside.
        assert "a2a_routes" in message, message
    else:
        # Already inside the app: the remedy is the middleware, not a2a_routes again.
        assert "a2a_routes" not in message, message
        assert f"Middleware({middleware}" in message, message
    assert said[0].exc_info is None  # a misconfiguration, not a crash: no traceback


def test_an_app_with_its_middleware_shows_the_page(provider: Provider) -> None:
    app = FastAPI()
    app.router.routes.extend(a2a_routes(provider, current_user=from_session))
    app.add_middleware(SessionMiddleware, secret_key="test")
    with uvicorn_server(app) as url, loopback_client(base_url=url) as client:
        assert client.get(CONSENT).status_code == 200
