"""How many times an async `message:send` hands work to a worker thread, and what it hands.

A store that never blocks (memory://) is called on the event loop; a blocking store's calls
and a sync bot share one hop per turn; the registry of a memory store is read in place.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pactmw.core.threads import WorkerThreads
from pactmw.protocols.identity import AgentRegistry
from pactmw.provider import Brand
from pactmw.store import MemoryStore, SqliteStore
from tests.provider import BodyReader, Kit, assert_a2a, message_body

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
