"""The Poppy Account Token contract (store/_protocols/account_tokens.py) on memory, sqlite
and PostgreSQL: issued for a grant's scopes, rotated on every use, a rotated-away token
refused without ending its successor (`lifecycle.rotated-token`), narrower scopes only
(PAP-4.4-02), another agent's or Brand's token unknown (PAP-4.8-02)."""

from __future__ import annotations

from typing import Any

import pytest

from pactmw.store import NotFound, Store
from tests.store.support import Backend, all_at_once

NOW = 1_000_000.0
DAY = 86_400.0
CLIENT = "https://atlas.example/agent.json"


def grant(store: Store, grant_id: str = "g1", **changes: Any) -> Any:
    values: dict[str, Any] = {
        "grant_id": grant_id,
        "brand_id": "shop",
        "account": "alice",
        "client_id": CLIENT,
        "pa_sub": "usr_1",
        "scopes": ("orders:read", "orders:write"),
        "now": NOW,
        "expires_at": NOW + 30 * DAY,
    }
    values.update(changes)
    return store.upsert_grant(**values)


def issue(store: Store, token: str = "a1", grant_id: str = "g1", **changes: Any) -> None:
    values: dict[str, Any] = {
        "token_hash": token,
        "grant_id": grant_id,
        "brand_id": "shop",
        "client_id": CLIENT,
        "scopes": ("orders:read", "orders:write"),
        "now": NOW,
        "expires_at": NOW + 30 * DAY,
    }
    values.update(changes)
    store.issue_account_token(**values)


def rotate(store: Store, token: str, new: str, **changes: Any) -> Any:
    values: dict[str, Any] = {
        "token_hash": token,
        "new_token_hash": new,
        "brand_id": "shop",
        "client_id": CLIENT,
        "scopes": None,
        "now": NOW + 10,
        "expires_at": NOW + 10 + 30 * DAY,
    }
    values.update(changes)
    return store.rotate_account_token(**values)


def test_an_issued_token_is_read_with_its_grants_user(store: Store) -> None:
    grant(store)
    issue(store)
    token = store.account_token("a1")
    assert token is not None
    assert (token.grant_id, token.client_id, token.user_id, token.used_at) == (
        "g1",
        CLIENT,
        "usr_1",
        None,
    )
    assert token.scopes == ("orders:read", "orders:write")
    assert store.account_token("unknown") is None
    assert store.account_token("a\x00") is None


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"grant_id": "nope"}, NotFound),
        ({"client_id": "https://plain.example/agent.json"}, ValueError),
        ({"brand_id": "other"}, ValueError),
        ({"scopes": ("orders:read", "admin")}, ValueError),
        ({"token_hash": "a\x00"}, ValueError),
    ],
)
def test_issuing_checks_the_grant(store: Store, changes: dict[str, Any], error: type) -> None:
    grant(store)
    with pytest.raises(error):
        issue(store, **changes)


def test_a_hash_is_stored_once(store: Store) -> None:
    grant(store)
    issue(store)
    with pytest.raises(ValueError, match="already stored"):
        issue(store)


def test_rotation_spends_the_token_and_its_successor_keeps_working(store: Store) -> None:
    grant(store)
    issue(store)
    first = rotate(store, "a1", "a2")
    assert (first.kind, first.grant_id, first.account, first.user_id) == (
        "rotated",
        "g1",
        "alice",
        "usr_1",
    )
    assert first.scopes == ("orders:read", "orders:write")
    # lifecycle.rotated-token: the old token is refused, the grant and the new token live on.
    assert rotate(store, "a1", "a3").kind == "reused"
    assert store.get_grant("g1").revoked_at is None  # type: ignore[union-attr]
    assert rotate(store, "a2", "a4", now=NOW + 20).kind == "rotated"
    spent = store.account_token("a1")
    assert spent is not None
    assert spent.used_at == NOW + 10


def test_pap_4_4_02_narrower_scopes_only(store: Store) -> None:
    grant(store)
    issue(store)
    assert rotate(store, "a1", "a2", scopes=("orders:admin",)).kind == "invalid_scope"
    narrower = rotate(store, "a1", "a2", scopes=("orders:read",))
    assert (narrower.kind, narrower.scopes) == ("rotated", ("orders:read",))
    # The narrower token cannot widen back.
    assert rotate(store, "a2", "a3", scopes=("orders:write",)).kind == "invalid_scope"


@pytest.mark.parametrize(
    "changes", [{"client_id": "https://plain.example/agent.json"}, {"brand_id": "other"}]
)
def test_pap_4_8_02_another_agents_token_is_unknown_and_not_spent(
    store: Store, changes: dict[str, Any]
) -> None:
    grant(store)
    issue(store)
    assert rotate(store, "a1", "a2", **changes).kind == "unknown"
    assert rotate(store, "a1", "a2").kind == "rotated"


def test_expired_tokens_and_revoked_grants_end_rotation(store: Store) -> None:
    grant(store)
    issue(store, expires_at=NOW + 5)
    assert rotate(store, "a1", "a2").kind == "expired"
    grant(store, "g2", account="bob")
    issue(store, "b1", grant_id="g2")
    store.revoke_grant("g2", now=NOW + 1)
    assert rotate(store, "b1", "b2").kind == "revoked"
    assert rotate(store, "missing", "x").kind == "unknown"


def test_concurrent_rotations_one_wins_and_its_token_works(backend: Backend) -> None:
    store = backend.open()
    try:
        grant(store)
        issue(store)
        kinds = all_at_once(6, lambda i: rotate(store, "a1", f"n{i}").kind)
        assert sorted(kinds) == ["reused"] * 5 + ["rotated"]
        winners = [i for i in range(6) if store.account_token(f"n{i}") is not None]
        assert len(winners) == 1
        assert rotate(store, f"n{winners[0]}", "after", now=NOW + 20).kind == "rotated"
    finally:
        store.close()


def test_cleanup_keeps_what_can_still_sign_in_or_be_revoked(store: Store) -> None:
    grant(store)
    issue(store, "unspent")
    issue(store, "short", expires_at=NOW + 5)
    rotate(store, "unspent", "successor")  # "unspent" is now spent, of a live grant
    grant(store, "g2", account="bob")
    issue(store, "bobs", grant_id="g2")
    store.revoke_grant("g2", now=NOW + 1)
    done = store.cleanup(now=NOW + 100, conversations_idle_before=None)
    assert done.account_tokens == 2  # the expired unused one and the revoked grant's
    assert store.account_token("short") is None
    assert store.account_token("bobs") is None
    assert store.account_token("unspent") is not None  # revoking it still ends the sign-in
    assert store.account_token("successor") is not None
