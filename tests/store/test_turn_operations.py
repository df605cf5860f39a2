"""The one-transaction turn operations (`start_conversation`, `claim_turn`) and the index
that serves a conversation's last turns, on every backend.

They must mean exactly what the operations they stand for mean, in one store round trip:
`start_conversation` = create + bind + claim, `claim_turn` = claim + history.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pactmw.store import Claim, NotFound, Store, StoredTurn
from tests.store.support import Backend, all_at_once, open_backend

LEASE = 30.0
T0 = 1_700_000_000.0
OWNER = {"brand_id": "acme", "issuer": "https://pa.example", "sub": "u1"}


def _start(store: Store, mid: str = "m1", account: str | None = None, now: float = T0) -> str:
    return store.start_conversation(**OWNER, account=account, message_id=mid, text="hi", now=now)


def _claim_turn(
    store: Store, ctx: str, mid: str, now: float = T0, text: str = "hi", limit: int = 50
) -> Claim:
    return store.claim_turn(
        context_id=ctx,
        message_id=mid,
        text=text,
        now=now,
        lease_seconds=LEASE,
        history_limit=limit,
    )


def _answer(store: Store, ctx: str, mid: str, now: float = T0) -> None:
    store.store_reply(
        context_id=ctx,
        message_id=mid,
        reply_message_id=f"r-{mid}",
        reply_text=f"reply to {mid}",
        reply=f"body {mid}".encode(),
        now=now,
    )


def _turn(mid: str, text: str = "hi") -> StoredTurn:
    return StoredTurn(
        message_id=mid, text=text, reply_message_id=f"r-{mid}", reply_text=f"reply to {mid}"
    )


# --- start_conversation --------------------------------------------------------------------


def test_start_conversation_creates_and_claims(store: Store) -> None:
    ctx = _start(store, "m1", now=T0 + 1)
    uuid.UUID(ctx)  # a UUID, as create_conversation mints
    conversation = store.get_conversation(ctx)
    assert conversation is not None
    assert (conversation.brand_id, conversation.issuer, conversation.sub) == (
        "acme",
        "https://pa.example",
        "u1",
    )
    assert (conversation.created_at, conversation.last_activity) == (T0 + 1, T0 + 1)
    assert conversation.closed is False
    assert conversation.account is None
    # The first message is claimed: a retry before the reply sees the claim...
    assert _claim_turn(store, ctx, "m1", now=T0 + 2) == Claim(kind="pending")
    assert store.history(ctx) == []
    # ...and the reply is stored against it like any claim's.
    _answer(store, ctx, "m1", now=T0 + 3)
    assert _claim_turn(store, ctx, "m1") == Claim(kind="reply", reply=b"body m1")
    assert store.history(ctx) == [_turn("m1")]


def test_start_conversation_binds_the_account(store: Store) -> None:
    ctx = _start(store, account="acct-1")
    conversation = store.get_conversation(ctx)
    assert conversation is not None
    assert conversation.account == "acct-1"
    assert store.bind_account(ctx, "acct-2") == "acct-1"  # bound first, stays bound
    unbound = _start(store)
    assert store.bind_account(unbound, "acct-2") == "acct-2"


def test_start_conversation_ids_are_unique(store: Store) -> None:
    ids = {_start(store, "m1") for _ in range(20)}
    assert len(ids) == 20


def test_start_conversation_claim_expires_like_any_claim(store: Store) -> None:
    ctx = _start(store, "m1", now=T0)
    assert _claim_turn(store, ctx, "m1", now=T0 + LEASE - 0.001).kind == "pending"
    assert _claim_turn(store, ctx, "m1", now=T0 + LEASE, text="retry") == Claim(kind="new")
    store.release_claim(context_id=ctx, message_id="m1", claimed_at=T0 + LEASE)
    assert _claim_turn(store, ctx, "m1").kind == "new"


@pytest.mark.parametrize(
    "field", ["brand_id", "issuer", "sub", "account", "message_id", "text", "context_id"]
)
def test_start_conversation_refuses_nul(store: Store, field: str) -> None:
    values: dict[str, str | None] = {**OWNER, "account": "acct", "message_id": "m1", "text": "hi"}
    values[field] = "a\x00b"
    with pytest.raises(ValueError, match=f"^{field} must not contain NUL"):
        store.start_conversation(now=T0, **values)  # type: ignore[arg-type]


# --- claim_turn ----------------------------------------------------------------------------


def test_claim_turn_returns_the_history_with_a_new_claim(store: Store) -> None:
    ctx = _start(store, "m0", now=T0)
    _answer(store, ctx, "m0")
    for i in range(1, 4):
        claim = _claim_turn(store, ctx, f"m{i}", now=T0 + i, text=f"q{i}")
        assert claim.kind == "new"
        assert list(claim.history) == store.history(ctx)
        assert [t.message_id for t in claim.history] == [f"m{j}" for j in range(i)]
        _answer(store, ctx, f"m{i}", now=T0 + i)
    conversation = store.get_conversation(ctx)
    assert conversation is not None
    assert conversation.last_activity == T0 + 3


def test_claim_turn_limits_the_history(store: Store) -> None:
    ctx = _start(store, "m0")
    _answer(store, ctx, "m0")
    for i in range(1, 6):
        assert _claim_turn(store, ctx, f"m{i}").kind == "new"
        _answer(store, ctx, f"m{i}")
    claim = _claim_turn(store, ctx, "m6", limit=2)
    assert claim.history == (_turn("m4"), _turn("m5"))
    assert _claim_turn(store, ctx, "m7", limit=0) == Claim(kind="new")


def test_claim_turn_leaves_out_unanswered_and_released_claims(store: Store) -> None:
    ctx = _start(store, "m0")
    for mid in ("m1", "m2", "m3"):
        assert _claim_turn(store, ctx, mid).kind == "new"
    _answer(store, ctx, "m2")
    _answer(store, ctx, "m0")
    store.release_claim(context_id=ctx, message_id="m3", claimed_at=T0)
    # Claim order, not answer order; m1 unanswered, m3 released.
    assert _claim_turn(store, ctx, "m4").history == (_turn("m0"), _turn("m2"))


def test_claim_turn_other_kinds_carry_no_history(store: Store) -> None:
    ctx = _start(store, "m0")
    _answer(store, ctx, "m0")
    assert _claim_turn(store, ctx, "m1").kind == "new"
    assert _claim_turn(store, ctx, "m1") == Claim(kind="pending")
    assert _claim_turn(store, ctx, "m0") == Claim(kind="reply", reply=b"body m0")
    assert _claim_turn(store, ctx, "r-m0") == Claim(kind="conflict")


def test_claim_turn_takeover_gets_the_history(store: Store) -> None:
    ctx = _start(store, "m0")
    _answer(store, ctx, "m0")
    assert _claim_turn(store, ctx, "m1", now=T0).kind == "new"
    taken = _claim_turn(store, ctx, "m1", now=T0 + LEASE, text="again")
    assert taken == Claim(kind="new", history=(_turn("m0"),))
    _answer(store, ctx, "m1")
    assert store.history(ctx) == [_turn("m0"), _turn("m1", text="again")]


def test_claim_turn_unknown_conversation(store: Store) -> None:
    with pytest.raises(NotFound):
        _claim_turn(store, str(uuid.uuid4()), "m1")


def test_claim_turn_refuses_nul(store: Store) -> None:
    ctx = _start(store, "m0")
    with pytest.raises(ValueError, match="NUL"):
        _claim_turn(store, ctx, "m\x001")
    with pytest.raises(ValueError, match="NUL"):
        _claim_turn(store, ctx, "m1", text="a\x00b")


# --- concurrency ---------------------------------------------------------------------------


def test_sixteen_claim_turns_for_one_message_have_one_winner(store: Store) -> None:
    ctx = _start(store, "m0")
    _answer(store, ctx, "m0")
    claims = all_at_once(16, lambda _: _claim_turn(store, ctx, "m1"))
    winners = [c for c in claims if c.kind == "new"]
    assert len(winners) == 1
    assert winners[0].history == (_turn("m0"),)
    assert sorted(c.kind for c in claims) == ["new"] + ["pending"] * 15
    assert all(c == Claim(kind="pending") for c in claims if c.kind != "new")
    _answer(store, ctx, "m1")
    again = all_at_once(16, lambda _: _claim_turn(store, ctx, "m1"))
    assert again == [Claim(kind="reply", reply=b"body m1")] * 16


def test_sixteen_retries_of_a_first_message_see_its_claim(store: Store) -> None:
    # The first message started the conversation; its retries race each other.
    ctx = _start(store, "m1")
    kinds = all_at_once(16, lambda _: _claim_turn(store, ctx, "m1").kind)
    assert kinds == ["pending"] * 16


def test_sixteen_replies_with_one_reply_id_store_one(store: Store) -> None:
    # Sixteen claimed messages of one conversation all answered with the same reply id at
    # once (a buggy bot): one reply is stored, the others are refused and stay unanswered.
    ctx = _start(store, "m0")
    for i in range(1, 16):
        assert _claim_turn(store, ctx, f"m{i}", limit=0).kind == "new"

    def reply(i: int) -> str:
        try:
            store.store_reply(
                context_id=ctx,
                message_id=f"m{i}",
                reply_message_id="r-shared",
                reply_text="hi",
                reply=f"body {i}".encode(),
                now=T0 + 1,
            )
        except ValueError as exc:
            return "refused" if "already used" in str(exc) else str(exc)
        return "stored"

    outcomes = all_at_once(16, reply)
    assert sorted(outcomes) == ["refused"] * 15 + ["stored"]
    assert [t.reply_message_id for t in store.history(ctx)] == ["r-shared"]
    conversation = store.get_conversation(ctx)
    assert conversation is not None
    assert conversation.last_activity == T0 + 1


def test_replies_racing_renewals_of_their_claims_both_land(store: Store) -> None:
    # A slow turn's lease renewal and its reply, at once, for sixteen messages: every reply
    # is stored, and neither waits for the other in a lock cycle (a deadlock would refuse
    # one of them).
    ctx = _start(store, "m0")
    for i in range(1, 8):
        assert _claim_turn(store, ctx, f"m{i}", limit=0).kind == "new"

    def race(i: int) -> bool:
        mid = f"m{i // 2}"
        if i % 2:
            return store.renew_claim(context_id=ctx, message_id=mid, claimed_at=T0, now=T0 + 1)
        _answer(store, ctx, mid, now=T0 + 2)
        return True

    all_at_once(16, race)
    assert [t.message_id for t in store.history(ctx)] == [f"m{i}" for i in range(8)]


def test_concurrent_starts_are_separate_conversations(store: Store) -> None:
    ids = all_at_once(16, lambda i: _start(store, "m1", account=f"acct-{i}"))
    assert len(set(ids)) == 16
    for i, ctx in enumerate(ids):
        conversation = store.get_conversation(ctx)
        assert conversation is not None
        assert conversation.account == f"acct-{i}"
        assert _claim_turn(store, ctx, "m1").kind == "pending"


def test_start_conversation_with_a_given_id_mints_it_once(store: Store) -> None:
    given = str(uuid.uuid5(uuid.NAMESPACE_URL, "derived"))
    start = dict(OWNER, account=None, message_id="m1", text="hi", now=T0, context_id=given)
    assert store.start_conversation(**start) == given  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already exists"):
        store.start_conversation(**dict(start, message_id="m2"))  # type: ignore[arg-type]
    # Nothing of the refused start was kept: m2 was never claimed.
    assert _claim_turn(store, given, "m2").kind == "new"
    assert _claim_turn(store, given, "m1").kind == "pending"


def test_concurrent_starts_of_one_given_id_have_one_winner(store: Store) -> None:
    given = str(uuid.uuid4())

    def start(i: int) -> str:
        try:
            return store.start_conversation(
                **OWNER, account=None, message_id="m1", text="hi", now=T0, context_id=given
            )
        except ValueError:
            return "refused"

    outcomes = all_at_once(16, start)
    assert sorted(outcomes) == [given] + ["refused"] * 15


def test_replies_are_the_answered_turns_stored_bytes_in_order(store: Store) -> None:
    ctx = _start(store, "m1")
    _answer(store, ctx, "m1")
    for mid in ("m2", "m3", "m4"):
        assert _claim_turn(store, ctx, mid).kind == "new"
    _answer(store, ctx, "m3")
    _answer(store, ctx, "m2")
    store.release_claim(context_id=ctx, message_id="m4", claimed_at=T0)
    assert store.replies(ctx) == [("m1", b"body m1"), ("m2", b"body m2"), ("m3", b"body m3")]
    assert store.replies(ctx, limit=2) == [("m1", b"body m1"), ("m2", b"body m2")]
    assert store.replies(ctx, limit=0) == []
    assert store.replies(str(uuid.uuid4())) == []
    assert store.replies("nul\x00id") == []


# --- the history index -----------------------------------------------------------------------


def _fill(store: Store, turns: int) -> str:
    """A conversation of `turns` answered turns; returns its id."""
    ctx = _start(store, "m0")
    _answer(store, ctx, "m0")
    for t in range(1, turns):
        _claim_turn(store, ctx, f"m{t}", limit=0)
        _answer(store, ctx, f"m{t}")
    return ctx


def _history_plan(persistent: Backend, ctx: str) -> str:
    """The query plan of the history statement, as the backend explains it."""
    from pactmw.store.postgres import PostgresStore
    from pactmw.store.sqlite import SqliteStore

    if persistent.name == "sqlite":
        sql = SqliteStore._sql.history
        with sqlite3.connect(persistent.url.removeprefix("sqlite:///")) as conn:
            rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", (ctx, 50)).fetchall()
        return "\n".join(str(row[-1]) for row in rows)
    sql = PostgresStore._sql.history
    with psycopg.connect(persistent.url) as pconn:
        # PostgreSQL plans by statistics: with one conversation holding half the table it
        # rightly walks the primary key. A store holds many conversations, so add 20,000
        # small ones (written directly: 100,000 turns through the store would take long).
        pconn.execute(
            "INSERT INTO pactmw_conversations"
            " SELECT 'bulk-' || g, 'acme', 'iss', 'u', 0, 0, FALSE, NULL"
            " FROM generate_series(1, 20000) AS g"
        )
        pconn.execute(
            "INSERT INTO pactmw_messages (context_id, message_id, text, claimed_at,"
            " reply_message_id, reply_text, reply, replied_at)"
            " SELECT 'bulk-' || (1 + g % 20000), 'm' || g, 'hi', 0, 'r' || g, 'hello', 'x', 0"
            " FROM generate_series(1, 100000) AS g"
        )
        pconn.execute("ANALYZE pactmw_messages")
        prows = pconn.execute(f"EXPLAIN {sql}", (ctx, 50)).fetchall()
    return "\n".join(str(row[0]) for row in prows)


def test_history_is_served_by_the_index_without_a_sort(persistent: Backend) -> None:
    store = persistent.open()
    try:
        # One long conversation, whose last 50 turns are asked for, then newer short ones
        # (a planner may sort 60 rows rather than walk an index, never 500).
        ctx = _fill(store, turns=500)
        for _ in range(20):
            _fill(store, turns=10)
        history = store.history(ctx)
        assert [t.message_id for t in history] == [f"m{t}" for t in range(450, 500)]
    finally:
        store.close()
    plan = _history_plan(persistent, ctx)
    assert "pactmw_messages_answered" in plan, plan
    # No temporary B-tree (sqlite) and no Sort node (PostgreSQL): the index's order is used.
    assert "TEMP B-TREE" not in plan.upper(), plan
    assert "Sort" not in plan, plan


@pytest.fixture
def postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from open_backend("postgres", request, tmp_path)


def test_a_postgres_turn_writes_without_transactions(
    postgres: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL: a new conversation with its claim, and a reply with its touch, are one
    # statement each in autocommit (one round trip); a transaction would cost three more.
    # (sqlite's: test_sqlite_turn_statements.py.)
    store = postgres.open()
    try:
        ctx = _start(store, "m0")  # connects and migrates (in a transaction) first
        opened: list[object] = []
        real = psycopg.Connection.transaction

        def counting(self: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
            opened.append(self)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "transaction", counting)
        ctx = _start(store, "m1")
        _answer(store, ctx, "m1")
        assert opened == []
        assert store.history(ctx) == [_turn("m1")]
        _answer(store, ctx, "m1")  # a repeated reply changes nothing: the transaction says why
        assert len(opened) == 1
    finally:
        store.close()
