"""In-process tests of the framework-neutral PACT Provider (`pactmw.provider`).

Shared helpers: keys and tokens, a driven clock, request and response checks. Everything
runs through `Provider.handle` / `Provider.ahandle`; personal-agent keys are inline JWKS, so
nothing is fetched.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from pactmw.core.encoding import json_dumps
from pactmw.core.http import Request, Response
from pactmw.core.jwk import PrivateJWK, public_key_set
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.store.base import Store
from tests.support.a2a import ERROR_DOMAIN, ERROR_INFO, REASONS
from tests.support.agent import identity_token
from tests.support.clock import FakeClock
from tests.support.parties import AUDIENCE, ISSUER

BASE_URL = "https://provider.example"
OTHER_ISSUER = "https://other-pa.example"
DISABLED_ISSUER = "https://pa.example/disabled-pa"
A2A = "application/a2a+json"
START = 1_800_000_000.0  # a multiple of 60, so rate-limit windows start here


class Bot:
    """A sync turn handler that records every turn it was called with."""

    def __init__(self, answer: Callable[[Any], Any] | None = None) -> None:
        self.turns: list[Any] = []
        self._answer = answer or (lambda turn: f"echo: {turn.text}")

    def __call__(self, turn: Any) -> Any:
        self.turns.append(turn)
        return self._answer(turn)

    @property
    def calls(self) -> int:
        return len(self.turns)


class BodyReader:
    """A `read_body(limit)` that serves fixed bytes and records the limits it was given."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.limits: list[int] = []

    def __call__(self, limit: int) -> bytes | None:
        self.limits.append(limit)
        return None if len(self.body) > limit else self.body

    async def aread(self, limit: int) -> bytes | None:
        return self(limit)


def must_not_read(limit: int) -> bytes | None:
    pytest.fail(f"read_body({limit}) was called")


async def must_not_aread(limit: int) -> bytes | None:
    pytest.fail(f"read_body({limit}) was called")


def message_body(
    text: str | None = "hello",
    *,
    message_id: str | None = None,
    context_id: str | None = None,
    parts: list[Any] | None = None,
    **extra: Any,
) -> bytes:
    """A `message:send` body the way the reference client builds it."""
    message: dict[str, Any] = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": parts if parts is not None else [{"text": text, "mediaType": "text/plain"}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    message.update(extra)
    return json_dumps({"message": message})


def assert_a2a(response: Response, status: int) -> Any:
    """The response is an A2A response: status, exactly one exact Content-Type, JSON body."""
    assert response.status == status, (response.status, response.body)
    content_types = [v for k, v in response.headers if k.lower() == "content-type"]
    assert content_types == [A2A]
    return json.loads(response.body)


def assert_error(response: Response, reason: str, message: str) -> None:
    """The exact A2A error envelope, with exactly one ErrorInfo detail."""
    code, rpc_status = REASONS[reason]
    assert assert_a2a(response, code) == {
        "error": {
            "code": code,
            "status": rpc_status,
            "message": message,
            "details": [{"@type": ERROR_INFO, "reason": reason, "domain": ERROR_DOMAIN}],
        }
    }


def assert_bare(response: Response, status: int) -> None:
    """A bare status: no body and no A2A content type."""
    assert response.status == status
    assert response.body == b""
    assert all(v != A2A for k, v in response.headers if k.lower() == "content-type")


def header(response: Response, name: str) -> list[str]:
    return [v for k, v in response.headers if k.lower() == name.lower()]


class Kit:
    """Keys, a clock, and a way to build Providers and send them requests."""

    def __init__(self, keys: dict[str, PrivateJWK], store_factory: Callable[[], Store]) -> None:
        self.keys = keys
        self.clock = FakeClock(START)
        self._store_factory = store_factory
        self.providers: list[Provider] = []

    def verifier(self) -> IdentityVerifier:
        registry = AgentRegistry(
            [
                RegisteredAgent(issuer=ISSUER, name="PA", jwks=public_key_set([self.keys[ISSUER]])),
                RegisteredAgent(
                    issuer=OTHER_ISSUER,
                    name="Other PA",
                    jwks=public_key_set([self.keys[OTHER_ISSUER]]),
                ),
                RegisteredAgent(
                    issuer=DISABLED_ISSUER,
                    jwks=public_key_set([self.keys[ISSUER]]),
                    enabled=False,
                ),
            ]
        )
        return IdentityVerifier(audience=AUDIENCE, registry=registry, clock=self.clock)

    def provider(self, *brands: Brand, **options: Any) -> Provider:
        if not brands:
            brands = (Brand(id="acme", name="Acme Support", handler=Bot()),)
        provider = Provider(
            base_url=BASE_URL,
            verifier=self.verifier(),
            store=options.pop("store", None) or self._store_factory(),
            brands=brands,
            clock=self.clock,
            **options,
        )
        self.providers.append(provider)
        return provider

    def token(self, sub: str = "user-1", issuer: str = ISSUER, **claims: Any) -> str:
        key = self.keys[ISSUER if issuer == DISABLED_ISSUER else issuer]
        return "Bearer " + identity_token(
            key, issuer, AUDIENCE, sub=sub, now=self.clock(), **claims
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        query: str = "",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> Request:
        pairs = headers if token is None else (("authorization", token), *headers)
        return Request(method=method, path=path, query=query, headers=pairs)

    def close(self) -> None:
        for provider in self.providers:
            provider.close()


Drive = Callable[..., Response]


def sync_drive(provider: Provider, request: Request, body: bytes | None = None) -> Response:
    return provider.handle(request, must_not_read if body is None else BodyReader(body))


def async_drive(provider: Provider, request: Request, body: bytes | None = None) -> Response:
    reader = must_not_aread if body is None else BodyReader(body).aread
    return asyncio.run(provider.ahandle(request, reader))
