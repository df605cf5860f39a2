"""The sqlite store writes a turn in one statement per write (store/sqlite.py `_TURN_SCHEMA`).

Starting a conversation with its first claim, and storing a reply with the conversation's
touch, are each one statement outside any explicit transaction (the sqlite module releases
the GIL around each statement while the store's lock is held: fewer is faster under load).
What they mean is the contract's, tested on every backend in test_turn_operations.py and
test_contract.py; here, what is particular to sqlite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.store import NotFound, StoreError
from pactmw.store.base import Conversation
from pactmw.store.sqlite import MIGRATIONS, SqliteStore

T0 = 1_700_000_000.0
OWNER = {"brand_id": "acme", "issuer": "https://pa.example", "sub": "u1"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "turns.sqlite3")
    yield opened
    opened.close()


def _statements(store: SqliteStore) -> list[str]:
    """Collects each statement the store's connection runs from now on (trigger steps too)."""
    seen: list[str] = []
    assert store._conn is not None  # opened, and no fork since
    store._conn.set_trace_callback(seen.append)
    return seen


def _reply(store: SqliteStore, ctx: str, mid: str = "m1", reply_id: str = "r1") -> None:
    store.store_reply(
        context_id=ctx,
        message_id=mid,
        reply_message_id=reply_id,
        reply_text="hello",
        reply=b"body",
        now=T0 + 5,
    )


def _claim(store: SqliteStore, ctx: str, mid: str) -> str:
    return store.claim_message(
        context_id=ctx, message_id=mid, text="hi", now=T0, lease_seconds=30
    ).kind


def test_a_turn_is_one_statement_per_write(store: SqliteStore) -> None:
    seen = _statements(store)
    ctx = store.start_conversation(**OWNER, account="acct", message_id="m1", text="hi", now=T0)
    _reply(store, ctx)
    assert store._conn is not None
    store._conn.set_trace_callback(None)
    # The trace repeats a statement once per trigger step it runs: count distinct ones.
    statements = list(dict.fromkeys(seen))
    assert len(statements) == 2, statements
    assert statements[0].startswith("INSERT INTO pactmw_turn_starts")
    assert statements[1].startswith("UPDATE pactmw_messages")
    conversation = store.get_conversation(ctx)
    assert conversation is not None
    assert (conversation.account, conversation.last_activity) == ("acct", T0 + 5)
    assert store.history(ctx)[0].reply_message_id == "r1"


def test_a_reply_that_changes_nothing_says_why_in_a_transaction(store: SqliteStore) -> None:
    ctx = store.start_conversation(**OWNER, account=None, message_id="m1", text="hi", now=T0)
    _reply(store, ctx)
    seen = _statements(store)
    _reply(store, ctx)  # the same reply again: nothing to do, and no error
    assert "BEGIN IMMEDIATE" in seen
    with pytest.raises(NotFound):
        _reply(store, ctx, mid="never-claimed", reply_id="r2")
    assert _claim(store, ctx, "m2") == "new"
    with pytest.raises(ValueError, match="already used"):
        _reply(store, ctx, mid="m2", reply_id="r1")


def test_the_turn_statements_live_on_the_connection_not_in_the_file(
    store: SqliteStore, tmp_path: Path
) -> None:
    # TEMP objects: no migration, and other connections (another process, the Django store
    # on the same file) neither see nor depend on them.
    other = sqlite3.connect(tmp_path / "turns.sqlite3")
    try:
        names = {row[0] for row in other.execute("SELECT name FROM sqlite_master")}
        assert not {"pactmw_turn_starts", "pactmw_turn_start", "pactmw_reply_touches"} & names
        (version,) = other.execute("SELECT version FROM pactmw_schema").fetchone()
        assert version == len(MIGRATIONS)
    finally:
        other.close()


def test_a_taken_random_id_is_a_store_error_and_changes_nothing(store: SqliteStore) -> None:
    ctx = store.start_conversation(**OWNER, account=None, message_id="m1", text="hi", now=T0)
    again = Conversation(
        context_id=ctx, created_at=T0 + 1, last_activity=T0 + 1, closed=False, account="x", **OWNER
    )
    with pytest.raises(StoreError, match="already taken"):
        store._start_conversation(again, "m2", "hi", False)
    conversation = store.get_conversation(ctx)
    assert conversation is not None
    assert conversation.account is None
    assert _claim(store, ctx, "m2") == "new"  # the refused start claimed nothing
