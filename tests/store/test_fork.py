"""A store opened before a fork (`gunicorn --preload`, multiprocessing) serves every process.

The Flask and Django adapters open the store when the app is built, so under a preloading
server the master opens it and the workers inherit it. sqlite forbids using a connection in
a process other than the one that opened it, and one PostgreSQL socket used by several
processes interleaves their traffic; a lock some thread held at the fork is held for ever
in the child. Each process must use connections of its own.
"""

from __future__ import annotations

import multiprocessing
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from pactmw.store import Store, open_store
from pactmw.store._watchdog import Watchdog
from pactmw.store.memory import MemoryStore
from pactmw.store.sqlite import SqliteStore
from tests.store.support import Backend

FORK = multiprocessing.get_context("fork")
T0 = 1_700_000_000.0
CHILDREN = 2
TURNS = 15
#: How long a child may take: far above what its few turns need (a hang check).
BOUND = 60.0


def _turns(store: Store, who: str) -> list[str]:
    """`TURNS` conversations of one answered turn each, written by `who`; their ids."""
    ids = []
    for i in range(TURNS):
        ctx = store.create_conversation(
            brand_id="acme", issuer="https://pa.example", sub=who, now=T0
        )
        claim = store.claim_message(
            context_id=ctx, message_id=f"m-{i}", text=f"{who} {i}", now=T0, lease_seconds=30.0
        )
        assert claim.kind == "new", claim
        store.store_reply(
            context_id=ctx,
            message_id=f"m-{i}",
            reply_message_id=f"r-{i}",
            reply_text=f"to {who} {i}",
            reply=f"to {who} {i}".encode(),
            now=T0,
        )
        ids.append(ctx)
    return ids


def _child_turns(store: Store, who: str, go: Event, out: Queue[tuple[str, object]]) -> None:
    """A forked child's work: wait for the go, write its turns, report ids or the error."""
    try:
        go.wait(BOUND)
        out.put((who, _turns(store, who)))
    except BaseException as exc:
        out.put((who, f"{type(exc).__name__}: {exc}"))


def _joined(processes: Sequence[BaseProcess]) -> None:
    """Wait for every child (bounded); one still running is a hang, killed and reported."""
    for p in processes:
        p.join(BOUND)
    hung = [p for p in processes if p.is_alive()]
    for p in hung:
        p.kill()
        p.join()
    assert not hung, f"{len(hung)} forked process(es) still running after {BOUND:g} s"


@pytest.fixture
def store(persistent: Backend) -> Iterator[Store]:
    s = open_store(persistent.url)
    s.agent_enabled("warm-up")  # connected (and migrated) before the fork, as in a master
    yield s
    s.close()


def test_parent_and_forked_children_use_the_store_at_once(
    persistent: Backend, store: Store
) -> None:
    go = FORK.Event()
    out: Queue[tuple[str, object]] = FORK.Queue()
    children = [
        FORK.Process(target=_child_turns, args=(store, f"child-{n}", go, out))
        for n in range(CHILDREN)
    ]
    for p in children:
        p.start()
    go.set()
    written = {"parent": _turns(store, "parent")}
    for _ in children:
        who, ids = out.get(timeout=BOUND)
        assert isinstance(ids, list), f"{who}: {ids}"
        written[who] = ids
    _joined(children)
    assert [p.exitcode for p in children] == [0] * CHILDREN

    # Everything every process wrote is there, as a process opening the store now reads it.
    fresh = open_store(persistent.url)
    try:
        for who, ids in written.items():
            assert len(set(ids)) == TURNS
            for i, ctx in enumerate(ids):
                [turn] = fresh.history(ctx)
                assert (turn.message_id, turn.reply_text) == (f"m-{i}", f"to {who} {i}")
    finally:
        fresh.close()


def _child_writes_after_go(store: Store, go: Event, out: Queue[object]) -> None:
    try:
        go.wait(BOUND)
        out.put(_turns(store, "child"))
    except BaseException as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def _forked_child_writes(store: Store, meanwhile: Callable[[], None]) -> object:
    """Fork a child holding `store`, do `meanwhile` in the parent, then let the child write
    its turns: what it reported (its ids or its error), or that it never answered (a child
    still waiting for the store, killed)."""
    go = FORK.Event()
    out: Queue[object] = FORK.Queue()
    child = FORK.Process(target=_child_writes_after_go, args=(store, go, out))
    child.start()
    meanwhile()
    go.set()
    try:
        ids = out.get(timeout=BOUND)
    except Exception:  # queue.Empty
        ids = "no answer: the child is still waiting for the store"
    _joined([child])
    return ids


def test_a_forked_child_keeps_its_store_when_the_parent_closes_its_own(tmp_path: Path) -> None:
    # The parent's connection held the file's locks for both: once it closes, sqlite
    # (seeing no other process hold them) deletes the WAL a child's inherited connection
    # would go on writing to. A child with its own connection holds its own locks.
    path = tmp_path / "store.db"
    parent = SqliteStore(path)
    parent.agent_enabled("warm-up")
    ids = _forked_child_writes(parent, parent.close)
    assert isinstance(ids, list), ids
    fresh = SqliteStore(path)
    try:
        assert all(len(fresh.history(ctx)) == 1 for ctx in ids)
    finally:
        fresh.close()


def test_a_fork_while_a_thread_is_inside_the_sqlite_store_leaves_the_child_a_usable_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(path, busy_timeout_ms=int(BOUND * 1000))
    store.agent_enabled("warm-up")
    # Another connection's write transaction keeps a thread of this process waiting inside
    # a store operation (the store's lock held, a transaction begun) when the fork starts.
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    writer = threading.Thread(target=_turns, args=(store, "parent"))
    writer.start()
    while not store._lock.locked():  # the writer is waiting for the blocker, lock held
        writer.join(0.001)

    def let_go() -> None:
        blocker.execute("COMMIT")
        blocker.close()

    # Let go soon, from another thread: the fork may wait for the writer's operation, or
    # not; either way the child must get a store that no thread of its own holds.
    release = threading.Timer(0.2, let_go)
    release.start()

    def writes_done() -> None:
        release.join(BOUND)
        writer.join(BOUND)

    ids = _forked_child_writes(store, writes_done)
    store.close()
    assert isinstance(ids, list), ids


def test_a_fork_while_a_thread_is_inside_the_memory_store_leaves_a_usable_store() -> None:
    store = MemoryStore()
    store._lock.acquire()  # as an operation of another thread does, for a few dict lookups
    release = threading.Timer(0.2, store._lock.release)
    release.start()
    ids = _forked_child_writes(store, lambda: release.join(BOUND))
    assert isinstance(ids, list), ids


def _cut_seen_by_child(dog: Watchdog, mine: socket.socket, out: Queue[object]) -> None:
    """Arm a watch of the child's own and wait until the watchdog cuts it. Deadlines are
    served in order, so a watch inherited from the parent, armed earlier, is due first."""
    try:
        with dog.watch(mine) as watch:
            while not watch.fired:
                mine.recv(1)  # returns b"" once the watchdog shuts the socket down
        out.put("cut")
    except BaseException as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def test_a_forked_child_never_cuts_the_connections_its_parent_was_watching() -> None:
    # The parent's operation was under way at the fork: the child must not inherit its
    # watch, whose connection (one socket shared by both processes) the parent goes on
    # using after that operation ends.
    dog = Watchdog(0.5)
    parents, parents_peer = socket.socketpair()
    childs, childs_peer = socket.socketpair()
    out: Queue[object] = FORK.Queue()
    with dog.watch(parents):
        child = FORK.Process(target=_cut_seen_by_child, args=(dog, childs, out))
        child.start()
    assert out.get(timeout=BOUND) == "cut"
    _joined([child])
    # Still open: nothing was shut down, so nothing to read and no end of file.
    parents_peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        parents_peer.recv(1)
    for s in (parents, parents_peer, childs, childs_peer):
        s.close()
