"""A turn racing the operator's cleanup (`pactmw cleanup` with `retention_days`) that deletes
its conversation: the caller gets `INVALID_PARAMS` (unknown `contextId`), as every later
request does, never a 500. Over uvicorn, on the memory and sqlite stores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.provider import Provider, Turn
from pactmw.provider.settings import ProviderSettings
from pactmw.store.base import Conversation, Store
from pactmw.store.memory import MemoryStore
from pactmw.store.sqlite import SqliteStore
from tests.reliability.support import AUDIENCE, bearer, inline_agent, reply_of, send
from tests.support.net import loopback_client
from tests.support.servers import uvicorn_server

FAR_FUTURE = 4_000_000_000.0


def _clean(store: Store) -> None:
    """The cleanup with a retention every conversation is past."""
    store.cleanup(now=FAR_FUTURE, conversations_idle_before=FAR_FUTURE)


class MemoryCleaned(MemoryStore):
    """Deletes every conversation right after `get_conversation` found it, once `armed`: the
    cleanup's transaction ran between the turn's read of its conversation and its claim."""

    armed = False

    def get_conversation(self, context_id: str) -> Conversation | None:
        found = super().get_conversation(context_id)
        if self.armed:
            _clean(self)
        return found


class SqliteCleaned(SqliteStore):
    """`MemoryCleaned` on sqlite."""

    armed = False

    def get_conversation(self, context_id: str) -> Conversation | None:
        found = super().get_conversation(context_id)
        if self.armed:
            _clean(self)
        return found


Cleaned = MemoryCleaned | SqliteCleaned


@pytest.fixture(scope="module")
def key() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="cleanup-race-1")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cleaned]:
    made: Cleaned = (
        MemoryCleaned() if request.param == "memory" else SqliteCleaned(tmp_path / "s.db")
    )
    yield made
    made.close()


def _served(key: PrivateJWK, store: Cleaned, handler: Callable[[Turn], str]) -> Provider:
    settings = ProviderSettings.from_mapping(
        {
            "base_url": "http://127.0.0.1",
            "audience": AUDIENCE,
            "store": "memory://",
            "agents": [inline_agent(key)],
            "brands": {"acme": {"name": "Acme", "handler": "bot"}},
        },
        handlers={"bot": handler},
    )
    return Provider.from_settings(settings, store=store)


def _assert_unknown_context(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["message"] == "Unknown contextId"
    assert error["details"][0]["reason"] == "INVALID_PARAMS"


def test_a_conversation_deleted_before_the_claim_is_unknown(
    key: PrivateJWK, store: Cleaned
) -> None:
    runs: list[str] = []

    def bot(turn: Turn) -> str:
        runs.append(turn.message_id)
        return f"answer to {turn.message_id}"

    provider = _served(key, store, bot)
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(timeout=30) as client:
        context_id = reply_of(send(client, base, bearer(key), "hello", "m0"))["contextId"]
        store.armed = True
        _assert_unknown_context(send(client, base, bearer(key), "again", "m1", context_id))
        store.armed = False
        _assert_unknown_context(send(client, base, bearer(key), "again", "m1", context_id))
    provider.close()
    assert runs == ["m0"]  # the bot never ran for a conversation that was gone


def test_a_conversation_deleted_while_the_bot_runs_is_unknown(
    key: PrivateJWK, store: Cleaned
) -> None:
    def bot(turn: Turn) -> str:
        if turn.message_id == "m1":
            _clean(store)
        return f"answer to {turn.message_id}"

    provider = _served(key, store, bot)
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(timeout=30) as client:
        context_id = reply_of(send(client, base, bearer(key), "hello", "m0"))["contextId"]
        _assert_unknown_context(send(client, base, bearer(key), "again", "m1", context_id))
    provider.close()
