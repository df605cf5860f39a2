"""The runtime agent registry and the operator's cleanup: one behaviour on memory, sqlite and
PostgreSQL (issue 14, "runtime agent registry in every store" and "retention")."""

from __future__ import annotations

import pytest

from pactmw.store import (
    AgentExists,
    AuthorizationDetailsStore,
    Cleanup,
    Store,
    StoredAgent,
    StoreUnavailable,
)
from tests.store.support import Backend, all_at_once, backend_module, schema_version
from tests.support.parties import ISSUER

T0 = 1_700_000_000.0
DAY = 86_400.0
JWKS = "https://pa.example/.well-known/jwks.json"


def _add(store: Store, issuer: str = ISSUER, *, name: str = "", now: float = T0) -> StoredAgent:
    return store.add_agent(issuer=issuer, name=name, jwks_uri=JWKS, now=now)


# --- the registry --------------------------------------------------------------------------


def test_an_added_agent_round_trips(store: Store) -> None:
    assert store.get_agent(ISSUER) is None
    added = _add(store, name="Example Assistant", now=T0 + 0.25)
    assert added == StoredAgent(ISSUER, "Example Assistant", JWKS, T0 + 0.25)
    assert store.get_agent(ISSUER) == added
    assert store.list_agents() == (added,)
    assert store.lookup_agent(ISSUER) == (added, None)
    assert store.get_agent("https://pa.example/") is None  # exact strings, nothing normalised


def test_agents_are_listed_by_issuer_code_point(store: Store) -> None:
    issuers = ["https://b.example", "https://B.example", "https://é.example", "https://a.example"]
    for issuer in issuers:
        _add(store, issuer)
    assert [agent.issuer for agent in store.list_agents()] == sorted(issuers)


def test_adding_a_stored_issuer_changes_nothing(store: Store) -> None:
    first = _add(store, name="first")
    with pytest.raises(AgentExists):
        store.add_agent(issuer=ISSUER, name="second", jwks_uri="https://x.example/j", now=T0 + 5)
    assert store.list_agents() == (first,)


def test_remove_forgets_the_agent_but_keeps_its_override(store: Store) -> None:
    _add(store)
    store.set_agent_enabled(ISSUER, False)
    assert store.remove_agent(ISSUER) is True
    assert store.remove_agent(ISSUER) is False
    assert store.get_agent(ISSUER) is None
    assert store.list_agents() == ()
    assert store.lookup_agent(ISSUER) == (None, False)
    again = _add(store, now=T0 + 9)  # added again: its block is still recorded
    assert store.lookup_agent(ISSUER) == (again, False)


def test_lookup_answers_agent_and_override_together(store: Store) -> None:
    assert store.lookup_agent(ISSUER) == (None, None)
    store.set_agent_enabled(ISSUER, True)  # a configured agent's override, no runtime record
    assert store.lookup_agent(ISSUER) == (None, True)
    added = _add(store)
    assert store.lookup_agent(ISSUER) == (added, True)
    store.set_agent_enabled(ISSUER, False)
    assert store.lookup_agent(ISSUER) == (added, False)
    assert store.lookup_agent("https://other.example") == (None, None)


def test_agent_strings_with_nul_are_refused_and_found_nowhere(store: Store) -> None:
    for field in ("issuer", "name", "jwks_uri"):
        values = {"issuer": ISSUER, "name": "", "jwks_uri": JWKS, field: "a\x00b"}
        with pytest.raises(ValueError, match="NUL"):
            store.add_agent(**values, now=T0)
    assert store.list_agents() == ()
    assert store.get_agent("a\x00b") is None
    assert store.lookup_agent("a\x00b") == (None, None)
    assert store.remove_agent("a\x00b") is False


def test_concurrent_adds_of_one_issuer_have_one_winner(store: Store) -> None:
    def add(i: int) -> str:
        try:
            store.add_agent(issuer=ISSUER, name=f"racer-{i}", jwks_uri=JWKS, now=T0 + i)
        except AgentExists:
            return "exists"
        return f"racer-{i}"

    outcomes = all_at_once(16, add)
    winners = [outcome for outcome in outcomes if outcome != "exists"]
    assert len(winners) == 1
    assert outcomes.count("exists") == 15
    stored = store.get_agent(ISSUER)
    assert stored is not None
    assert stored.name == winners[0]
    assert len(store.list_agents()) == 1


def test_concurrent_adds_of_many_issuers_all_land(store: Store) -> None:
    all_at_once(12, lambda i: _add(store, f"https://pa{i:02d}.example"))
    assert [agent.issuer for agent in store.list_agents()] == [
        f"https://pa{i:02d}.example" for i in range(12)
    ]


def test_an_add_is_seen_by_another_store_at_once(reopenable: Backend) -> None:
    """Another process (another store object on the same database) sees the change on its
    next read: there is no cache to expire."""
    a, b = reopenable.open(), reopenable.open()
    try:
        assert b.lookup_agent(ISSUER) == (None, None)
        added = _add(a)
        assert b.lookup_agent(ISSUER) == (added, None)
        a.set_agent_enabled(ISSUER, False)
        assert b.lookup_agent(ISSUER) == (added, False)
        assert a.remove_agent(ISSUER)
        assert b.lookup_agent(ISSUER) == (None, False)
    finally:
        a.close()
        b.close()


def test_agents_survive_a_reopen(reopenable: Backend) -> None:
    first = reopenable.open()
    added = _add(first, name="Kept")
    first.close()
    second = reopenable.open()
    try:
        assert second.list_agents() == (added,)
    finally:
        second.close()


def test_a_closed_store_refuses_agent_operations(store: Store) -> None:
    store.close()
    with pytest.raises(StoreUnavailable):
        _add(store)
    with pytest.raises(StoreUnavailable):
        store.lookup_agent(ISSUER)
    with pytest.raises(StoreUnavailable):
        store.list_agents()
    with pytest.raises(StoreUnavailable):
        store.cleanup(now=T0, conversations_idle_before=None)


# --- migration -----------------------------------------------------------------------------


def test_a_version_3_database_upgrades_in_place(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    assert len(migrations) >= 4  # later versions are appended (and must upgrade it too)
    # A database of the release before the runtime registry: three migrations ran.
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:3])
        old = persistent.open()
        ctx = old.create_conversation(brand_id="acme", issuer=ISSUER, sub="u1", now=T0)
        old.set_agent_enabled(ISSUER, False)
        old.close()
    assert schema_version(persistent) == 3

    new = persistent.open()
    try:
        assert new.get_conversation(ctx) is not None  # PostgreSQL migrates on first use
        assert schema_version(persistent) == len(migrations)
        assert new.agent_enabled(ISSUER) is False  # overrides are kept
        added = _add(new)
        assert new.lookup_agent(ISSUER) == (added, False)
    finally:
        new.close()


# --- cleanup -------------------------------------------------------------------------------


def _device(store: Store, code: str, *, now: float, ttl: float = 600.0) -> None:
    store.create_device_authorization(
        device_code_hash=f"hash-{code}",
        user_code=code,
        brand_id="acme",
        client_id=ISSUER,
        pa_sub="pa-user",
        scopes=("orders:read",),
        now=now,
        expires_at=now + ttl,
        interval=5.0,
    )


def test_cleanup_deletes_expired_device_authorizations_in_any_status(store: Store) -> None:
    _device(store, "PEND-OLD1", now=T0)
    _device(store, "DENY-OLD2", now=T0)
    store.decide_device_authorization(
        user_code="DENY-OLD2", approved=False, account=None, granted_scopes=(), grant_id=None,
        now=T0 + 1,
    )  # fmt: skip
    _device(store, "USED-OLD3", now=T0)
    store.approve_device_authorization(
        user_code="USED-OLD3", brand_id="acme", account="acct", granted_scopes=("orders:read",),
        new_grant_id="g-device", now=T0 + 1, grant_expires_at=T0 + 30 * DAY,
    )  # fmt: skip
    poll = store.poll_device_code(
        device_code_hash="hash-USED-OLD3", client_id=ISSUER, brand_id="acme", pa_sub="pa-user",
        now=T0 + 2,
    )  # fmt: skip
    assert poll.kind == "approved"
    _device(store, "EDGE-NOW4", now=T0 + 100, ttl=500.0)  # expires exactly at T0 + 600
    _device(store, "LIVE-PND5", now=T0 + 500)  # pending, expires at T0 + 1100

    done = store.cleanup(now=T0 + 600, conversations_idle_before=None)

    assert done == Cleanup(device_authorizations=4)
    for gone in ("PEND-OLD1", "DENY-OLD2", "USED-OLD3", "EDGE-NOW4"):
        assert store.device_authorization_by_user_code(gone) is None, gone
    live = store.device_authorization_by_user_code("LIVE-PND5")
    assert live is not None
    assert live.status == "pending"
    poll = store.poll_device_code(
        device_code_hash="hash-LIVE-PND5", client_id=ISSUER, brand_id="acme", pa_sub="pa-user",
        now=T0 + 601,
    )  # fmt: skip
    assert poll.kind == "pending"
    assert store.get_grant("g-device") is not None  # the grant the code made stays


def _grant(store: Store, grant_id: str, account: str, *, ttl: float = 30 * DAY) -> None:
    store.upsert_grant(
        grant_id=grant_id,
        brand_id="acme",
        account=account,
        client_id=ISSUER,
        pa_sub="pa-user",
        scopes=("orders:read",),
        now=T0,
        expires_at=T0 + ttl,
    )


def _token(store: Store, token_hash: str, grant_id: str, expires_at: float) -> None:
    store.issue_refresh_token(
        token_hash=token_hash,
        grant_id=grant_id,
        client_id=ISSUER,
        brand_id="acme",
        now=T0,
        expires_at=expires_at,
    )


def _rotate(store: Store, token_hash: str, new_hash: str, now: float) -> str:
    return store.rotate_refresh_token(
        token_hash=token_hash,
        new_token_hash=new_hash,
        client_id=ISSUER,
        brand_id="acme",
        pa_sub="pa-user",
        now=now,
        expires_at=T0 + 30 * DAY,
    ).kind


def test_cleanup_keeps_usable_tokens_and_the_spent_ones_that_detect_reuse(store: Store) -> None:
    _grant(store, "g-live", "live")
    _token(store, "rt-spent", "g-live", T0 + 30 * DAY)
    assert _rotate(store, "rt-spent", "rt-next", T0 + 10) == "rotated"
    _token(store, "rt-unused-expired", "g-live", T0 + 100)
    _grant(store, "g-revoked", "revoked")
    _token(store, "rt-of-revoked", "g-revoked", T0 + 30 * DAY)
    assert store.revoke_grant("g-revoked", now=T0 + 20)
    _grant(store, "g-expired", "expired", ttl=200.0)
    _token(store, "rt-of-expired", "g-expired", T0 + 200)
    _grant(store, "g-other", "other")
    _token(store, "rt-spent-by-other", "g-other", T0 + 30 * DAY)
    assert _rotate(store, "rt-spent-by-other", "rt-other-next", T0 + 10) == "rotated"
    assert store.revoke_grant("g-other", now=T0 + 30)

    done = store.cleanup(now=T0 + 300, conversations_idle_before=None)

    # Gone: the expired unused token, and every token (spent or not) of the revoked grants
    # (one, and two) and of the expired one.
    assert done == Cleanup(refresh_tokens=5)
    # The successor still rotates; the spent token of the live grant still reveals a replay.
    assert _rotate(store, "rt-next", "rt-third", T0 + 400) == "rotated"
    assert _rotate(store, "rt-spent", "rt-replayed", T0 + 500) == "reused"
    grant = store.get_grant("g-live")
    assert grant is not None
    assert grant.revoked_at == T0 + 500
    assert _rotate(store, "rt-unused-expired", "rt-x", T0 + 600) == "unknown"
    assert _rotate(store, "rt-of-revoked", "rt-y", T0 + 600) == "unknown"
    # Grants themselves are kept: they are the record of what users allowed.
    assert {g.grant_id for g in store.list_grants(include_inactive=True, now=T0 + 600)} == {
        "g-live", "g-revoked", "g-expired", "g-other"
    }  # fmt: skip


def test_cleanup_deletes_expired_single_use_values_only(store: Store) -> None:
    assert store.use_once(namespace="jti", value="old", now=T0, expires_at=T0 + 60)
    assert store.use_once(namespace="jti", value="edge", now=T0, expires_at=T0 + 100)
    assert store.use_once(namespace="jti", value="live", now=T0, expires_at=T0 + 101)

    done = store.cleanup(now=T0 + 100, conversations_idle_before=None)

    assert done == Cleanup(used_values=2)
    assert store.is_marked(namespace="jti", value="live", now=T0 + 100)
    assert not store.use_once(namespace="jti", value="live", now=T0 + 100, expires_at=T0 + 200)


def _conversation(store: Store, *, now: float, turns: int, unanswered: int = 0) -> str:
    ctx = store.create_conversation(brand_id="acme", issuer=ISSUER, sub="u1", now=now)
    for n in range(turns + unanswered):
        store.claim_message(
            context_id=ctx, message_id=f"m{n}", text=f"hi {n}", now=now, lease_seconds=30
        )
        if n < turns:
            store.store_reply(
                context_id=ctx,
                message_id=f"m{n}",
                reply_message_id=f"r{n}",
                reply_text=f"reply {n}",
                reply=b"{}",
                now=now,
            )
    return ctx


def test_cleanup_deletes_conversations_idle_before_the_cutoff_with_their_messages(
    store: Store,
) -> None:
    old = _conversation(store, now=T0, turns=2, unanswered=1)
    older = _conversation(store, now=T0 - DAY, turns=1)
    edge = _conversation(store, now=T0 + DAY, turns=1)  # last activity exactly at the cutoff
    resumed = _conversation(store, now=T0, turns=1)
    store.claim_message(
        context_id=resumed, message_id="late", text="back", now=T0 + 2 * DAY, lease_seconds=30
    )
    recent = _conversation(store, now=T0 + 3 * DAY, turns=3)

    kept = store.cleanup(now=T0 + 4 * DAY, conversations_idle_before=None)
    assert kept == Cleanup()
    assert store.get_conversation(old) is not None

    done = store.cleanup(now=T0 + 4 * DAY, conversations_idle_before=T0 + DAY)

    assert done == Cleanup(conversations=2, messages=4)
    assert store.get_conversation(old) is None
    assert store.get_conversation(older) is None
    assert store.history(old) == []
    for ctx, answered in ((edge, 1), (resumed, 1), (recent, 3)):
        assert store.get_conversation(ctx) is not None
        assert len(store.history(ctx)) == answered
    # A kept conversation still answers a retry with its stored reply.
    assert store.claim_message(
        context_id=recent, message_id="m0", text="hi 0", now=T0 + 4 * DAY, lease_seconds=30
    ).kind == "reply"  # fmt: skip


def test_cleanup_twice_deletes_nothing_more(store: Store) -> None:
    _device(store, "PEND-OLD1", now=T0)
    _conversation(store, now=T0, turns=1)
    assert store.use_once(namespace="n", value="v", now=T0, expires_at=T0 + 1)
    first = store.cleanup(now=T0 + DAY, conversations_idle_before=T0 + 1)
    assert first == Cleanup(
        device_authorizations=1, used_values=1, conversations=1, messages=1
    )  # fmt: skip
    assert store.cleanup(now=T0 + DAY, conversations_idle_before=T0 + 1) == Cleanup()


def test_cleanup_leaves_runtime_agents_and_overrides_alone(store: Store) -> None:
    added = _add(store)
    store.set_agent_enabled("https://configured.example", False)
    store.cleanup(now=T0 + 365 * DAY, conversations_idle_before=T0 + 365 * DAY)
    assert store.lookup_agent(ISSUER) == (added, None)
    assert store.agent_enabled("https://configured.example") is False


def test_cleanup_deletes_expired_authorization_details(store: Store) -> None:
    assert isinstance(store, AuthorizationDetailsStore)
    old, kept = '{"type":"old"}', '{"type":"kept"}'
    store.add_authorization_details(owner="device:h1", entries=[old], now=T0, expires_at=T0 + 600)
    store.add_authorization_details(owner="device:h2", entries=[kept], now=T0, expires_at=T0 + 601)
    store.add_authorization_details(owner="grant:g", entries=[kept], now=T0, expires_at=None)

    assert store.cleanup(now=T0 + 600, conversations_idle_before=None) == Cleanup(
        authorization_details=1
    )
    assert store.authorization_details(owner="device:h1") == ()
    assert store.authorization_details(owner="device:h2") == (kept,)
    assert store.authorization_details(owner="grant:g") == (kept,)
