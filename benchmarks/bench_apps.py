"""The apps that `benchmarks/http_load.py` serves, each in its own server process.

Imported by the servers as `benchmarks.bench_apps` (the repository root is on PYTHONPATH).
The driver passes the agent's public key and the audience in environment variables:

  BENCH_JWK       the personal agent's public JWK (JSON)
  BENCH_AUDIENCE  the `aud` of its tokens (one string for every server, so one token serves all)
  PACTMW_CONFIG   for the Flask example with pactmw: the TOML the driver wrote

ASGI (uvicorn, one worker; `--factory`):
  starlette_bare        GET /a2a/whoami: a constant {"issuer", "user"}; POST
                        /a2a/acme/message:send: the bare echo (parse the JSON, answer the same
                        reply shape as pactmw, no bookkeeping)
  starlette_identity    the same GET /a2a/whoami behind `PersonalAgentMiddleware`
  echo_bot              the turn handler the `pactmw serve` contenders run (the docs' echo bot)
  a2a_sdk_echo          the a2a-sdk's HTTP+JSON server, echo executor, no authentication
  a2a_sdk_echo_with_pactmw   the same behind `PersonalAgentMiddleware`

WSGI (gunicorn; `module:factory()`):
  flask_example                  examples/flask_app as it is (`create_app` with the TOML)
  flask_example_without_pactmw   the same app with pactmw's three entry points replaced by
                                 no-ops: no extension, no decorator check, a fixed caller
The Django pair is `shopsite.wsgi:application` with `shopsite.settings` (pactmw) or with
`benchmarks.django_bare_settings` (pactmw's middleware and routes taken out).
"""

from __future__ import annotations

import json
import os
import uuid
from types import SimpleNamespace
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pactmw.protocols.identity import actor_id_for

ISSUER = "https://agent.example"
#: The `sub` of the benchmark's token; the bare endpoints answer with the same caller.
SUB = "user-000001"
BRAND = "acme"
A2A_CONTENT_TYPE = "application/a2a+json"
#: What pactmw derives from (ISSUER, SUB); the bare endpoints answer with it, precomputed.
ACTOR_ID = actor_id_for(ISSUER, SUB)


# -- ASGI ------------------------------------------------------------------------------------


async def _bare_whoami(request: Request) -> JSONResponse:
    return JSONResponse({"issuer": ISSUER, "user": ACTOR_ID})


async def _identity_whoami(request: Request) -> JSONResponse:
    # The Starlette example of docs/getting-started/starlette-fastapi.md, verbatim.
    agent = request.user.personal_agent
    return JSONResponse({"issuer": agent.issuer, "user": agent.actor_id})


async def _bare_echo(request: Request) -> Response:
    """What an app without pactmw does for `message:send`: parse, echo, same reply shape."""
    data = json.loads(await request.body())
    message = data["message"]
    text = "\n".join(part["text"] for part in message["parts"])
    reply = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "contextId": message.get("contextId") or str(uuid.uuid4()),
            "role": "ROLE_AGENT",
            "parts": [{"text": f"You said: {text}"}],
        }
    }
    body = json.dumps(reply, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(body, media_type=A2A_CONTENT_TYPE)


def starlette_bare() -> Starlette:
    """No pactmw anywhere: the baseline of the identity and the message:send comparisons."""
    return Starlette(
        routes=[
            Route("/a2a/whoami", _bare_whoami),
            Route(f"/a2a/{BRAND}/message:send", _bare_echo, methods=["POST"]),
        ]
    )


def _identity_mapping() -> dict[str, Any]:
    return {
        "audience": os.environ["BENCH_AUDIENCE"],
        "agents": [
            {"issuer": ISSUER, "name": "Bench agent", "jwks": {"keys": [_public_jwk()]}},
        ],
    }


def _public_jwk() -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(os.environ["BENCH_JWK"])
    return jwk


def starlette_identity() -> Starlette:
    """The same whoami endpoint behind pactmw's `PersonalAgentMiddleware` (the docs' example)."""
    from pactmw import Settings
    from pactmw.adapters.asgi import PersonalAgentMiddleware

    settings = Settings.from_mapping(_identity_mapping())
    return Starlette(
        routes=[Route("/a2a/whoami", _identity_whoami)],
        middleware=[Middleware(PersonalAgentMiddleware, verifier=settings.build_verifier())],
    )


def _a2a_sdk_routes(prefix: str) -> list[Any]:
    """The a2a-sdk's HTTP+JSON routes over its default request handler and an echo executor
    (in-memory task store; the executor answers one Message, like the echo bot)."""
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_rest_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Message,
        Part,
        Role,
    )

    class EchoExecutor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            reply = Message(
                message_id=str(uuid.uuid4()),
                context_id=context.context_id or str(uuid.uuid4()),
                role=Role.ROLE_AGENT,
                parts=[Part(text=f"You said: {context.get_user_input()}")],
            )
            await event_queue.enqueue_event(reply)

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    card = AgentCard(
        name="Bench echo",
        description="a2a-sdk echo executor",
        version="1.0",
        supported_interfaces=[
            AgentInterface(
                url=f"http://127.0.0.1{prefix}",
                protocol_binding="HTTP+JSON",
                protocol_version="1.0",
            )
        ],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes the text", tags=["echo"])],
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return list(create_rest_routes(handler, path_prefix=prefix))


def a2a_sdk_echo() -> Starlette:
    """The official A2A Python server (HTTP+JSON), echo executor, no authentication."""
    return Starlette(routes=_a2a_sdk_routes(f"/a2a/{BRAND}"))


def a2a_sdk_echo_with_pactmw() -> Starlette:
    """The same server behind pactmw's `PersonalAgentMiddleware` (every request verified)."""
    from pactmw import Settings
    from pactmw.adapters.asgi import PersonalAgentMiddleware

    settings = Settings.from_mapping(_identity_mapping())
    return Starlette(
        routes=_a2a_sdk_routes(f"/a2a/{BRAND}"),
        middleware=[Middleware(PersonalAgentMiddleware, verifier=settings.build_verifier())],
    )


def echo_bot(turn: Any) -> str:
    """The turn handler of the `pactmw serve` contenders: the docs' echo bot."""
    return f"You said: {turn.text}"


# -- WSGI (the Flask example) -----------------------------------------------------------------


def flask_example() -> Any:
    """examples/flask_app as it is, configured by the TOML named by PACTMW_CONFIG."""
    from examples.flask_app import app as shop

    from pactmw.provider import load_toml

    return shop.create_app(load_toml(os.environ["PACTMW_CONFIG"]))


class _NoPactmw:
    """Stands in for the `Pactmw` extension: installs nothing."""

    def __init__(self, app: Any = None, **kwargs: Any) -> None:
        pass


def flask_example_without_pactmw() -> Any:
    """examples/flask_app with pactmw taken out: same app, same routes, same view code.

    `Pactmw(app, ...)` installs nothing (no before_request hook, no /a2a routes),
    `@personal_agent_required` checks nothing and `current_personal_agent()` returns a fixed
    caller, so `/api/agent/whoami` answers the same JSON without any verification.
    """
    from examples.flask_app import app as shop

    caller = SimpleNamespace(issuer=ISSUER, sub=SUB, actor_id=ACTOR_ID)
    shop.Pactmw = _NoPactmw  # type: ignore[misc,assignment]
    shop.personal_agent_required = lambda view: view
    shop.current_personal_agent = lambda: caller  # type: ignore[assignment,return-value]
    return shop.create_app({"unused": True})
