"""Deliberately broken Providers: our Starlette app with one defect injected each, either by an
ASGI middleware around `A2AProviderApp` or by a store that misbehaves.

Each defect is one a real Provider could plausibly have; `pactmw check` must fail exactly the
check that covers it and pass all the others.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import attrs

from pactmw.adapters.asgi import route_path
from pactmw.provider.routes import match
from pactmw.store.base import Claim, Conversation
from pactmw.store.memory import MemoryStore
from tests.check.support import Agent

Scope = dict[str, Any]
ASGIApp = Callable[..., Any]


def _segment(token: str, index: int) -> dict[str, Any]:
    try:
        part = token.split(".")[index]
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _authorization(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name.lower() == b"authorization":
            return str(value.decode("latin-1"))
    return None


class _Middleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


class AddsCharset(_Middleware):
    """`Content-Type: application/a2a+json; charset=utf-8` (what many frameworks do)."""

    async def http(self, scope: Scope, receive: Any, send: Any) -> None:
        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [
                        (k, v + b"; charset=utf-8")
                        if k.lower() == b"content-type" and v == b"application/a2a+json"
                        else (k, v)
                        for k, v in message["headers"]
                    ],
                }
            await send(message)

        await self.app(scope, receive, sending)


class NoChallenge(_Middleware):
    """401 answers without `WWW-Authenticate`."""

    async def http(self, scope: Scope, receive: Any, send: Any) -> None:
        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                message = {
                    **message,
                    "headers": [
                        (k, v) for k, v in message["headers"] if k.lower() != b"www-authenticate"
                    ],
                }
            await send(message)

        await self.app(scope, receive, sending)


class AcceptsTokens(_Middleware):
    """Lets through the tokens `accepts(header, claims)` picks, as a Provider whose verifier
    forgot that check would: they reach our Provider re-signed with the agent's key."""

    def __init__(
        self,
        app: ASGIApp,
        agent: Agent,
        accepts: Callable[[dict[str, Any], dict[str, Any]], bool],
    ) -> None:
        super().__init__(app)
        self.agent = agent
        self.accepts = accepts

    async def http(self, scope: Scope, receive: Any, send: Any) -> None:
        authorization = _authorization(scope)
        if authorization is not None and authorization.lower().startswith("bearer "):
            token = authorization[7:].strip()
            header, claims = _segment(token, 0), _segment(token, 1)
            if self.accepts(header, claims):
                fresh = self.agent.token(str(claims.get("sub", "user-1")))
                headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
                headers.append((b"authorization", f"Bearer {fresh}".encode("latin-1")))
                scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


def accepts_hs256(agent: Agent) -> Callable[[ASGIApp], ASGIApp]:
    return lambda app: AcceptsTokens(app, agent, lambda header, _: header.get("alg") == "HS256")


def accepts_expired(agent: Agent) -> Callable[[ASGIApp], ASGIApp]:
    def expired(header: dict[str, Any], claims: dict[str, Any]) -> bool:
        exp = claims.get("exp")
        return isinstance(exp, int) and exp <= time.time() - 30

    return lambda app: AcceptsTokens(app, agent, expired)


class AuthenticatesBeforeRouting(_Middleware):
    """Asks for a token before routing: an unknown route without one gets 401, not 404."""

    async def http(self, scope: Scope, receive: Any, send: Any) -> None:
        if _authorization(scope) is None and match(scope["method"], route_path(scope)) is None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"www-authenticate", b'Bearer realm="a2a"'),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


class ForgetfulStore(MemoryStore):
    """Forgets the replies it stored: a retried message runs the bot again."""

    def claim_message(self, **arguments: Any) -> Claim:
        claim = super().claim_message(**arguments)
        return Claim(kind="new") if claim.kind == "reply" else claim

    def claim_turn(self, **arguments: Any) -> Claim:
        # What the Provider calls: the claim with the history, in one store call.
        claim = super().claim_turn(**arguments)
        if claim.kind != "reply":
            return claim
        return Claim(kind="new", history=tuple(self.history(arguments["context_id"])))


class _AnyOwner(str):
    """A `sub` equal to every other one."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


class LeakyStore(MemoryStore):
    """Does not keep who owns a conversation: any user of the agent may continue it."""

    def get_conversation(self, context_id: str) -> Conversation | None:
        conversation = super().get_conversation(context_id)
        if conversation is None:
            return None
        return attrs.evolve(conversation, sub=_AnyOwner(conversation.sub))
