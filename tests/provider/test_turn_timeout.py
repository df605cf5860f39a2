"""`turn_timeout` in both drivers, over real servers: an async bot (uvicorn, the async
driver) is cancelled, a sync bot (Werkzeug, the sync driver) is left to finish with its
answer dropped; either way the caller gets the documented INTERNAL error and a retry of the
same `messageId` runs the bot again."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from pactmw.adapters.asgi import A2AProviderApp as AsgiApp
from pactmw.adapters.wsgi import A2AProviderApp as WsgiApp
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.provider import Provider, Turn
from pactmw.provider._send import TURN_TIMED_OUT
from pactmw.provider.settings import ProviderSettings
from tests.reliability.support import AUDIENCE, bearer, inline_agent, reply_of, send
from tests.support.net import loopback_client
from tests.support.servers import uvicorn_server, werkzeug_server

TIMEOUT = 0.5
SLOW = "[slow] where is my order?"


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="timeout-1")


def _provider(key: PrivateJWK, handler: Any) -> Provider:
    settings = ProviderSettings.from_mapping(
        {
            "base_url": "http://127.0.0.1",
            "audience": AUDIENCE,
            "store": "memory://",
            "agents": [inline_agent(key)],
            "brands": {"acme": {"name": "Acme", "handler": "bot"}},
            "turn_timeout": TIMEOUT,
        },
        handlers={"bot": handler},
    )
    return Provider.from_settings(settings)


def _assert_abandoned(response: httpx.Response) -> None:
    assert response.status_code == 500, response.text
    assert response.headers["content-type"] == "application/a2a+json"
    assert response.json()["error"]["message"] == TURN_TIMED_OUT


def _conversation(client: httpx.Client, base: str, key: PrivateJWK) -> str:
    first = send(client, base, bearer(key), "hello", "m0")
    context_id: str = reply_of(first)["contextId"]
    return context_id


def test_async_bot_past_turn_timeout_is_cancelled(key: PrivateJWK) -> None:
    events: list[str] = []

    async def bot(turn: Turn) -> str:
        events.append(f"start {turn.message_id}")
        if SLOW in turn.text and events.count(f"start {turn.message_id}") == 1:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                events.append(f"cancelled {turn.message_id}")
                raise
        return f"answer to {turn.message_id}"

    provider = _provider(key, bot)
    with uvicorn_server(AsgiApp(provider)) as base, loopback_client(timeout=30) as client:
        context_id = _conversation(client, base, key)
        _assert_abandoned(send(client, base, bearer(key), SLOW, "m1", context_id))
        assert events[-1] == "cancelled m1"
        retry = send(client, base, bearer(key), SLOW, "m1", context_id)
        assert reply_of(retry)["parts"] == [{"text": "answer to m1"}]
        assert send(client, base, bearer(key), SLOW, "m1", context_id).content == retry.content
    provider.close()
    assert events == ["start m0", "start m1", "cancelled m1", "start m1"]


def test_sync_bot_past_turn_timeout_is_abandoned_and_its_answer_dropped(key: PrivateJWK) -> None:
    go_on = threading.Event()
    finished = threading.Event()
    runs: list[str] = []

    def bot(turn: Turn) -> str:
        runs.append(turn.message_id)
        if SLOW in turn.text and not go_on.is_set():
            go_on.wait(60)
            finished.set()
            return "the abandoned answer"
        return f"answer to {turn.message_id}"

    provider = _provider(key, bot)
    with werkzeug_server(WsgiApp(provider)) as base, loopback_client(timeout=30) as client:
        context_id = _conversation(client, base, key)
        _assert_abandoned(send(client, base, bearer(key), SLOW, "m1", context_id))
        go_on.set()  # the abandoned bot answers now: too late
        assert finished.wait(30)
        retry = send(client, base, bearer(key), SLOW, "m1", context_id)
        assert reply_of(retry)["parts"] == [{"text": "answer to m1"}]
        assert send(client, base, bearer(key), SLOW, "m1", context_id).content == retry.content
    provider.close()
    assert runs == ["m0", "m1", "m1"]
