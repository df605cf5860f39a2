"""The sqlite store's reads: each thread's own connection, never behind the writers' lock.

A request's agent-switch read must not queue behind other requests' turns (issue 16), and
the connections opened for reads must all be closed by `close()`, including those of
threads that have ended.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
from pathlib import Path

import pytest

from pactmw.store import SqliteStore, StoreError, StoreUnavailable

ISSUER = "https://agent.example"


def test_a_read_does_not_wait_for_a_write_in_progress(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.set_agent_enabled(ISSUER, False)
    writing = threading.Event()
    read_done = threading.Event()
    read_while_writing: list[bool] = []

    def write() -> None:
        # Holds the write lock (and sqlite's) until the main thread's read is done; if the
        # read waited for this lock, the wait below would give up and the flag stay False.
        with store._write() as conn:
            conn.execute(
                "INSERT INTO pactmw_agent_overrides (issuer, enabled) VALUES (?, 1)",
                ("https://other.example",),
            )
            writing.set()
            read_while_writing.append(read_done.wait(timeout=30))

    writer = threading.Thread(target=write)
    writer.start()
    assert writing.wait(timeout=30)
    # The last committed switch, not the uncommitted write's.
    assert store.agent_enabled(ISSUER) is False
    assert store.agent_enabled("https://other.example") is None
    read_done.set()
    writer.join()
    assert read_while_writing == [True]
    assert store.agent_enabled("https://other.example") is True
    store.close()


def test_a_read_sees_the_write_just_committed_by_another_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    assert store.agent_enabled(ISSUER) is None  # this thread's reader is open now
    switched = threading.Thread(target=store.set_agent_enabled, args=(ISSUER, False))
    switched.start()
    switched.join()
    assert store.agent_enabled(ISSUER) is False
    store.close()


def test_readers_of_ended_threads_are_dropped_and_close_closes_the_rest(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")

    def read() -> None:
        assert store.agent_enabled(ISSUER) is None

    for _ in range(20):  # short-lived threads, as worker pools start and retire them
        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
    gc.collect()
    assert len(store._readers) == 0  # each closed with its thread: nothing accumulates

    read()  # this thread's reader stays open until close()
    (reader,) = store._readers
    store.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        reader.conn.execute("SELECT 1")
    with pytest.raises(StoreUnavailable, match="closed"):
        store.agent_enabled(ISSUER)


def test_a_reader_cannot_write(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    with pytest.raises(StoreError, match="readonly"), store._read() as conn:
        conn.execute("DELETE FROM pactmw_agent_overrides")
    store.close()
