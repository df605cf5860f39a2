"""A read-only database whose schema is current opens and serves reads in a fresh process.

A PostgreSQL hot standby, a database an operator set read-only, a role granted only SELECT,
a sqlite file nobody may write: the store must not write when it opens (the schema version
is written only when the schema is created or migrated), so reads answer; writes then fail
as they do on a read-only database the store had opened earlier: `StoreUnavailable` when the
database refuses for now, `StoreError` when the role may never write. A read-only database
whose schema is behind still cannot open: it must be migrated first.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pactmw.store import SqliteStore, Store, StoreError, StoreUnavailable
from pactmw.store.postgres import PostgresStore
from tests.support.folders import read_only_file
from tests.support.pg import PostgresServer

T0 = 1_700_000_000.0
AGENT = "https://pa.example"


def _fill(store: Store) -> str:
    """Write what the read-only store reads back: an agent override and a conversation."""
    try:
        store.set_agent_enabled(AGENT, True)
        return store.create_conversation(brand_id="acme", issuer=AGENT, sub="u1", now=T0)
    finally:
        store.close()


def _reads(store: Store, context_id: str) -> None:
    assert store.agent_enabled(AGENT) is True
    conversation = store.get_conversation(context_id)
    assert conversation is not None
    assert conversation.sub == "u1"


def _reads_but_refuses_writes(store: Store, context_id: str, refusal: str) -> None:
    """Reads answer; each kind of write is `StoreUnavailable` matching `refusal`; then reads
    still answer. Closes the store."""
    try:
        _reads(store, context_id)
        with pytest.raises(StoreUnavailable, match=refusal):
            store.set_agent_enabled(AGENT, False)
        with pytest.raises(StoreUnavailable, match=refusal):
            store.create_conversation(brand_id="acme", issuer=AGENT, sub="u2", now=T0)
        _reads(store, context_id)
    finally:
        store.close()


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh database's name, dropped afterwards."""
    name = postgres_server.create_database().rsplit("/", 1)[1]
    yield name
    postgres_server.drop_database(name)


def _admin(postgres_server: PostgresServer, *statements: sql.Composed) -> None:
    with psycopg.connect(postgres_server.dsn_for("postgres"), autocommit=True) as admin:
        for statement in statements:
            admin.execute(statement)


def _set_read_only(postgres_server: PostgresServer, database: str) -> None:
    _admin(
        postgres_server,
        sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(
            sql.Identifier(database)
        ),
    )


def test_a_read_only_postgres_database_opens_and_reads(
    postgres_server: PostgresServer, database: str
) -> None:
    context_id = _fill(PostgresStore(postgres_server.dsn_for(database)))
    _set_read_only(postgres_server, database)
    store = PostgresStore(postgres_server.dsn_for(database))  # a fresh process's store
    _reads_but_refuses_writes(store, context_id, "read-only")


def test_a_role_that_may_only_select_opens_and_reads(
    postgres_server: PostgresServer, database: str
) -> None:
    context_id = _fill(PostgresStore(postgres_server.dsn_for(database)))
    role = f"reader_{uuid.uuid4().hex[:12]}"
    _admin(postgres_server, sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    with psycopg.connect(postgres_server.dsn_for(database), autocommit=True) as owner:
        owner.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                sql.Identifier(role)
            )
        )
    dsn = postgres_server.dsn_for(database).replace(f"{postgres_server.user}@", f"{role}@")
    store = PostgresStore(dsn)
    try:
        _reads(store, context_id)
        # Never allowed, not "for now": the store's error, not a 503 to retry.
        with pytest.raises(StoreError, match="permission denied") as info:
            store.set_agent_enabled(AGENT, False)
        assert not isinstance(info.value, StoreUnavailable)
        _reads(store, context_id)
    finally:
        store.close()
        with psycopg.connect(postgres_server.dsn_for(database), autocommit=True) as owner:
            owner.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        _admin(postgres_server, sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_read_only_postgres_database_behind_the_schema_does_not_open(
    postgres_server: PostgresServer, database: str
) -> None:
    """It needs a migration it cannot take: unavailable until it is writable again."""
    _fill(PostgresStore(postgres_server.dsn_for(database)))
    with psycopg.connect(postgres_server.dsn_for(database), autocommit=True) as owner:
        owner.execute("UPDATE pactmw_schema SET version = version - 1")
    _set_read_only(postgres_server, database)
    store = PostgresStore(postgres_server.dsn_for(database))
    try:
        with pytest.raises(StoreUnavailable, match="read-only"):
            store.agent_enabled(AGENT)
    finally:
        store.close()


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_read_only_sqlite_file_opens_and_reads(tmp_path: Path, journal: str) -> None:
    """The store's files are in WAL mode; a copy made otherwise (or switched back by an
    operator) uses a rollback journal, which a file nobody may write cannot leave."""
    path = tmp_path / "store.db"
    context_id = _fill(SqliteStore(path))
    conn = sqlite3.connect(path)
    assert conn.execute(f"PRAGMA journal_mode = {journal}").fetchone() == (journal,)
    conn.close()
    with read_only_file(path):
        _reads_but_refuses_writes(SqliteStore(path), context_id, "readonly")
