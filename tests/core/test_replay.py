"""Use-once memories: in one process, and over a Store shared by several handles."""

from __future__ import annotations

import threading
from pathlib import Path

from pactmw.core.replay import MemoryReplayMemory, ReplayMemory, StoreReplayMemory
from pactmw.protocols import parafe
from pactmw.store import MemoryStore, SqliteStore


def test_memory_first_use_then_refused_until_expiry() -> None:
    memory = MemoryReplayMemory()
    assert memory.first_use("a", now=0, expires_at=10)
    assert not memory.first_use("a", now=9.9, expires_at=20)
    assert memory.first_use("b", now=9.9, expires_at=20)
    assert memory.first_use("a", now=10, expires_at=20)  # its record expired


def test_memory_purges_expired_entries_past_its_bound() -> None:
    memory = MemoryReplayMemory(max_entries=2)
    for key in "abc":
        assert memory.first_use(key, now=0, expires_at=1)
    assert memory.first_use("d", now=5, expires_at=6)  # purge runs: a, b, c are gone
    assert len(memory._seen) == 1


def test_memory_one_winner_among_threads() -> None:
    memory = MemoryReplayMemory()
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        wins.append(memory.first_use("jti", now=0, expires_at=60))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_store_memory_is_shared_by_two_sqlite_handles(tmp_path: Path) -> None:
    one, two = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    first: ReplayMemory = StoreReplayMemory(one, namespace="dpop")
    second: ReplayMemory = StoreReplayMemory(two, namespace="dpop")
    assert first.may_block
    assert second.may_block
    assert first.first_use("k", now=100, expires_at=160)
    assert not second.first_use("k", now=101, expires_at=161)
    # Namespaces keep kinds of token apart.
    assert StoreReplayMemory(two, namespace="assertion").first_use("k", now=101, expires_at=161)
    assert second.first_use("k", now=160, expires_at=220)  # expired: usable again


def test_store_memory_default_namespace_is_parafes() -> None:
    store = MemoryStore()
    memory = StoreReplayMemory(store)
    assert memory.namespace == "parafe.proof"
    assert memory.first_use("k", now=0, expires_at=1)
    assert not store.use_once(namespace="parafe.proof", value="k", now=0.5, expires_at=1)


def test_parafe_reexports_the_core_memories() -> None:
    # Parafé's public names are unchanged: they are the core classes.
    assert parafe.StoreReplayMemory is StoreReplayMemory
    assert parafe.MemoryReplayMemory is MemoryReplayMemory
    assert parafe.ReplayMemory is ReplayMemory
