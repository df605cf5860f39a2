"""The SQL stores raise `StoreError`s: no sqlite3, psycopg or Django database exception
escapes them (sqlite, PostgreSQL, and the Django store on either).

A database that refuses a write for its own reasons (here a trigger someone added) is the
store's error, not "try again later": `StoreError`, not `StoreUnavailable`. The transaction
is rolled back and the store stays usable.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pactmw.store import SqliteStore, StoreError, StoreUnavailable
from tests.store.support import Backend, open_backend
from tests.support.pg import PostgresServer

T0 = 1_700_000_000.0

_PG_TRIGGER = (
    "CREATE FUNCTION pactmw_test_refuse() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$",
    "CREATE TRIGGER pactmw_test_refuse BEFORE INSERT ON pactmw_conversations"
    " FOR EACH ROW EXECUTE FUNCTION pactmw_test_refuse()",
)
_SQLITE_TRIGGER = (
    "CREATE TRIGGER pactmw_test_refuse BEFORE INSERT ON pactmw_conversations"
    " BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
)


def _add_refusing_trigger(backend: Backend) -> None:
    if backend.name == "sqlite":
        conn = sqlite3.connect(backend.url.removeprefix("sqlite:///"))
        with conn:
            conn.execute(_SQLITE_TRIGGER)
        conn.close()
    else:
        with psycopg.connect(backend.url) as pconn:
            for statement in _PG_TRIGGER:
                pconn.execute(statement)


def test_a_refused_write_is_a_store_error(persistent: Backend) -> None:
    store = persistent.open()
    try:
        store.set_agent_enabled("https://pa.example", True)  # PostgreSQL migrates on first use
        _add_refusing_trigger(persistent)
        with pytest.raises(StoreError, match="refused by a trigger") as info:
            store.create_conversation(brand_id="acme", issuer="i", sub="s", now=T0)
        assert not isinstance(info.value, StoreUnavailable)
        # Rolled back, and the store (its connection) still works.
        assert store.agent_enabled("https://pa.example") is True
        store.set_agent_enabled("https://pa.example", False)
        assert store.agent_enabled("https://pa.example") is False
    finally:
        store.close()


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "not-a.db"
    path.write_bytes(b"this is not an sqlite database, just some text" * 100)
    with pytest.raises(StoreError, match="not a database") as info:
        SqliteStore(path)
    assert not isinstance(info.value, StoreUnavailable)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_a_folder_that_cannot_be_made_is_a_store_error(tmp_path: Path) -> None:
    """The database's folder cannot be created (here a file holds its name): the store says
    which database, and why, as for any other database it cannot open; no bare OSError."""
    (tmp_path / "state").write_text("a file, not a folder")
    path = tmp_path / "state" / "pactmw.db"
    with pytest.raises(StoreUnavailable) as info:
        SqliteStore(path)
    message = str(info.value)
    assert f"sqlite database {path}" in message, message
    assert str(tmp_path / "state") in message, message


@pytest.fixture(params=["django-sqlite", "django-postgres"])
def django_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The Django store on each vendor, its tables made by Django's migrations."""
    yield from open_backend(request.param, request, tmp_path)


def test_a_refused_write_is_a_store_error_on_the_django_store(django_backend: Backend) -> None:
    # Django wraps the driver's exception in its own (django.db.utils): neither escapes.
    from django.db import connections

    alias = django_backend.url.partition(":")[2]
    store = django_backend.open()
    try:
        store.set_agent_enabled("https://pa.example", True)
        trigger = _SQLITE_TRIGGER if connections[alias].vendor == "sqlite" else None
        with connections[alias].cursor() as cursor:
            for statement in (trigger,) if trigger else _PG_TRIGGER:
                cursor.execute(statement)
        with pytest.raises(StoreError, match="refused by a trigger") as info:
            store.create_conversation(brand_id="acme", issuer="i", sub="s", now=T0)
        assert not isinstance(info.value, StoreUnavailable)
        assert info.value.__cause__ is None  # the driver's exception is summarised, not chained
        assert store.agent_enabled("https://pa.example") is True
        store.set_agent_enabled("https://pa.example", False)
        assert store.agent_enabled("https://pa.example") is False
    finally:
        store.close()


@pytest.fixture(params=["postgres", "django-postgres"])
def pg_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The two stores on PostgreSQL: pactmw's own, and the Django store."""
    yield from open_backend(request.param, request, tmp_path)


def _reconnect(backend: Backend, postgres_server: PostgresServer, dbname: str) -> None:
    """Make the store's next operation run on a new connection (PostgreSQL's settings for a
    database apply to the sessions that start after them)."""
    if backend.name == "django-postgres":
        from django.db import connections

        connections[backend.url.partition(":")[2]].close()
        return
    with psycopg.connect(postgres_server.dsn_for("postgres"), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
            " AND application_name = 'pactmw'",
            (dbname,),
        )
        deadline = time.monotonic() + 10
        while True:  # the store drops a pooled connection once the server has ended it
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                " AND application_name = 'pactmw'",
                (dbname,),
            ).fetchone()
            if row == (0,):
                return
            assert time.monotonic() < deadline, "the store's sessions did not end"
            time.sleep(0.02)


def _read_only(postgres_server: PostgresServer, dbname: str, on: bool) -> None:
    setting = (
        "SET default_transaction_read_only = on" if on else "RESET default_transaction_read_only"
    )
    with psycopg.connect(postgres_server.dsn_for("postgres"), autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} ").format(sql.Identifier(dbname)) + sql.SQL(setting)
        )


def test_a_read_only_database_is_unavailable(
    pg_backend: Backend, postgres_server: PostgresServer
) -> None:
    """A database that refuses every write for now (a hot standby after a failover, one an
    operator set read-only) is "try again later", as a read-only sqlite file is: a 503, not
    the INTERNAL error and traceback of a bug. Reads still answer, and writes work again
    once the database does."""
    if pg_backend.name == "django-postgres":
        from django.db import connections

        dbname = str(connections.settings[pg_backend.url.partition(":")[2]]["NAME"])
    else:
        dbname = pg_backend.url.rsplit("/", 1)[1]
    store = pg_backend.open()
    try:
        store.set_agent_enabled("https://pa.example", True)  # PostgreSQL migrates on first use
        _read_only(postgres_server, dbname, True)
        _reconnect(pg_backend, postgres_server, dbname)
        with pytest.raises(StoreUnavailable, match="read-only"):
            store.set_agent_enabled("https://pa.example", False)
        with pytest.raises(StoreUnavailable, match="read-only"):
            store.create_conversation(brand_id="acme", issuer="i", sub="s", now=T0)
        assert store.agent_enabled("https://pa.example") is True
        _read_only(postgres_server, dbname, False)
        _reconnect(pg_backend, postgres_server, dbname)
        store.set_agent_enabled("https://pa.example", False)
        assert store.agent_enabled("https://pa.example") is False
    finally:
        store.close()
