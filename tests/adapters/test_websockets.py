"""WebSocket handshakes through the ASGI adapters, on a real uvicorn server.

WebSockets are ASGI's alone (WSGI, Flask and Django's own views have none), so these cases
run on the ASGI adapters only. A handshake is an HTTP GET: under the guarded prefix, on a
WebSocket endpoint with a Starlette decorator, or on a FastAPI one with
`Security(PersonalAgentScheme)`, it is verified as any request is and refused with the same
401 challenge (ASGI's WebSocket Denial Response extension, which uvicorn offers). An
anonymous handshake elsewhere, or under Starlette's `AuthenticationMiddleware` with
`PersonalAgentBackend`, stays anonymous. The Provider, which
speaks no WebSocket, refuses one as an unknown route. Before, the middleware let every
handshake under its prefix through unverified, the backend, the FastAPI scheme and the
decorators failed every handshake (500), and the Provider left one unanswered (500).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import websockets.sync.client
from fastapi import FastAPI, Security, WebSocket
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import WebSocketRoute
from starlette.types import ASGIApp
from websockets.exceptions import InvalidStatus

from pactmw import Settings
from pactmw.adapters.asgi import (
    A2AProviderApp,
    PersonalAgentBackend,
    PersonalAgentMiddleware,
    delegation_required,
    on_auth_error,
    personal_agent_required,
    requires,
)
from pactmw.adapters.fastapi import EXCEPTION_HANDLERS, PersonalAgentScheme
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent, actor_id_for
from pactmw.provider import Provider, ProviderSettings
from pactmw.store import MemoryStore
from tests.adapters.support import WithoutDenialExtension
from tests.support.agent import identity_token
from tests.support.parties import AUDIENCE, ISSUER
from tests.support.servers import uvicorn_server

CHALLENGE = 'Bearer realm="a2a"'
ANONYMOUS = "anonymous"

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="ws-1")


def _verifier(key: PrivateJWK) -> IdentityVerifier:
    agent = {"issuer": ISSUER, "jwks": {"keys": [key.public.to_dict()]}}
    return Settings.from_mapping({"audience": AUDIENCE, "agents": [agent]}).build_verifier()


async def _greet(websocket: Any) -> None:
    """Accept, then say who Starlette says is calling."""
    await websocket.accept()
    user = websocket.scope.get("user")
    greeted = user.identity if user is not None and user.is_authenticated else ANONYMOUS
    await websocket.send_text(greeted)
    await websocket.close()


def _starlette(middleware: Middleware, *routes: WebSocketRoute) -> Starlette:
    routes = (WebSocketRoute("/a2a/chat", _greet), WebSocketRoute("/chat", _greet), *routes)
    return Starlette(routes=list(routes), middleware=[middleware])


def _decorated(verifier: IdentityVerifier) -> Starlette:
    """No middleware: the endpoint's own decorator verifies the handshake."""
    chat = personal_agent_required(verifier)(_greet)
    return Starlette(routes=[WebSocketRoute("/a2a/chat", chat)])


def _fastapi(key: PrivateJWK) -> FastAPI:
    scheme = PersonalAgentScheme(_verifier(key))
    app = FastAPI(exception_handlers=EXCEPTION_HANDLERS)

    @app.websocket("/a2a/chat")
    async def chat(websocket: WebSocket, agent: PersonalAgent = Security(scheme)) -> None:  # noqa: B008
        await websocket.accept()
        await websocket.send_text(agent.actor_id)
        await websocket.close()

    return app


def _apps(key: PrivateJWK) -> dict[str, ASGIApp]:
    verifier = _verifier(key)
    guarded = Middleware(PersonalAgentMiddleware, verifier=verifier)
    backend = Middleware(
        AuthenticationMiddleware, backend=PersonalAgentBackend(verifier), on_error=on_auth_error
    )
    delegated = WebSocketRoute("/a2a/delegated", delegation_required("orders:read")(_greet))
    required = WebSocketRoute("/a2a/required", requires("personal_agent")(_greet))
    return {
        "middleware": _starlette(guarded, delegated),
        "backend": _starlette(backend, required),
        "decorated": _decorated(verifier),
        "fastapi": _fastapi(key),
    }


@pytest.fixture(scope="module")
def bases(key: PrivateJWK) -> Iterator[dict[str, str]]:
    """Each app on its own uvicorn server: name -> ws:// base URL."""
    apps = _apps(key)
    with (
        uvicorn_server(apps["middleware"]) as middleware,
        uvicorn_server(WithoutDenialExtension(apps["middleware"])) as bare,
        uvicorn_server(apps["backend"]) as backend,
        uvicorn_server(apps["decorated"]) as decorated,
        uvicorn_server(apps["fastapi"]) as fastapi,
    ):
        yield {
            name: base.replace("http://", "ws://")
            for name, base in {
                "middleware": middleware,
                "bare": bare,
                "backend": backend,
                "decorated": decorated,
                "fastapi": fastapi,
            }.items()
        }


def _greeting(url: str, token: str | None = None) -> str:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    with websockets.sync.client.connect(url, additional_headers=headers, open_timeout=20) as ws:
        message = ws.recv(timeout=20)
    assert isinstance(message, str)
    return message


def _refusal(url: str, token: str | None = None) -> tuple[int, list[str], bytes]:
    """The status, WWW-Authenticate values and body of a refused handshake."""
    with pytest.raises(InvalidStatus) as refused:
        _greeting(url, token)
    response = refused.value.response
    return response.status_code, response.headers.get_all("WWW-Authenticate"), bytes(response.body)


def _token(key: PrivateJWK, sub: str = "user-1") -> str:
    return identity_token(key, ISSUER, AUDIENCE, sub=sub)


GUARDED = ["middleware", "decorated", "fastapi"]


@pytest.mark.parametrize("app", GUARDED)
def test_a_handshake_without_a_token_gets_the_challenge(bases: dict[str, str], app: str) -> None:
    assert _refusal(f"{bases[app]}/a2a/chat") == (401, [CHALLENGE], b"")


@pytest.mark.parametrize("app", GUARDED)
def test_a_handshake_with_a_bad_token_gets_the_challenge(bases: dict[str, str], app: str) -> None:
    stranger = generate_private_jwk("ES256", kid="ws-1")  # the same kid, another key
    assert _refusal(f"{bases[app]}/a2a/chat", _token(stranger)) == (401, [CHALLENGE], b"")


@pytest.mark.parametrize("app", [*GUARDED, "backend"])
def test_a_personal_agent_handshake_is_accepted_with_its_caller(
    bases: dict[str, str], app: str, key: PrivateJWK
) -> None:
    greeted = _greeting(f"{bases[app]}/a2a/chat", _token(key, sub="user-7"))
    assert greeted == actor_id_for(ISSUER, "user-7")


@pytest.mark.parametrize("app", ["middleware", "backend"])
def test_an_anonymous_handshake_outside_the_guard_stays_anonymous(
    bases: dict[str, str], app: str
) -> None:
    assert _greeting(f"{bases[app]}/chat") == ANONYMOUS


def test_the_backend_lets_an_anonymous_handshake_through_and_refuses_a_bad_token(
    bases: dict[str, str],
) -> None:
    assert _greeting(f"{bases['backend']}/a2a/chat") == ANONYMOUS
    stranger = generate_private_jwk("ES256", kid="ws-1")
    # Starlette's AuthenticationMiddleware closes a refused handshake itself: the server's 403.
    status, _, _ = _refusal(f"{bases['backend']}/a2a/chat", _token(stranger))
    assert status == 403


def test_requires_refuses_an_anonymous_handshake_with_the_challenge(
    bases: dict[str, str], key: PrivateJWK
) -> None:
    url = f"{bases['backend']}/a2a/required"
    assert _refusal(url) == (401, [CHALLENGE], b"")  # Starlette's own `requires`: a 403
    assert _greeting(url, _token(key)) == actor_id_for(ISSUER, "user-1")


def test_delegation_required_refuses_a_handshake_without_a_delegation(
    bases: dict[str, str], key: PrivateJWK
) -> None:
    status, challenges, body = _refusal(f"{bases['middleware']}/a2a/delegated", _token(key))
    assert (status, body) == (401, b"")
    assert challenges == [f'{CHALLENGE}, error="invalid_token"']


def test_without_the_denial_extension_a_refused_handshake_is_closed(
    bases: dict[str, str], key: PrivateJWK
) -> None:
    status, challenges, _ = _refusal(f"{bases['bare']}/a2a/chat")
    assert (status, challenges) == (403, [])
    assert _greeting(f"{bases['bare']}/a2a/chat", _token(key)) == actor_id_for(ISSUER, "user-1")


def test_the_provider_refuses_a_handshake_as_an_unknown_route(key: PrivateJWK) -> None:
    settings = ProviderSettings.from_mapping(
        {
            "base_url": "http://127.0.0.1",
            "audience": AUDIENCE,
            "store": "memory://",
            "agents": [{"issuer": ISSUER, "jwks": {"keys": [key.public.to_dict()]}}],
            "brands": {"acme": {"name": "Acme", "handler": "bot"}},
        },
        handlers={"bot": lambda turn: "hello"},
    )
    provider = Provider.from_settings(settings, store=MemoryStore())
    with uvicorn_server(A2AProviderApp(provider)) as base:
        url = base.replace("http://", "ws://") + "/a2a/acme/message:send"
        assert _refusal(url, _token(key)) == (404, [], b"")
