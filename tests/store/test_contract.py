"""One behaviour, three backends: every Store passes the same tests.

PostgreSQL runs against a real server (tests/support/pg.py) with a fresh database per test.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from pactmw.store import (
    Claim,
    MemoryStore,
    NotFound,
    SqliteStore,
    Store,
    StoredTurn,
    StoreError,
    StoreUnavailable,
    open_store,
)
from pactmw.store import postgres as pg_backend
from pactmw.store import sqlite as sqlite_backend
from tests.store.support import Backend, all_at_once
from tests.support.net import free_port

LEASE = 30.0
T0 = 1_700_000_000.0


def _conversation(store: Store, now: float = T0) -> str:
    return store.create_conversation(
        brand_id="acme", issuer="https://pa.example", sub="u1", now=now
    )


def _claim(store: Store, ctx: str, mid: str, now: float = T0, text: str = "hi") -> Claim:
    return store.claim_message(
        context_id=ctx, message_id=mid, text=text, now=now, lease_seconds=LEASE
    )


def _reply(store: Store, ctx: str, mid: str, rid: str, body: bytes, now: float = T0) -> None:
    store.store_reply(
        context_id=ctx,
        message_id=mid,
        reply_message_id=rid,
        reply_text=f"reply to {mid}",
        reply=body,
        now=now,
    )


# --- conversations -----------------------------------------------------------------------


def test_store_satisfies_protocol(store: Store) -> None:
    assert isinstance(store, Store)


def test_create_and_get_round_trips_ownership(store: Store) -> None:
    ctx = store.create_conversation(brand_id="acme", issuer="https://pa.example", sub="u1", now=T0)
    assert uuid.UUID(ctx).version == 7
    assert str(uuid.UUID(ctx)) == ctx
    conv = store.get_conversation(ctx)
    assert conv is not None
    assert conv.context_id == ctx
    assert (conv.brand_id, conv.issuer, conv.sub) == ("acme", "https://pa.example", "u1")
    assert conv.created_at == T0
    assert conv.last_activity == T0
    assert conv.closed is False
    assert conv.account is None


def test_conversation_ids_are_unique(store: Store) -> None:
    ids = {_conversation(store) for _ in range(20)}
    assert len(ids) == 20


def test_get_unknown_conversation_is_none(store: Store) -> None:
    assert store.get_conversation(str(uuid.uuid4())) is None
    assert store.get_conversation("not-a-uuid") is None
    assert store.get_conversation("") is None
    assert store.get_conversation("bad\x00id") is None


def test_close_conversation(store: Store) -> None:
    ctx = _conversation(store)
    other = _conversation(store)
    store.close_conversation(ctx)
    store.close_conversation(ctx)  # idempotent
    store.close_conversation(str(uuid.uuid4()))  # unknown: ignored
    conv = store.get_conversation(ctx)
    assert conv is not None
    assert conv.closed is True
    assert conv.brand_id == "acme"
    other_conv = store.get_conversation(other)
    assert other_conv is not None
    assert other_conv.closed is False


def test_bind_account_first_wins(store: Store) -> None:
    ctx = _conversation(store)
    assert store.bind_account(ctx, "acct-1") == "acct-1"
    assert store.bind_account(ctx, "acct-2") == "acct-1"
    assert store.bind_account(ctx, "acct-1") == "acct-1"
    conv = store.get_conversation(ctx)
    assert conv is not None
    assert conv.account == "acct-1"


def test_bind_account_unknown_conversation(store: Store) -> None:
    with pytest.raises(NotFound):
        store.bind_account(str(uuid.uuid4()), "acct-1")


# --- claims ------------------------------------------------------------------------------


def test_claim_new_then_pending(store: Store) -> None:
    ctx = _conversation(store)
    assert _claim(store, ctx, "m1", now=T0 + 5) == Claim(kind="new")
    conv = store.get_conversation(ctx)
    assert conv is not None
    assert conv.last_activity == T0 + 5
    assert _claim(store, ctx, "m1", now=T0 + 6) == Claim(kind="pending")
    assert store.history(ctx) == []  # a claim is not a turn until answered


def test_reply_is_returned_byte_identical(store: Store) -> None:
    ctx = _conversation(store)
    body = b'{"kind":"message","parts":[{"text":"\xc3\xa9"}]}\x00\xff\r\n '
    assert _claim(store, ctx, "m1").kind == "new"
    _reply(store, ctx, "m1", "r1", body, now=T0 + 2)
    conv = store.get_conversation(ctx)
    assert conv is not None
    assert conv.last_activity == T0 + 2
    for later in (T0 + 3, T0 + 10 * LEASE):  # lease age does not matter once answered
        claim = _claim(store, ctx, "m1", now=later)
        assert claim.kind == "reply"
        assert type(claim.reply) is bytes
        assert claim.reply == body


def test_empty_reply_bytes(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1")
    _reply(store, ctx, "m1", "r1", b"")
    assert _claim(store, ctx, "m1") == Claim(kind="reply", reply=b"")


def test_agent_message_id_conflicts(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1")
    _reply(store, ctx, "m1", "r1", b"x")
    assert _claim(store, ctx, "r1") == Claim(kind="conflict")
    # Per context only: elsewhere "r1" is an ordinary new message.
    other = _conversation(store)
    assert _claim(store, other, "r1") == Claim(kind="new")


def test_message_ids_are_per_context(store: Store) -> None:
    a = _conversation(store)
    b = _conversation(store)
    assert _claim(store, a, "m1").kind == "new"
    assert _claim(store, b, "m1").kind == "new"
    _reply(store, a, "m1", "ra", b"A")
    _reply(store, b, "m1", "rb", b"B")
    assert _claim(store, a, "m1").reply == b"A"
    assert _claim(store, b, "m1").reply == b"B"


def test_claim_unknown_conversation(store: Store) -> None:
    with pytest.raises(NotFound):
        _claim(store, str(uuid.uuid4()), "m1")


def test_lease_takeover(store: Store) -> None:
    ctx = _conversation(store)
    assert _claim(store, ctx, "m1", now=T0, text="first try").kind == "new"
    assert _claim(store, ctx, "m1", now=T0 + LEASE - 0.001).kind == "pending"
    # The first worker died: at the end of the lease the turn is taken over...
    assert _claim(store, ctx, "m1", now=T0 + LEASE, text="retry").kind == "new"
    # ...and the taker holds a fresh lease, which can itself expire.
    assert _claim(store, ctx, "m1", now=T0 + LEASE + 1).kind == "pending"
    assert _claim(store, ctx, "m1", now=T0 + 2 * LEASE, text="retry 2").kind == "new"
    _reply(store, ctx, "m1", "r1", b"done")
    assert store.history(ctx) == [
        StoredTurn(message_id="m1", text="retry 2", reply_message_id="r1", reply_text="reply to m1")
    ]


def test_first_stored_reply_wins(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1", now=T0)
    _claim(store, ctx, "m1", now=T0 + LEASE)  # taken over; now two workers run the bot
    _reply(store, ctx, "m1", "r-taker", b"taker")
    _reply(store, ctx, "m1", "r-late", b"late")  # the slow first worker: ignored
    assert _claim(store, ctx, "m1").reply == b"taker"
    assert [t.reply_message_id for t in store.history(ctx)] == ["r-taker"]
    # The ignored reply id was not recorded as an agent message.
    assert _claim(store, ctx, "r-late").kind == "new"


def test_store_reply_errors(store: Store) -> None:
    ctx = _conversation(store)
    with pytest.raises(NotFound):
        _reply(store, ctx, "never-claimed", "r1", b"x")
    with pytest.raises(NotFound):
        _reply(store, str(uuid.uuid4()), "m1", "r1", b"x")
    _claim(store, ctx, "m1")
    _reply(store, ctx, "m1", "r1", b"one")
    _claim(store, ctx, "m2")
    with pytest.raises(ValueError, match="already used"):
        _reply(store, ctx, "m2", "r1", b"two")
    # The failed store left m2 claimed and unanswered.
    assert _claim(store, ctx, "m2").kind == "pending"
    _reply(store, ctx, "m2", "r2", b"two")
    assert _claim(store, ctx, "m2").reply == b"two"


def test_release_claim(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1")
    store.release_claim(context_id=ctx, message_id="m1", claimed_at=T0)
    assert _claim(store, ctx, "m1").kind == "new"  # the retry runs the bot again
    _reply(store, ctx, "m1", "r1", b"kept")
    store.release_claim(context_id=ctx, message_id="m1", claimed_at=T0)  # answered: left alone
    assert _claim(store, ctx, "m1").reply == b"kept"
    store.release_claim(context_id=ctx, message_id="unknown", claimed_at=T0)
    store.release_claim(context_id=str(uuid.uuid4()), message_id="m1", claimed_at=T0)


def test_history_order_and_limit(store: Store) -> None:
    ctx = _conversation(store)
    for i in range(5):
        _claim(store, ctx, f"m{i}", now=T0 + i, text=f"q{i}")
    # Answered out of order; m2 stays unanswered, m4 is released.
    for i in (3, 0, 1):
        _reply(store, ctx, f"m{i}", f"r{i}", f"b{i}".encode(), now=T0 + 10 + i)
    store.release_claim(context_id=ctx, message_id="m4", claimed_at=T0 + 4)
    expected = [
        StoredTurn(
            message_id=f"m{i}", text=f"q{i}", reply_message_id=f"r{i}", reply_text=f"reply to m{i}"
        )
        for i in (0, 1, 3)
    ]
    assert store.history(ctx) == expected
    assert store.history(ctx, limit=2) == expected[1:]
    assert store.history(ctx, limit=0) == []
    assert store.history(str(uuid.uuid4())) == []
    other = _conversation(store)
    assert store.history(other) == []


# --- agent overrides -----------------------------------------------------------------------


def test_agent_enabled_overrides(store: Store) -> None:
    assert store.agent_enabled("https://pa.example") is None
    store.set_agent_enabled("https://pa.example", False)
    assert store.agent_enabled("https://pa.example") is False
    store.set_agent_enabled("https://pa.example", True)
    assert store.agent_enabled("https://pa.example") is True
    store.set_agent_enabled("https://pa.example", False)
    assert store.agent_enabled("https://pa.example") is False
    assert store.agent_enabled("https://other.example") is None


def test_agent_override_seen_by_another_store(reopenable: Backend) -> None:
    """A blocked agent is refused by every process, without a restart."""
    a, b = reopenable.open(), reopenable.open()
    try:
        assert b.agent_enabled("https://pa.example") is None
        a.set_agent_enabled("https://pa.example", False)
        assert b.agent_enabled("https://pa.example") is False
    finally:
        a.close()
        b.close()


# --- input checks and lifecycle --------------------------------------------------------------


def test_nul_characters_are_refused(store: Store) -> None:
    ctx = _conversation(store)
    with pytest.raises(ValueError, match="NUL"):
        store.create_conversation(brand_id="a\x00", issuer="i", sub="s", now=T0)
    with pytest.raises(ValueError, match="NUL"):
        _claim(store, ctx, "m\x001")
    with pytest.raises(ValueError, match="NUL"):
        _claim(store, ctx, "m1", text="a\x00b")
    with pytest.raises(ValueError, match="NUL"):
        store.bind_account(ctx, "acct\x00")
    with pytest.raises(ValueError, match="NUL"):
        store.set_agent_enabled("iss\x00", False)
    _claim(store, ctx, "m1")
    with pytest.raises(ValueError, match="NUL"):
        _reply(store, ctx, "m1", "r\x00", b"x")
    assert store.agent_enabled("iss\x00") is None
    assert store.history("ctx\x00") == []
    store.release_claim(context_id=ctx, message_id="m\x00", claimed_at=T0)
    store.close_conversation("ctx\x00")


def test_closed_store_is_unavailable(store: Store) -> None:
    ctx = _conversation(store)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreUnavailable):
        store.get_conversation(ctx)
    with pytest.raises(StoreUnavailable):
        _claim(store, ctx, "m1")


def test_reopen_sees_the_same_data(reopenable: Backend) -> None:
    first = reopenable.open()
    ctx = _conversation(first)
    first.bind_account(ctx, "acct-1")
    _claim(first, ctx, "m1")
    _reply(first, ctx, "m1", "r1", b"stored")
    _claim(first, ctx, "m2")
    first.set_agent_enabled("https://pa.example", False)
    first.close()

    second = reopenable.open()
    try:
        conv = second.get_conversation(ctx)
        assert conv is not None
        assert (conv.brand_id, conv.issuer, conv.sub, conv.account) == (
            "acme",
            "https://pa.example",
            "u1",
            "acct-1",
        )
        assert _claim(second, ctx, "m1").reply == b"stored"
        assert _claim(second, ctx, "m2").kind == "pending"
        assert _claim(second, ctx, "r1").kind == "conflict"
        assert second.agent_enabled("https://pa.example") is False
        assert [t.message_id for t in second.history(ctx)] == ["m1"]
    finally:
        second.close()


def _schema_rows(backend: Backend) -> list[tuple[int, ...]]:
    if backend.name == "sqlite":
        path = backend.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT version FROM pactmw_schema").fetchall()
    with psycopg.connect(backend.url) as pconn:
        return pconn.execute("SELECT version FROM pactmw_schema").fetchall()


def _set_schema_version(backend: Backend, version: int) -> None:
    if backend.name == "sqlite":
        path = backend.url.removeprefix("sqlite:///")
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("UPDATE pactmw_schema SET version = ?", (version,))
        conn.close()
    else:
        with psycopg.connect(backend.url) as pconn:
            pconn.execute("UPDATE pactmw_schema SET version = %s", (version,))


def _migrations(backend: Backend) -> tuple[tuple[str, ...], ...]:
    return sqlite_backend.MIGRATIONS if backend.name == "sqlite" else pg_backend.MIGRATIONS


def test_migration_is_idempotent(persistent: Backend) -> None:
    a = persistent.open()
    ctx = _conversation(a)  # PostgreSQL migrates on first use
    b = persistent.open()  # a second opener finds the schema current and changes nothing
    try:
        assert b.get_conversation(ctx) is not None
        assert _schema_rows(persistent) == [(len(_migrations(persistent)),)]
    finally:
        a.close()
        b.close()
    c = persistent.open()
    try:
        assert c.get_conversation(ctx) is not None
    finally:
        c.close()
    assert _schema_rows(persistent) == [(len(_migrations(persistent)),)]


def test_newer_schema_is_refused(persistent: Backend) -> None:
    s = persistent.open()
    _conversation(s)
    s.close()
    _set_schema_version(persistent, 999)

    def open_and_use() -> None:
        # sqlite migrates when it opens, PostgreSQL on first use: both must refuse.
        later = persistent.open()
        try:
            later.get_conversation(str(uuid.uuid4()))
        finally:
            later.close()

    with pytest.raises(StoreError, match="999"):
        open_and_use()


def test_concurrent_openers_migrate_once(persistent: Backend) -> None:
    stores = all_at_once(8, lambda _: persistent.open())
    try:
        all_at_once(8, lambda i: stores[i].agent_enabled("x"))  # first use migrates
        assert _schema_rows(persistent) == [(len(_migrations(persistent)),)]
    finally:
        for s in stores:
            s.close()


# --- concurrency ---------------------------------------------------------------------------


def test_concurrent_claims_have_one_owner(store: Store) -> None:
    ctx = _conversation(store)
    kinds = all_at_once(16, lambda _: _claim(store, ctx, "m1").kind)
    assert sorted(kinds) == ["new"] + ["pending"] * 15
    body = b'{"reply": "exactly once"}'
    _reply(store, ctx, "m1", "r1", body)
    claims = all_at_once(16, lambda _: _claim(store, ctx, "m1"))
    assert claims == [Claim(kind="reply", reply=body)] * 16


def test_concurrent_takeover_has_one_winner(store: Store) -> None:
    ctx = _conversation(store)
    _claim(store, ctx, "m1", now=T0)
    kinds = all_at_once(16, lambda _: _claim(store, ctx, "m1", now=T0 + LEASE + 1).kind)
    assert sorted(kinds) == ["new"] + ["pending"] * 15


def test_concurrent_bind_account_agrees(store: Store) -> None:
    ctx = _conversation(store)
    bound = all_at_once(16, lambda i: store.bind_account(ctx, f"acct-{i}"))
    assert len(set(bound)) == 1
    conv = store.get_conversation(ctx)
    assert conv is not None
    assert conv.account == bound[0]


def test_concurrent_turns_in_many_conversations(store: Store) -> None:
    contexts = [_conversation(store) for _ in range(8)]

    def turn(i: int) -> bytes | None:
        ctx = contexts[i % 8]
        mid = f"m{i // 8}"
        if _claim(store, ctx, mid).kind == "new":
            _reply(store, ctx, mid, f"r{i // 8}", f"{ctx}/{mid}".encode())
        return _claim(store, ctx, mid).reply

    replies = all_at_once(32, turn)
    assert sorted(r for r in replies if r is not None) == sorted(
        f"{contexts[i % 8]}/m{i // 8}".encode() for i in range(32)
    )


# --- open_store ------------------------------------------------------------------------------


def test_open_store_memory() -> None:
    s = open_store("memory://")
    assert isinstance(s, MemoryStore)
    s.close()


def test_open_store_sqlite_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rel = open_store("sqlite:///nested/dir/rel.db")  # parent directories are created
    assert isinstance(rel, SqliteStore)
    rel.close()
    assert (tmp_path / "nested" / "dir" / "rel.db").is_file()
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db")  # four slashes: absolute
    absolute.close()
    assert (tmp_path / "abs.db").is_file()


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "w.db").close()
    with sqlite3.connect(tmp_path / "w.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "memory",
        "memory://extra",
        "sqlite://relative.db",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///dir/",
        "sqlite:///x.db?mode=ro",
        "redis://localhost",
        "mysql://user:hunter2@db/x",
        "/just/a/path.db",
    ],
)
def test_open_store_rejects_bad_urls(url: str) -> None:
    with pytest.raises(ValueError, match=r"memory://|sqlite|store URL") as info:
        open_store(url)
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_down_is_unavailable_without_password(scheme: str) -> None:
    url = f"{scheme}://pactmw:s3cr3t-pw@127.0.0.1:{free_port()}/db?connect_timeout=2"
    s = open_store(url)  # connecting is lazy, so an app can start before its database
    try:
        with pytest.raises(StoreUnavailable) as info:
            s.get_conversation(str(uuid.uuid4()))
        message = str(info.value)
        assert "s3cr3t-pw" not in message
        assert "127.0.0.1" in message
        assert info.value.__cause__ is None
    finally:
        s.close()


def test_invalid_postgres_dsn_hides_password() -> None:
    with pytest.raises(ValueError, match="invalid PostgreSQL DSN") as info:
        pg_backend.PostgresStore("host=x password=s3cr3t-pw port")
    assert "s3cr3t-pw" not in str(info.value)


def test_psycopg_is_imported_only_for_postgres(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from pactmw.store import open_store\n"
        "open_store('memory://').close()\n"
        f"open_store('sqlite:///{tmp_path}/x.db').close()\n"
        "assert 'psycopg' not in sys.modules, 'psycopg imported'\n"
        "from pactmw.store import PostgresStore\n"
        "assert 'psycopg' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
