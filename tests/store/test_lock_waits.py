"""Another session holds a lock the store needs: the store waits a bounded time, then fails
with `StoreUnavailable` (a 503 for the Provider, status 2 for the CLI), never hanging until
the other session lets go; and once it does, the same store works again.

sqlite waits for its write lock up to the busy timeout (5 s). PostgreSQL waits for a row or
table lock up to the store's lock timeout (5 s), unless the database or the DSN set one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from pactmw.store import SqliteStore, Store, StoreUnavailable
from pactmw.store.postgres import PostgresStore
from tests.store.support import Backend
from tests.support.pg import PostgresServer
from tests.support.waits import outcome_within

#: Far above the 5 s the stores wait, far below "until the other session lets go".
BOUND = 30.0


@contextmanager
def _write_lock_held(backend: Backend) -> Iterator[None]:
    """Another session (not the store's) holds the lock the store's writes need."""
    if backend.name == "sqlite":
        conn = sqlite3.connect(backend.url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
    else:
        with psycopg.connect(backend.url) as pconn:
            pconn.execute("LOCK TABLE pactmw_agent_overrides IN ACCESS EXCLUSIVE MODE")
            try:
                yield
            finally:
                pconn.rollback()


def test_a_lock_held_elsewhere_is_unavailable_after_a_bounded_wait(
    persistent: Backend,
) -> None:
    store = persistent.open()
    try:
        store.set_agent_enabled("https://pa.example", True)  # PostgreSQL migrates on first use
        with _write_lock_held(persistent):
            outcome = outcome_within(
                BOUND,
                lambda: store.set_agent_enabled("https://pa.example", False),
                waiting_for="the lock",
            )
        assert isinstance(outcome, StoreUnavailable), repr(outcome)
        # Nothing was written, and the same store works once the lock is free.
        assert store.agent_enabled("https://pa.example") is True
        store.set_agent_enabled("https://pa.example", False)
        assert store.agent_enabled("https://pa.example") is False
    finally:
        store.close()


@pytest.mark.parametrize("where", ["dsn", "database"])
def test_a_lock_timeout_the_database_sets_is_kept(
    postgres_server: PostgresServer, where: str
) -> None:
    """A lock_timeout from the DSN's options or the database's settings wins over the
    store's own: an operator may choose to wait longer (or shorter)."""
    dsn = postgres_server.create_database()
    name = dsn.rsplit("/", 1)[1]
    if where == "dsn":
        dsn += "?options=-c%20lock_timeout%3D1234"
    else:
        with psycopg.connect(postgres_server.dsn_for("postgres"), autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" SET lock_timeout = 1234')
    store = PostgresStore(dsn)
    try:
        with store._connection() as conn:  # a connection of the store's pool, as opened
            row = conn.execute("SHOW lock_timeout").fetchone()
        assert row == ("1234ms",)
    finally:
        store.close()
        postgres_server.drop_database(name)


#: In the PostgreSQL DSN: no message may repeat it (the test server trusts every connection,
#: so it is sent and ignored).
PASSWORD = "s3cr3t-pw"


def _short_waits(backend: Backend) -> Store:
    """The backend's store with a lock wait of 0.2 s, its DSN carrying `PASSWORD`."""
    if backend.name == "sqlite":
        return SqliteStore(backend.url.removeprefix("sqlite:///"), busy_timeout_ms=200)
    return PostgresStore(
        backend.url.replace("postgres@", f"postgres:{PASSWORD}@"), lock_timeout=0.2
    )


def test_a_lock_wait_that_times_out_says_so_in_one_line(persistent: Backend) -> None:
    """What an operator reads in the log: which store, and that a lock wait timed out; not
    the driver's text (several lines, the statement), never the DSN's password."""
    store = _short_waits(persistent)
    try:
        store.set_agent_enabled("https://pa.example", True)
        with _write_lock_held(persistent), pytest.raises(StoreUnavailable) as info:
            store.set_agent_enabled("https://pa.example", False)
    finally:
        store.close()
    message = str(info.value)
    where = "sqlite database " if persistent.name == "sqlite" else "PostgreSQL postgres@127.0.0.1:"
    assert message.startswith(where), message
    assert "a lock wait timed out" in message, message
    assert "\n" not in message, message
    for fragment in ("LINE", "INSERT", "UPDATE", "pactmw_agent_overrides", PASSWORD):
        assert fragment not in message, message
