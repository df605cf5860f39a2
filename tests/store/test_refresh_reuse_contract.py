"""The refresh-token reuse interval on every backend (issue 15, point 5; RFC 9700 §4.14.2).

A spent refresh token presented again within the reuse interval is `repeated`: nothing
changes, and the caller gets the sealed answer the spending rotation kept, so a client that
lost the answer of its refresh (or sent it twice at once) keeps its grant. After the interval
the same presentation is a reuse and revokes the whole grant, as before.
"""

from __future__ import annotations

import pytest

from pactmw.store import Store
from pactmw.store.base import MAX_REFRESH_REUSE_INTERVAL, Grant, Rotation
from tests.store.support import Backend, all_at_once, backend_module, schema_version

T0 = 1_700_000_000.0
TTL = 30 * 86_400.0
BRAND, CLIENT, PA_SUB = "skyline", "https://pa.example", "pa-user-1"
INTERVAL = 5.0
SEALED = b"\x00sealed answer\xff"


def _grant(store: Store) -> Grant:
    grant = store.upsert_grant(
        grant_id="a2agrant_1",
        brand_id=BRAND,
        account="acct-1",
        client_id=CLIENT,
        pa_sub=PA_SUB,
        scopes=("orders:read",),
        now=T0,
        expires_at=T0 + TTL,
    )
    store.issue_refresh_token(
        token_hash="rt-0",
        grant_id=grant.grant_id,
        client_id=CLIENT,
        brand_id=BRAND,
        now=T0,
        expires_at=T0 + TTL,
    )
    return grant


def _rotate(
    store: Store, old: str, new: str, now: float, reuse_interval: float = INTERVAL
) -> Rotation:
    return store.rotate_refresh_token(
        token_hash=old,
        new_token_hash=new,
        client_id=CLIENT,
        brand_id=BRAND,
        pa_sub=PA_SUB,
        now=now,
        expires_at=T0 + TTL,
        reuse_interval=reuse_interval,
    )


def _revoked_at(store: Store, grant: Grant) -> float | None:
    state = store.get_grant(grant.grant_id)
    assert state is not None
    return state.revoked_at


def test_a_repeat_within_the_interval_gets_the_sealed_answer(store: Store) -> None:
    grant = _grant(store)
    spent = T0 + 100
    assert _rotate(store, "rt-0", "rt-1", spent).kind == "rotated"
    # Before the winner sealed its answer, a repeat gets nothing to send (yet).
    assert _rotate(store, "rt-0", "rt-x", spent + 0.1) == Rotation(kind="repeated", grant=grant)
    assert store.seal_rotation(token_hash="rt-0", successor=SEALED) is True
    assert store.seal_rotation(token_hash="rt-0", successor=b"another") is False  # first wins
    repeat = _rotate(store, "rt-0", "rt-y", spent + INTERVAL - 0.01)
    assert repeat == Rotation(kind="repeated", grant=grant, successor=SEALED)
    assert _revoked_at(store, grant) is None
    # A repeat stores no successor of its own: only the winner's token is live.
    assert _rotate(store, "rt-x", "rt-z", spent + 1).kind == "unknown"
    assert _rotate(store, "rt-y", "rt-z", spent + 1).kind == "unknown"
    assert _rotate(store, "rt-1", "rt-2", spent + 2).kind == "rotated"


def test_reuse_after_the_interval_still_revokes_the_grant(store: Store) -> None:
    grant = _grant(store)
    spent = T0 + 100
    _rotate(store, "rt-0", "rt-1", spent)
    store.seal_rotation(token_hash="rt-0", successor=SEALED)
    reuse = _rotate(store, "rt-0", "rt-x", spent + INTERVAL)
    assert reuse.kind == "reused"
    assert reuse.successor is None
    assert _revoked_at(store, grant) == spent + INTERVAL
    assert _rotate(store, "rt-1", "rt-2", spent + INTERVAL + 1).kind == "revoked"


def test_interval_zero_disables_and_the_cap_holds(store: Store) -> None:
    grant = _grant(store)
    _rotate(store, "rt-0", "rt-1", T0 + 1, reuse_interval=0)
    assert _rotate(store, "rt-0", "rt-x", T0 + 1, reuse_interval=0).kind == "reused"
    assert _revoked_at(store, grant) == T0 + 1


def test_the_interval_is_capped(store: Store) -> None:
    grant = _grant(store)
    _rotate(store, "rt-0", "rt-1", T0 + 1, reuse_interval=3600)
    late = T0 + 1 + MAX_REFRESH_REUSE_INTERVAL
    assert _rotate(store, "rt-0", "rt-x", late, reuse_interval=3600).kind == "reused"
    assert _revoked_at(store, grant) == late


def test_a_repeat_of_a_revoked_grant_is_refused(store: Store) -> None:
    grant = _grant(store)
    _rotate(store, "rt-0", "rt-1", T0 + 1)
    store.seal_rotation(token_hash="rt-0", successor=SEALED)
    store.revoke_grant(grant.grant_id, now=T0 + 2)
    refused = _rotate(store, "rt-0", "rt-x", T0 + 3)
    assert (refused.kind, refused.successor) == ("reused", None)
    assert _revoked_at(store, grant) == T0 + 2


def test_sealed_answers_are_cleared_after_the_interval(store: Store) -> None:
    _grant(store)
    _rotate(store, "rt-0", "rt-1", T0 + 1)
    store.seal_rotation(token_hash="rt-0", successor=SEALED)
    # The next rotation of the grant, past rt-0's interval, clears rt-0's sealed answer...
    assert _rotate(store, "rt-1", "rt-2", T0 + 1 + INTERVAL).kind == "rotated"
    # ...which a longer interval then shows: still a repeat, with nothing kept to send.
    repeat = _rotate(store, "rt-0", "rt-x", T0 + 1 + INTERVAL, reuse_interval=60)
    assert (repeat.kind, repeat.successor) == ("repeated", None)


def test_seal_rotation_needs_a_spent_token(store: Store) -> None:
    _grant(store)
    assert store.seal_rotation(token_hash="rt-0", successor=SEALED) is False  # unspent
    assert store.seal_rotation(token_hash="unknown", successor=SEALED) is False
    assert store.seal_rotation(token_hash="rt\x00", successor=SEALED) is False
    assert _rotate(store, "rt-0", "rt-1", T0 + 1).kind == "rotated"
    assert _rotate(store, "rt-0", "rt-x", T0 + 2).successor is None


def test_twenty_concurrent_refreshes_have_one_winner_and_keep_the_grant(store: Store) -> None:
    grant = _grant(store)
    rotations = all_at_once(20, lambda i: _rotate(store, "rt-0", f"rt-new-{i}", T0 + 60))
    kinds = sorted(r.kind for r in rotations)
    assert kinds == ["repeated"] * 19 + ["rotated"]
    assert _revoked_at(store, grant) is None
    [winner] = [i for i, r in enumerate(rotations) if r.kind == "rotated"]
    assert store.seal_rotation(token_hash="rt-0", successor=SEALED)
    again = all_at_once(20, lambda i: _rotate(store, "rt-0", f"rt-again-{i}", T0 + 61))
    assert again == [Rotation(kind="repeated", grant=grant, successor=SEALED)] * 20
    # Only the winner's successor exists, and it rotates.
    losers = [i for i in range(20) if i != winner]
    assert _rotate(store, f"rt-new-{losers[0]}", "rt-z", T0 + 62).kind == "unknown"
    assert _rotate(store, f"rt-new-{winner}", "rt-next", T0 + 62).kind == "rotated"


def test_a_version_7_database_upgrades_in_place(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:7])
        old = persistent.open()
        _grant(old)  # a grant and its refresh token, made before the upgrade
        old.close()
    assert schema_version(persistent) == 7
    new = persistent.open()
    try:
        assert _rotate(new, "rt-0", "rt-1", T0 + 1).kind == "rotated"
        assert schema_version(persistent) == len(migrations)
        assert _rotate(new, "rt-0", "rt-x", T0 + 2).kind == "repeated"
        assert new.seal_rotation(token_hash="rt-0", successor=SEALED)
        assert _rotate(new, "rt-0", "rt-x", T0 + 3).successor == SEALED
    finally:
        new.close()
