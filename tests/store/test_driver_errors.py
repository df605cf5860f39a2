"""The SQL stores raise `StoreError`s: no sqlite3, psycopg or Django database exception
escapes them (sqlite, PostgreSQL, and the Django store on either).

A database that refuses a write for its own reasons (here a trigger someone added) is the
store's error, not "try again later": `StoreError`, not `StoreUnavailable`. The transaction
is rolled back and the store stays usable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pactmw.store import SqliteStore, StoreError, StoreUnavailable
from tests.store.support import Backend, open_backend

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
