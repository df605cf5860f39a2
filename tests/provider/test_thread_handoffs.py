"""How many times an async `message:send` hands work to a worker thread, and what it hands.

A store that never blocks (memory://) is called on the event loop; a blocking store's calls
and a sync bot share one hop per turn; the registry of a memory store is read in place.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pactmw.core.errors import AuthenticationFailed
from pactmw.core.http import Response
from pactmw.core.jwk import public_key_set
from pactmw.core.threads import WorkerThreads
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.provider.driver import ano_body, arun
from pactmw.provider.flow import NeedIdentity, NeedStore
from pactmw.store import MemoryStore, SqliteStore
from tests.provider import BASE_URL, BodyReader, Bot, Kit, assert_a2a, header, message_body
from tests.support.parties import AUDIENCE, ISSUER

T = TypeVar("T")
RECORDED = ("start_conversation", "get_conversation", "claim_turn", "store_reply")


class CountingThreads(WorkerThreads):
    """Counts the hand-offs."""

    def __init__(self) -> None:
        super().__init__()
        self.hops = 0

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        self.hops += 1
        return await super().run(fn, *args)


def _recording(base: type[Any]) -> type[Any]:
    """A store class that records the thread each turn operation ran in."""

    def wrap(name: str) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            self.threads_seen.append((name, threading.get_ident()))
            return getattr(base, name)(self, *args, **kwargs)

        return call

    return type(f"Recording{base.__name__}", (base,), {name: wrap(name) for name in RECORDED})


def _turns(kit: Kit, store: Any, handler: Any) -> tuple[CountingThreads, list[str], int]:
    """Two turns of one conversation on the event loop: (threads, operations, loop thread)."""
    store.threads_seen = []
    provider = kit.provider(Brand(id="acme", name="Acme", handler=handler), store=store)
    threads = CountingThreads()
    provider.verifier.threads = threads

    async def main() -> int:
        first = kit.request("POST", "/a2a/acme/message:send", token=kit.token())
        answer = await provider.ahandle(first, BodyReader(message_body("one")).aread)
        context_id = assert_a2a(answer, 200)["message"]["contextId"]
        second = kit.request("POST", "/a2a/acme/message:send", token=kit.token())
        body = message_body("two", context_id=context_id)
        assert_a2a(await provider.ahandle(second, BodyReader(body).aread), 200)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    operations = [name for name, _ in store.threads_seen]
    assert operations == [
        "start_conversation",
        "store_reply",
        "get_conversation",
        "claim_turn",
        "store_reply",
    ]
    threads.close()
    return (
        threads,
        [f"{n}@{'loop' if t == loop_thread else 'worker'}" for n, t in store.threads_seen],
        loop_thread,
    )


async def _async_bot(turn: Any) -> str:
    return f"async {turn.text}"


def _sync_bot(turn: Any) -> str:
    return f"sync {turn.text}"


def test_memory_store_and_async_bot_never_leave_the_loop(memory_kit: Kit) -> None:
    threads, seen, _ = _turns(memory_kit, _recording(MemoryStore)(), _async_bot)
    assert threads.hops == 0
    assert all(s.endswith("@loop") for s in seen), seen


def test_memory_store_with_a_sync_bot_hops_once_per_turn(memory_kit: Kit) -> None:
    threads, seen, _ = _turns(memory_kit, _recording(MemoryStore)(), _sync_bot)
    assert threads.hops == 2  # the bot of each turn; the store stays on the loop
    assert all(s.endswith("@loop") for s in seen), seen


def test_sqlite_store_calls_and_the_bot_share_one_hop_per_turn(
    memory_kit: Kit, tmp_path: Path
) -> None:
    store = _recording(SqliteStore)(tmp_path / "state.db")
    try:
        threads, seen, _ = _turns(memory_kit, store, _sync_bot)
    finally:
        store.close()
    assert threads.hops == 2
    assert all(s.endswith("@worker") for s in seen), seen


def test_registry_reads_of_a_memory_store_do_not_block(tmp_path: Path) -> None:
    memory = MemoryStore()
    sqlite = SqliteStore(tmp_path / "state.db")
    try:
        assert AgentRegistry(runtime=memory, overrides=memory).may_block is False
        assert AgentRegistry(overrides=memory).may_block is False
        assert AgentRegistry(runtime=sqlite, overrides=sqlite).may_block is True
        assert AgentRegistry(overrides=sqlite).may_block is True
        assert AgentRegistry(resolver=lambda issuer: None).may_block is True
    finally:
        sqlite.close()


# -- a registry in a blocking store (as `pactmw serve` builds it) --------------------------------


class _Served:
    """A Provider whose agent switches live in a sqlite store, with a configured agent."""

    def __init__(self, kit: Kit, path: Path) -> None:
        self.kit = kit
        self.store = SqliteStore(path)
        self.bot = Bot()
        registry = AgentRegistry(
            [RegisteredAgent(issuer=ISSUER, name="PA", jwks=public_key_set([kit.keys[ISSUER]]))],
            runtime=self.store,
            overrides=self.store,
        )
        self.threads = CountingThreads()
        verifier = IdentityVerifier(
            audience=AUDIENCE, registry=registry, clock=kit.clock, threads=self.threads
        )
        self.provider = Provider(
            base_url=BASE_URL,
            verifier=verifier,
            store=self.store,
            brands=(Brand(id="acme", name="Acme", handler=self.bot),),
            clock=kit.clock,
        )
        self.token = kit.token()

    def send(self, body: bytes) -> Response:
        request = self.kit.request("POST", "/a2a/acme/message:send", token=self.token)
        return asyncio.run(self.provider.ahandle(request, BodyReader(body).aread))

    def close(self) -> None:
        self.provider.close()
        self.threads.close()


def test_a_cached_token_costs_no_hop_of_its_own(memory_kit: Kit, tmp_path: Path) -> None:
    served = _Served(memory_kit, tmp_path / "state.db")
    try:
        first = assert_a2a(served.send(message_body("one")), 200)
        # The first request verifies the signature (no shortcut): the registry read and
        # the turn are two hops.
        assert served.threads.hops == 2
        context_id = first["message"]["contextId"]
        for text in ("two", "three"):
            before = served.threads.hops
            assert_a2a(served.send(message_body(text, context_id=context_id)), 200)
            assert served.threads.hops == before + 1  # the switch, the store and the bot
        assert served.bot.calls == 3
    finally:
        served.close()


def test_an_agent_switched_off_is_refused_before_any_effect(
    memory_kit: Kit, tmp_path: Path
) -> None:
    served = _Served(memory_kit, tmp_path / "state.db")
    try:
        assert_a2a(served.send(message_body("one")), 200)  # the token is cached now
        # Switched off from elsewhere (another process, the admin command).
        other = SqliteStore(tmp_path / "state.db")
        other.set_agent_enabled(ISSUER, False)
        other.close()
        response = served.send(message_body("two"))
        assert response.status == 401
        assert 'Bearer realm="a2a"' in header(response, "WWW-Authenticate")[0]
        assert served.bot.calls == 1  # the bot never ran for the refused request...
        conversations = sqlite3.connect(tmp_path / "state.db").execute(
            "SELECT count(*) FROM pactmw_conversations"
        )
        assert conversations.fetchone()[0] == 1  # ...and nothing was stored for it
        # A malformed body or a closed-out flow does not hide the refusal either.
        assert served.send(b"{not json").status == 401
        assert served.send(message_body("x", context_id=str(uuid.uuid4()))).status == 401
        served.store.set_agent_enabled(ISSUER, True)
        assert_a2a(served.send(message_body("three")), 200)
        assert served.bot.calls == 2
    finally:
        served.close()


def test_a_flow_that_catches_errors_cannot_swallow_the_refusal(
    memory_kit: Kit, tmp_path: Path
) -> None:
    served = _Served(memory_kit, tmp_path / "state.db")
    memory = MemoryStore()
    verifier = served.provider.verifier
    authorization = served.token
    try:
        verifier.verify(authorization)  # cached now
        served.store.set_agent_enabled(ISSUER, False)
        finished: list[str] = []

        def flow(operation: Any) -> Generator[Any, Any, str]:
            try:
                yield NeedIdentity(authorization)
                try:
                    yield NeedStore(operation, {"context_id": str(uuid.uuid4())})
                except Exception:
                    return "swallowed"
                return "ran"
            finally:
                finished.append("closed")

        # A store that blocks (the read joins its hop) and one that does not (the read runs
        # before the flow's next step, on its own hop).
        for operation in (served.store.get_conversation, memory.get_conversation):
            with pytest.raises(AuthenticationFailed) as refused:
                asyncio.run(arun(flow(operation), verifier, ano_body, defer_identity=True))
            assert refused.value.reason == "disabled_issuer"
        assert finished == ["closed", "closed"]
        served.store.set_agent_enabled(ISSUER, True)
        for operation in (served.store.get_conversation, memory.get_conversation):
            assert (
                asyncio.run(arun(flow(operation), verifier, ano_body, defer_identity=True)) == "ran"
            )
    finally:
        memory.close()
        served.close()
