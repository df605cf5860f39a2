"""The PACT Delegated profile's state: one behaviour, three backends.

Device authorizations (RFC 8628), grants, refresh-token rotation with reuse detection
(RFC 9700 §4.14) and single-use values, run against memory, a sqlite file and a real
PostgreSQL server (tests/support/pg.py, a fresh database per test). Time is always passed in.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import pytest

from pactmw.store import (
    Approval,
    DeviceAuthorization,
    Grant,
    NotFound,
    Poll,
    Rotation,
    Store,
    StoreUnavailable,
    UserCodeTaken,
    open_store,
)
from pactmw.store.base import EXPIRED_RETENTION
from tests.store.support import (
    Backend,
    all_at_once,
    backend_module,
    scalar,
    schema_version,
)

T0 = 1_700_000_000.0
DEVICE_TTL = 600.0
INTERVAL = 5.0
GRANT_TTL = 30 * 86_400.0
BRAND = "skyline"
CLIENT = "https://pa.example"
PA_SUB = "pa-user-1"
OTHER_PA_SUB = "pa-user-2"  # another user of the same personal agent
ACCOUNT = "sky-4471"
USER_CODE = "WDJB-MJHT"
DEVICE_HASH = "sha256-device-1"


def _device(
    store: Store,
    *,
    code_hash: str = DEVICE_HASH,
    user_code: str = USER_CODE,
    client_id: str = CLIENT,
    scopes: tuple[str, ...] = ("flights:upcoming:read", "flights:history:read"),
    now: float = T0,
) -> None:
    store.create_device_authorization(
        device_code_hash=code_hash,
        user_code=user_code,
        brand_id=BRAND,
        client_id=client_id,
        pa_sub=PA_SUB,
        scopes=scopes,
        now=now,
        expires_at=now + DEVICE_TTL,
        interval=INTERVAL,
    )


def _poll(
    store: Store,
    now: float,
    code_hash: str = DEVICE_HASH,
    client_id: str = CLIENT,
    pa_sub: str = PA_SUB,
) -> Poll:
    return store.poll_device_code(
        device_code_hash=code_hash, client_id=client_id, brand_id=BRAND, pa_sub=pa_sub, now=now
    )


def _grant(
    store: Store,
    *,
    grant_id: str = "a2agrant_1",
    scopes: tuple[str, ...] = ("flights:upcoming:read",),
    now: float = T0,
    ttl: float = GRANT_TTL,
    brand_id: str = BRAND,
    account: str = ACCOUNT,
    client_id: str = CLIENT,
    pa_sub: str = PA_SUB,
) -> Grant:
    return store.upsert_grant(
        grant_id=grant_id,
        brand_id=brand_id,
        account=account,
        client_id=client_id,
        pa_sub=pa_sub,
        scopes=scopes,
        now=now,
        expires_at=now + ttl,
    )


def _approve(
    store: Store,
    *,
    scopes: tuple[str, ...] = ("flights:upcoming:read",),
    now: float = T0 + 10,
    user_code: str = USER_CODE,
    brand_id: str = BRAND,
    account: str = ACCOUNT,
    new_grant_id: str = "a2agrant_new",
    ttl: float = GRANT_TTL,
) -> Approval | None:
    return store.approve_device_authorization(
        user_code=user_code,
        brand_id=brand_id,
        account=account,
        granted_scopes=scopes,
        new_grant_id=new_grant_id,
        now=now,
        grant_expires_at=now + ttl,
    )


def _deny(
    store: Store, *, now: float = T0 + 10, user_code: str = USER_CODE, account: str = ACCOUNT
) -> DeviceAuthorization | None:
    return store.decide_device_authorization(
        user_code=user_code,
        approved=False,
        account=account,
        granted_scopes=(),
        grant_id=None,
        now=now,
    )


def _issue(store: Store, grant: Grant, token_hash: str = "rt-0", now: float = T0) -> None:
    store.issue_refresh_token(
        token_hash=token_hash,
        grant_id=grant.grant_id,
        client_id=CLIENT,
        brand_id=BRAND,
        now=now,
        expires_at=grant.expires_at,
    )


def _rotate(
    store: Store,
    old: str,
    new: str,
    now: float,
    *,
    client_id: str = CLIENT,
    brand_id: str = BRAND,
    pa_sub: str = PA_SUB,
    ttl: float = GRANT_TTL,
) -> Rotation:
    return store.rotate_refresh_token(
        token_hash=old,
        new_token_hash=new,
        client_id=client_id,
        brand_id=brand_id,
        pa_sub=pa_sub,
        now=now,
        expires_at=now + ttl,
    )


# --- device authorizations -------------------------------------------------------------------


def test_create_and_look_up_a_device_authorization(store: Store) -> None:
    _device(store, scopes=("b:read", "a:read", "b:read"))
    found = store.device_authorization_by_user_code(USER_CODE)
    assert found == DeviceAuthorization(
        device_code_hash=DEVICE_HASH,
        user_code=USER_CODE,
        brand_id=BRAND,
        client_id=CLIENT,
        pa_sub=PA_SUB,
        scopes=("b:read", "a:read", "b:read"),  # requested scopes are kept as given
        created_at=T0,
        expires_at=T0 + DEVICE_TTL,
        interval=INTERVAL,
        last_polled_at=None,
        status="pending",
        account=None,
        granted_scopes=(),
        grant_id=None,
    )
    assert store.device_authorization_by_user_code("BCDF-GHJK") is None
    assert store.device_authorization_by_user_code(USER_CODE.lower()) is None  # exact match
    assert store.device_authorization_by_user_code("") is None


def test_user_code_is_unique_while_unexpired(store: Store) -> None:
    _device(store)
    with pytest.raises(UserCodeTaken):
        _device(store, code_hash="sha256-device-2", now=T0 + DEVICE_TTL - 1)
    with pytest.raises(ValueError, match="already stored"):
        _device(store, user_code="BCDF-GHJK")  # same device code hash
    # Nothing changed by the refusals.
    first = store.device_authorization_by_user_code(USER_CODE)
    assert first is not None
    assert first.device_code_hash == DEVICE_HASH
    assert store.device_authorization_by_user_code("BCDF-GHJK") is None
    # Once the holder has expired the code is free again; the expired holder is gone.
    later = T0 + DEVICE_TTL
    _device(store, code_hash="sha256-device-2", now=later)
    second = store.device_authorization_by_user_code(USER_CODE)
    assert second is not None
    assert (second.device_code_hash, second.created_at) == ("sha256-device-2", later)
    assert _poll(store, later, code_hash=DEVICE_HASH) == Poll(kind="unknown")
    assert _poll(store, later, code_hash="sha256-device-2").kind == "pending"


def test_poll_pending_records_the_poll_and_slows_down(store: Store) -> None:
    _device(store)
    # (offset from T0, expected kind): slow_down when the previous poll, slow or not, was
    # less than `interval` (5 s) before. Offsets are exact binary fractions.
    expected = [
        (1.0, "pending"),  # first poll
        (2.0, "slow_down"),  # 1 s after
        (6.5, "slow_down"),  # 4.5 s after the (recorded) slow poll
        (11.5, "pending"),  # exactly 5 s after
        (11.75, "slow_down"),
        (20.0, "pending"),
    ]
    for offset, kind in expected:
        poll = _poll(store, T0 + offset)
        assert poll.kind == kind, offset
        assert poll.authorization is not None
        assert poll.authorization.last_polled_at == T0 + offset
        assert poll.authorization.status == "pending"
        stored = store.device_authorization_by_user_code(USER_CODE)
        assert stored is not None
        assert stored.last_polled_at == T0 + offset


def test_poll_unknown_and_foreign_codes(store: Store) -> None:
    _device(store)
    assert _poll(store, T0 + 1, code_hash="no-such-hash") == Poll(kind="unknown")
    # Issued to another client or Brand: unknown, and nothing about it leaks or changes.
    assert _poll(store, T0 + 1, client_id="https://other-pa.example") == Poll(kind="unknown")
    assert store.poll_device_code(
        device_code_hash=DEVICE_HASH,
        client_id=CLIENT,
        brand_id="other-brand",
        pa_sub=PA_SUB,
        now=T0 + 1,
    ) == Poll(kind="unknown")
    # Asked by another user of the same agent: unknown too, and not recorded as a poll.
    assert _poll(store, T0 + 1, pa_sub=OTHER_PA_SUB) == Poll(kind="unknown")
    stored = store.device_authorization_by_user_code(USER_CODE)
    assert stored is not None
    assert stored.last_polled_at is None
    # The legitimate client is unaffected: first poll, so no slow_down.
    assert _poll(store, T0 + 1).kind == "pending"


def test_approved_code_is_consumed_by_one_poll(store: Store) -> None:
    _device(store)
    assert _poll(store, T0 + 1).kind == "pending"
    approval = _approve(store, scopes=("flights:upcoming:read",), now=T0 + 10)
    assert approval is not None
    decided, grant = approval.authorization, approval.grant
    assert grant is not None  # a PACT approval names its user: the grant is written
    assert decided.status == "approved"
    assert (decided.account, decided.granted_scopes, decided.grant_id) == (
        ACCOUNT,
        ("flights:upcoming:read",),
        grant.grant_id,
    )
    assert store.device_authorization_by_user_code(USER_CODE) == decided

    # Approved wins over slow_down: the poll 0.5 s after the last one still gets the tokens.
    poll = _poll(store, T0 + 1.5)
    assert poll.kind == "approved"
    assert poll.authorization is not None
    assert poll.authorization.status == "consumed"
    assert poll.authorization.grant_id == grant.grant_id
    assert poll.authorization.account == ACCOUNT
    assert poll.authorization.granted_scopes == ("flights:upcoming:read",)
    again = _poll(store, T0 + 30)
    assert again.kind == "consumed"
    assert again.authorization == poll.authorization
    # Expiry is checked before the status.
    assert _poll(store, T0 + DEVICE_TTL).kind == "expired"


def test_only_the_agent_user_who_asked_collects_an_approved_code(store: Store) -> None:
    _device(store)
    approval = _approve(store)
    assert approval is not None
    # Another user of the same agent (same client_id, other `sub`) learns nothing and
    # consumes nothing: the code stays approved for the one who asked.
    for _ in range(3):
        assert _poll(store, T0 + 20, pa_sub=OTHER_PA_SUB) == Poll(kind="unknown")
    assert store.device_authorization_by_user_code(USER_CODE) == approval.authorization
    poll = _poll(store, T0 + 20)
    assert poll.kind == "approved"
    assert poll.authorization is not None
    assert approval.grant is not None
    assert poll.authorization.grant_id == approval.grant.grant_id
    assert _poll(store, T0 + 21, pa_sub=OTHER_PA_SUB) == Poll(kind="unknown")


def test_denied_then_expired(store: Store) -> None:
    _device(store)
    denied = store.decide_device_authorization(
        user_code=USER_CODE,
        approved=False,
        account=ACCOUNT,
        granted_scopes=("ignored",),
        grant_id="ignored-too",
        now=T0 + 10,
    )
    assert denied is not None
    assert (denied.status, denied.account, denied.granted_scopes, denied.grant_id) == (
        "denied",
        ACCOUNT,
        (),
        None,
    )
    poll = _poll(store, T0 + 11)
    assert poll.kind == "denied"
    assert poll.authorization == denied
    assert _poll(store, T0 + 12).kind == "denied"  # denial is not a poll: no slow_down
    assert _poll(store, T0 + DEVICE_TTL - 0.5).kind == "denied"
    assert _poll(store, T0 + DEVICE_TTL).kind == "expired"


def test_pending_code_expires(store: Store) -> None:
    _device(store)
    assert _poll(store, T0 + DEVICE_TTL - 0.5).kind == "pending"
    poll = _poll(store, T0 + DEVICE_TTL)
    assert poll.kind == "expired"
    assert poll.authorization is not None
    assert poll.authorization.status == "pending"


def test_decide_records_denials_only(store: Store) -> None:
    assert _deny(store) is None  # unknown code
    _device(store)
    # Approvals must write their grant atomically: approve_device_authorization.
    with pytest.raises(ValueError, match="approve_device_authorization"):
        store.decide_device_authorization(
            user_code=USER_CODE,
            approved=True,
            account=ACCOUNT,
            granted_scopes=("flights:upcoming:read",),
            grant_id="a2agrant_1",
            now=T0 + 1,
        )
    stored = store.device_authorization_by_user_code(USER_CODE)
    assert stored is not None
    assert stored.status == "pending"
    # Expired: no change, the request stays pending (and reads expired when polled).
    assert _deny(store, now=T0 + DEVICE_TTL) is None
    assert store.device_authorization_by_user_code(USER_CODE) == stored
    # A denial without an account (the person was never identified) is allowed.
    denied = store.decide_device_authorization(
        user_code=USER_CODE,
        approved=False,
        account=None,
        granted_scopes=(),
        grant_id=None,
        now=T0 + 1,
    )
    assert denied is not None
    assert (denied.status, denied.account) == ("denied", None)
    # Decided: a second decision, either way, changes nothing.
    assert _deny(store, now=T0 + 2) is None
    assert _approve(store, now=T0 + 2) is None
    assert store.device_authorization_by_user_code(USER_CODE) == denied
    assert store.list_grants(include_inactive=True, now=T0 + 2) == []


# --- approvals: the decision and the grant in one transaction ---------------------------------


def test_approve_creates_a_new_grant(store: Store) -> None:
    _device(store, scopes=("c:read", "a:read", "b:read"))
    approval = _approve(store, scopes=("c:read", "a:read"), now=T0 + 10, new_grant_id="g-new")
    assert approval is not None
    assert approval.grant == Grant(
        grant_id="g-new",
        brand_id=BRAND,
        account=ACCOUNT,
        client_id=CLIENT,  # from the authorization
        pa_sub=PA_SUB,  # from the authorization
        scopes=("a:read", "c:read"),  # the grant's form: sorted, unique
        created_at=T0 + 10,
        updated_at=T0 + 10,
        expires_at=T0 + 10 + GRANT_TTL,
        revoked_at=None,
    )
    authorization = approval.authorization
    assert (authorization.status, authorization.account, authorization.grant_id) == (
        "approved",
        ACCOUNT,
        "g-new",
    )
    assert authorization.granted_scopes == ("c:read", "a:read")  # kept as given
    assert authorization.scopes == ("c:read", "a:read", "b:read")
    assert store.device_authorization_by_user_code(USER_CODE) == authorization
    assert store.get_grant("g-new") == approval.grant
    assert (
        store.live_grant(
            brand_id=BRAND, account=ACCOUNT, client_id=CLIENT, pa_sub=PA_SUB, now=T0 + 11
        )
        == approval.grant
    )
    poll = _poll(store, T0 + 11)
    assert poll.kind == "approved"
    assert poll.authorization is not None
    assert poll.authorization.grant_id == "g-new"


def test_approve_widens_the_live_grant(store: Store) -> None:
    live = _grant(store, grant_id="g-live", scopes=("a", "b"), now=T0, ttl=GRANT_TTL)
    _device(store, scopes=("c", "a"))
    approval = _approve(store, scopes=("c", "a"), now=T0 + 50, new_grant_id="g-unused", ttl=60)
    assert approval is not None
    # Union of the scopes, the later expiry, same id (new_grant_id is not used).
    assert approval.grant == Grant(
        grant_id="g-live",
        brand_id=BRAND,
        account=ACCOUNT,
        client_id=CLIENT,
        pa_sub=PA_SUB,
        scopes=("a", "b", "c"),
        created_at=T0,
        updated_at=T0 + 50,
        expires_at=live.expires_at,
        revoked_at=None,
    )
    assert approval.authorization.grant_id == "g-live"
    assert approval.authorization.granted_scopes == ("c", "a")
    assert store.get_grant("g-live") == approval.grant
    assert store.get_grant("g-unused") is None
    assert store.list_grants(include_inactive=True, now=T0 + 50) == [approval.grant]


def test_approve_never_revives_a_dead_grant(store: Store) -> None:
    revoked = _grant(store, grant_id="g-revoked", scopes=("a",))
    assert store.revoke_grant("g-revoked", now=T0 + 1)
    _device(store, scopes=("b",))
    approval = _approve(store, scopes=("b",), now=T0 + 10, new_grant_id="g-fresh")
    assert approval is not None
    assert approval.grant is not None
    assert (approval.grant.grant_id, approval.grant.scopes) == ("g-fresh", ("b",))
    old = store.get_grant(revoked.grant_id)
    assert old is not None
    assert (old.scopes, old.revoked_at) == (("a",), T0 + 1)
    # An expired (unrevoked) grant is retired, and the approval gets a new one.
    _grant(store, grant_id="g-short", account="acct-2", scopes=("a",), ttl=5)
    _device(store, code_hash="h2", user_code="BCDF-GHJK", scopes=("b",), now=T0 + 20)
    second = _approve(
        store,
        user_code="BCDF-GHJK",
        account="acct-2",
        scopes=("b",),
        now=T0 + 30,
        new_grant_id="g-acct2",
    )
    assert second is not None
    assert second.grant is not None
    assert (second.grant.grant_id, second.grant.scopes) == ("g-acct2", ("b",))
    retired = store.get_grant("g-short")
    assert retired is not None
    assert retired.revoked_at == T0 + 30


def _grant_state(store: Store, now: float) -> list[Grant]:
    return store.list_grants(include_inactive=True, now=now)


def test_approve_changes_nothing_unless_the_code_is_pending_here(store: Store) -> None:
    live = _grant(store, grant_id="g-live", scopes=("a",))
    codes = {
        "denied": ("h-denied", "BBBB-BBBB"),
        "approved": ("h-approved", "CCCC-CCCC"),
        "consumed": ("h-consumed", "DDDD-DDDD"),
        "expired": ("h-expired", "FFFF-FFFF"),
        "foreign": ("h-foreign", "GGGG-GGGG"),
    }
    for code_hash, user_code in codes.values():
        _device(store, code_hash=code_hash, user_code=user_code, scopes=("a", "b"))
    assert _deny(store, user_code="BBBB-BBBB", now=T0 + 1) is not None
    # (Short grant lifetimes: these approvals widen g-live by nothing and extend it not.)
    assert _approve(store, user_code="CCCC-CCCC", scopes=("a",), now=T0 + 1, ttl=60) is not None
    assert _approve(store, user_code="DDDD-DDDD", scopes=("a",), now=T0 + 1, ttl=60) is not None
    assert _poll(store, T0 + 2, code_hash="h-consumed").kind == "approved"
    before = _grant_state(store, T0 + 10)
    assert before == [
        Grant(
            grant_id="g-live",
            brand_id=BRAND,
            account=ACCOUNT,
            client_id=CLIENT,
            pa_sub=PA_SUB,
            scopes=("a",),
            created_at=T0,
            updated_at=T0 + 1,
            expires_at=live.expires_at,
            revoked_at=None,
        )
    ]
    authorizations = {u: store.device_authorization_by_user_code(u) for _, u in codes.values()}

    attempts: list[tuple[str, dict[str, Any]]] = [
        ("unknown", {"user_code": "ZZZZ-ZZZZ"}),
        ("denied", {"user_code": "BBBB-BBBB"}),
        ("approved", {"user_code": "CCCC-CCCC"}),
        ("consumed", {"user_code": "DDDD-DDDD"}),
        ("expired", {"user_code": "FFFF-FFFF", "now": T0 + DEVICE_TTL}),
        ("other brand", {"user_code": "GGGG-GGGG", "brand_id": "other-brand"}),
        ("NUL code", {"user_code": "GGGG\x00GGGG"}),
    ]
    for label, overrides in attempts:
        kwargs: dict[str, Any] = {"scopes": ("a", "b"), "new_grant_id": f"g-{label}"}
        kwargs.update(overrides)
        assert _approve(store, **kwargs) is None, label
        # No grant written, widened or extended; no authorization changed.
        assert _grant_state(store, T0 + 10) == before, label
        assert {
            u: store.device_authorization_by_user_code(u) for _, u in codes.values()
        } == authorizations, label
    # The other Brand's code is still pending for its own Brand.
    assert _approve(store, user_code="GGGG-GGGG", scopes=("b",), now=T0 + 20) is not None


def test_approve_refuses_bad_input_and_changes_nothing(store: Store) -> None:
    _grant(store, grant_id="g-old", account="acct-old")
    store.revoke_grant("g-old", now=T0 + 1)
    _device(store)
    refusals: list[tuple[dict[str, Any], type[Exception]]] = [
        ({"scopes": ()}, ValueError),
        ({"scopes": ("ok", "bad\x00")}, ValueError),
        ({"account": "acct\x00"}, ValueError),
        ({"new_grant_id": "g\x00"}, ValueError),
        ({"new_grant_id": "g-old"}, ValueError),  # a new grant cannot reuse an old id
    ]
    for kwargs, error in refusals:
        with pytest.raises(error):
            _approve(store, **kwargs)
    with pytest.raises(TypeError):
        _approve(store, scopes="flights:upcoming:read")  # type: ignore[arg-type]
    stored = store.device_authorization_by_user_code(USER_CODE)
    assert stored is not None
    assert stored.status == "pending"
    assert [g.grant_id for g in _grant_state(store, T0 + 2)] == ["g-old"]
    assert _approve(store, new_grant_id="g-ok") is not None


# --- grants ------------------------------------------------------------------------------------


def test_upsert_creates_then_unions_and_extends(store: Store) -> None:
    first = _grant(store, scopes=("b", "a", "b"), now=T0)
    assert first == Grant(
        grant_id="a2agrant_1",
        brand_id=BRAND,
        account=ACCOUNT,
        client_id=CLIENT,
        pa_sub=PA_SUB,
        scopes=("a", "b"),  # sorted, unique
        created_at=T0,
        updated_at=T0,
        expires_at=T0 + GRANT_TTL,
        revoked_at=None,
    )
    assert store.get_grant("a2agrant_1") == first
    # Step-up: a second approval widens the live grant and keeps its id.
    widened = _grant(store, grant_id="a2agrant_2", scopes=("c", "a"), now=T0 + 100)
    assert widened.grant_id == "a2agrant_1"
    assert widened.scopes == ("a", "b", "c")
    assert widened.expires_at == T0 + 100 + GRANT_TTL
    assert (widened.created_at, widened.updated_at) == (T0, T0 + 100)
    assert store.get_grant("a2agrant_1") == widened
    assert store.get_grant("a2agrant_2") is None
    # A shorter expiry never shortens the grant.
    same = _grant(store, grant_id="a2agrant_3", scopes=("a",), now=T0 + 200, ttl=60)
    assert same.expires_at == T0 + 100 + GRANT_TTL
    assert same.scopes == ("a", "b", "c")
    assert same.updated_at == T0 + 200
    live = store.live_grant(
        brand_id=BRAND, account=ACCOUNT, client_id=CLIENT, pa_sub=PA_SUB, now=T0 + 300
    )
    assert live == same
    assert store.get_grant("no-such-grant") is None


def test_grant_key_has_four_parts(store: Store) -> None:
    base = _grant(store, grant_id="g0")
    others = [
        _grant(store, grant_id="g1", brand_id="other-brand"),
        _grant(store, grant_id="g2", account="other-account"),
        _grant(store, grant_id="g3", client_id="https://other-pa.example"),
        _grant(store, grant_id="g4", pa_sub="pa-user-2"),
    ]
    assert [g.grant_id for g in others] == ["g1", "g2", "g3", "g4"]
    assert base.grant_id == "g0"
    assert len(store.list_grants(now=T0)) == 5


def test_revoked_grant_is_never_revived(store: Store) -> None:
    old = _grant(store, grant_id="g-old", scopes=("a", "b"))
    assert store.revoke_grant("g-old", now=T0 + 10) is True
    new = _grant(store, grant_id="g-new", scopes=("c",), now=T0 + 20)
    assert new.grant_id == "g-new"
    assert new.scopes == ("c",)  # only what was approved now
    revoked = store.get_grant(old.grant_id)
    assert revoked is not None
    assert revoked.revoked_at == T0 + 10
    assert revoked.scopes == ("a", "b")
    assert not revoked.is_live(T0 + 20)
    assert (
        store.live_grant(
            brand_id=BRAND, account=ACCOUNT, client_id=CLIENT, pa_sub=PA_SUB, now=T0 + 20
        )
        == new
    )


def test_expired_grant_is_retired_not_revived(store: Store) -> None:
    old = _grant(store, grant_id="g-old", scopes=("a",), ttl=100)
    at_expiry = T0 + 100
    assert (
        store.live_grant(
            brand_id=BRAND, account=ACCOUNT, client_id=CLIENT, pa_sub=PA_SUB, now=at_expiry
        )
        is None
    )
    new = _grant(store, grant_id="g-new", scopes=("b",), now=at_expiry)
    assert (new.grant_id, new.scopes, new.created_at) == ("g-new", ("b",), at_expiry)
    retired = store.get_grant(old.grant_id)
    assert retired is not None
    assert retired.revoked_at == at_expiry
    assert retired.scopes == ("a",)


def test_upsert_refuses_bad_input(store: Store) -> None:
    with pytest.raises(ValueError, match="at least one scope"):
        _grant(store, scopes=())
    with pytest.raises(TypeError):
        _grant(store, scopes="flights:upcoming:read")  # type: ignore[arg-type]
    _grant(store, grant_id="g1")
    store.revoke_grant("g1", now=T0 + 1)
    with pytest.raises(ValueError, match="already used"):
        _grant(store, grant_id="g1", now=T0 + 2)  # a new grant cannot reuse an old id
    assert store.list_grants(now=T0 + 2) == []


def test_revoke_one_grant(store: Store) -> None:
    grant = _grant(store, grant_id="g1", ttl=100)
    assert store.revoke_grant("g1", now=T0 + 5) is True
    assert store.revoke_grant("g1", now=T0 + 6) is False  # already revoked: first time kept
    stored = store.get_grant("g1")
    assert stored is not None
    assert stored.revoked_at == T0 + 5
    assert store.revoke_grant("unknown", now=T0) is False
    expired = _grant(store, grant_id="g2", account="acct-2", ttl=100)
    assert store.revoke_grant("g2", now=T0 + 100) is False  # expired: not live
    assert store.get_grant("g2") == expired
    assert grant.grant_id == "g1"


def test_revoke_account_grants(store: Store) -> None:
    _grant(store, grant_id="a-sky", now=T0)
    _grant(store, grant_id="a-other-pa", client_id="https://other-pa.example", now=T0 + 1)
    _grant(store, grant_id="a-acme", brand_id="acme", now=T0 + 2)
    _grant(store, grant_id="a-dead", pa_sub="pa-user-9", now=T0 + 3)
    store.revoke_grant("a-dead", now=T0 + 4)
    _grant(store, grant_id="b-sky", account="someone-else", now=T0 + 5)

    assert store.revoke_account_grants(ACCOUNT, now=T0 + 10, brand_id=BRAND) == [
        "a-other-pa",
        "a-sky",
    ]
    assert store.revoke_account_grants(ACCOUNT, now=T0 + 20) == ["a-acme"]
    assert store.revoke_account_grants(ACCOUNT, now=T0 + 30) == []
    assert store.revoke_account_grants("nobody", now=T0 + 30) == []
    revoked = {g.grant_id: g.revoked_at for g in store.list_grants(include_inactive=True, now=0)}
    assert revoked == {
        "a-sky": T0 + 10,
        "a-other-pa": T0 + 10,
        "a-acme": T0 + 20,
        "a-dead": T0 + 4,
        "b-sky": None,
    }


def test_list_grants_filters_and_order(store: Store) -> None:
    _grant(store, grant_id="g1", now=T0)
    _grant(store, grant_id="g2", brand_id="acme", now=T0 + 1)
    _grant(store, grant_id="g3", account="acct-2", now=T0 + 2, ttl=10)
    _grant(store, grant_id="g5", pa_sub="p5", now=T0 + 3)
    _grant(store, grant_id="g4", pa_sub="p4", now=T0 + 3)  # same created_at: id descending
    store.revoke_grant("g5", now=T0 + 4)
    now = T0 + 20  # g3 has expired

    def ids(**filters: Any) -> list[str]:
        return [g.grant_id for g in store.list_grants(now=now, **filters)]

    assert ids() == ["g4", "g2", "g1"]
    assert ids(include_inactive=True) == ["g5", "g4", "g3", "g2", "g1"]
    assert ids(brand_id=BRAND) == ["g4", "g1"]
    assert ids(brand_id=BRAND, include_inactive=True) == ["g5", "g4", "g3", "g1"]
    assert ids(account="acct-2") == []
    assert ids(account="acct-2", include_inactive=True) == ["g3"]
    assert ids(brand_id="acme", account=ACCOUNT) == ["g2"]
    assert ids(brand_id="nope") == []


# --- refresh tokens ----------------------------------------------------------------------------


def test_rotate_a_chain_of_three(store: Store) -> None:
    grant = _grant(store)
    _issue(store, grant, "rt-0")
    for i in range(3):
        rotation = _rotate(store, f"rt-{i}", f"rt-{i + 1}", now=T0 + 3600 * (i + 1))
        assert rotation == Rotation(kind="rotated", grant=grant)
    # Every spent token is now a reuse; the last one is the only live token, until a reuse.
    assert _rotate(store, "rt-3", "rt-4", now=T0 + 4 * 3600).kind == "rotated"


def test_reuse_revokes_the_whole_grant(store: Store) -> None:
    grant = _grant(store)
    _issue(store, grant, "rt-0")
    assert _rotate(store, "rt-0", "rt-1", now=T0 + 10).kind == "rotated"
    reuse = _rotate(store, "rt-0", "rt-x", now=T0 + 20)  # a thief replays the old token
    assert reuse.kind == "reused"
    assert reuse.grant is not None
    assert reuse.grant.revoked_at == T0 + 20
    assert store.get_grant(grant.grant_id) == reuse.grant
    assert (
        store.live_grant(
            brand_id=BRAND, account=ACCOUNT, client_id=CLIENT, pa_sub=PA_SUB, now=T0 + 20
        )
        is None
    )
    # The successor token dies with the grant; the rejected new hash was never stored.
    assert _rotate(store, "rt-1", "rt-2", now=T0 + 30).kind == "revoked"
    assert _rotate(store, "rt-x", "rt-y", now=T0 + 30).kind == "unknown"
    # Another replay keeps the first revocation time.
    again = _rotate(store, "rt-0", "rt-z", now=T0 + 40)
    assert again.kind == "reused"
    assert again.grant is not None
    assert again.grant.revoked_at == T0 + 20


def test_foreign_or_unknown_token_is_not_spent(store: Store) -> None:
    grant = _grant(store)
    _issue(store, grant, "rt-0")
    assert _rotate(store, "nope", "rt-1", now=T0 + 1) == Rotation(kind="unknown")
    assert _rotate(store, "rt-0", "rt-1", now=T0 + 1, client_id="https://thief.example") == (
        Rotation(kind="unknown")
    )
    assert _rotate(store, "rt-0", "rt-1", now=T0 + 1, brand_id="acme") == Rotation(kind="unknown")
    # Another user of the same agent: the token is not theirs (the grant's pa_sub decides).
    assert _rotate(store, "rt-0", "rt-1", now=T0 + 1, pa_sub=OTHER_PA_SUB) == (
        Rotation(kind="unknown")
    )
    # None burned the token nor stored the offered successor.
    assert _rotate(store, "rt-0", "rt-1", now=T0 + 2).kind == "rotated"


def test_a_spent_token_from_another_agent_user_is_not_reuse(store: Store) -> None:
    grant = _grant(store)
    other = _grant(store, grant_id="g-other", pa_sub=OTHER_PA_SUB)
    _issue(store, grant, "rt-0")
    _issue(store, other, "rt-other")
    assert _rotate(store, "rt-0", "rt-1", now=T0 + 10).kind == "rotated"
    # The spent token, presented by another user of the same agent: unknown, so it is not
    # counted as reuse and revokes nothing (neither grant), and its successor is not stored.
    for offered in ("rt-x", "rt-y"):
        assert _rotate(store, "rt-0", offered, now=T0 + 20, pa_sub=OTHER_PA_SUB) == (
            Rotation(kind="unknown")
        )
    # The live token too, and the other user's own token works for them only.
    assert _rotate(store, "rt-1", "rt-z", now=T0 + 20, pa_sub=OTHER_PA_SUB) == (
        Rotation(kind="unknown")
    )
    assert _rotate(store, "rt-other", "rt-o1", now=T0 + 20).kind == "unknown"
    assert store.get_grant(grant.grant_id) == grant
    assert store.get_grant(other.grant_id) == other
    assert _rotate(store, "rt-x", "rt-x2", now=T0 + 21).kind == "unknown"  # never stored
    assert _rotate(store, "rt-1", "rt-2", now=T0 + 30) == Rotation(kind="rotated", grant=grant)
    assert _rotate(store, "rt-other", "rt-o1", now=T0 + 30, pa_sub=OTHER_PA_SUB) == Rotation(
        kind="rotated", grant=other
    )
    # The owner replaying the spent token is still reuse.
    assert _rotate(store, "rt-0", "rt-r", now=T0 + 40).kind == "reused"


def test_expired_token_and_dead_grant(store: Store) -> None:
    grant = _grant(store, ttl=1000)
    store.issue_refresh_token(
        token_hash="rt-short",
        grant_id=grant.grant_id,
        client_id=CLIENT,
        brand_id=BRAND,
        now=T0,
        expires_at=T0 + 100,
    )
    expired = _rotate(store, "rt-short", "rt-1", now=T0 + 100)
    assert expired == Rotation(kind="expired", grant=grant)
    assert _rotate(store, "rt-1", "rt-2", now=T0 + 100).kind == "unknown"  # not stored
    # The grant expired (the token has not): revoked, and the token is not spent.
    store.issue_refresh_token(
        token_hash="rt-long",
        grant_id=grant.grant_id,
        client_id=CLIENT,
        brand_id=BRAND,
        now=T0,
        expires_at=T0 + 5000,
    )
    assert _rotate(store, "rt-long", "rt-2", now=T0 + 1000).kind == "revoked"
    assert _rotate(store, "rt-long", "rt-2", now=T0 + 999).kind == "rotated"
    # The grant was revoked: revoked as well.
    other = _grant(store, grant_id="g2", account="acct-2")
    _issue(store, other, "rt-2b")
    assert store.revoke_grant("g2", now=T0 + 5)
    dead = _rotate(store, "rt-2b", "rt-3", now=T0 + 6)
    assert dead.kind == "revoked"
    assert dead.grant is not None
    assert dead.grant.revoked_at == T0 + 5


def test_issue_refresh_token_checks(store: Store) -> None:
    grant = _grant(store)
    with pytest.raises(NotFound):
        store.issue_refresh_token(
            token_hash="rt-0",
            grant_id="missing",
            client_id=CLIENT,
            brand_id=BRAND,
            now=T0,
            expires_at=T0 + 1,
        )
    with pytest.raises(ValueError, match="client"):
        store.issue_refresh_token(
            token_hash="rt-0",
            grant_id=grant.grant_id,
            client_id="https://other-pa.example",
            brand_id=BRAND,
            now=T0,
            expires_at=T0 + 1,
        )
    _issue(store, grant, "rt-0")
    with pytest.raises(ValueError, match="already stored"):
        _issue(store, grant, "rt-0")
    _issue(store, grant, "rt-1")
    with pytest.raises(ValueError, match="already stored"):
        _rotate(store, "rt-0", "rt-1", now=T0 + 1)  # successor hash taken: nothing happens
    assert _rotate(store, "rt-0", "rt-2", now=T0 + 2).kind == "rotated"


# --- single-use values -------------------------------------------------------------------------


def test_use_once(store: Store) -> None:
    assert store.use_once(namespace="assertion", value="jti-1", now=T0, expires_at=T0 + 120)
    assert not store.use_once(namespace="assertion", value="jti-1", now=T0 + 1, expires_at=T0 + 9)
    assert store.use_once(namespace="proof", value="jti-1", now=T0 + 1, expires_at=T0 + 120)
    assert store.use_once(namespace="assertion", value="jti-2", now=T0 + 1, expires_at=T0 + 120)
    assert not store.use_once(
        namespace="assertion", value="jti-1", now=T0 + 119.5, expires_at=T0 + 200
    )
    # The record expired: the value counts as new again, with a fresh record.
    assert store.use_once(namespace="assertion", value="jti-1", now=T0 + 120, expires_at=T0 + 300)
    assert not store.use_once(
        namespace="assertion", value="jti-1", now=T0 + 250, expires_at=T0 + 300
    )


def test_is_marked_reads_use_once_records(store: Store) -> None:
    assert not store.is_marked(namespace="closed", value="s-1", now=T0)
    assert store.use_once(namespace="closed", value="s-1", now=T0, expires_at=T0 + 60)
    assert store.is_marked(namespace="closed", value="s-1", now=T0)
    assert store.is_marked(namespace="closed", value="s-1", now=T0 + 59.5)
    assert not store.is_marked(namespace="other", value="s-1", now=T0)
    assert not store.is_marked(namespace="closed", value="s-2", now=T0)
    # Unexpired while now < expires_at, exactly as use_once counts it.
    assert not store.is_marked(namespace="closed", value="s-1", now=T0 + 60)
    assert not store.is_marked(namespace="closed", value="s\x00", now=T0)


def test_is_marked_records_nothing(store: Store) -> None:
    for i in range(3):
        assert not store.is_marked(namespace="closed", value="s-1", now=T0 + i)
    # Asking left no record behind: the first use_once still wins, and its record holds.
    assert store.use_once(namespace="closed", value="s-1", now=T0 + 3, expires_at=T0 + 60)
    assert store.is_marked(namespace="closed", value="s-1", now=T0 + 4)
    assert not store.use_once(namespace="closed", value="s-1", now=T0 + 5, expires_at=T0 + 90)
    # ... and asking does not renew it either.
    assert store.is_marked(namespace="closed", value="s-1", now=T0 + 59)
    assert not store.is_marked(namespace="closed", value="s-1", now=T0 + 60)
    assert store.use_once(namespace="closed", value="s-1", now=T0 + 60, expires_at=T0 + 120)


def test_is_marked_sees_other_store_objects(persistent: Backend) -> None:
    first, second = persistent.open(), persistent.open()
    try:
        assert first.use_once(namespace="closed", value="s-1", now=T0, expires_at=T0 + 60)
        assert second.is_marked(namespace="closed", value="s-1", now=T0 + 1)
    finally:
        first.close()
        second.close()


def test_is_marked_writes_no_row(persistent: Backend) -> None:
    store = persistent.open()
    try:
        assert not store.is_marked(namespace="closed", value="s-1", now=T0)
    finally:
        store.close()
    assert _count(persistent, "pactmw_used_values") == 0


def test_is_marked_on_a_closed_store(backend: Backend) -> None:
    store = backend.open()
    store.close()
    with pytest.raises(StoreUnavailable):
        store.is_marked(namespace="closed", value="s-1", now=T0)


def _count(backend: Backend, table: str) -> int:
    return scalar(backend, f"SELECT count(*) FROM {table}")


def test_expired_rows_are_purged(persistent: Backend) -> None:
    first = persistent.open()
    grant = _grant(first)
    for i in range(10):
        first.use_once(namespace="n", value=f"v{i}", now=T0, expires_at=T0 + 60)
        _device(first, code_hash=f"h{i}", user_code=f"CODE-{i:04d}", now=T0)
        _issue(first, grant, f"rt-{i}")
    first.close()
    assert _count(persistent, "pactmw_used_values") == 10

    # Each store object purges on its first purging call, then every PURGE_EVERY-th one.
    second = persistent.open()
    try:
        assert second.use_once(namespace="n", value="new", now=T0 + 61, expires_at=T0 + 120)
    finally:
        second.close()
    assert _count(persistent, "pactmw_used_values") == 1
    # Device codes and refresh tokens are kept a day after expiry (late polls, late replays).
    assert _count(persistent, "pactmw_device_authorizations") == 10
    assert _count(persistent, "pactmw_refresh_tokens") == 10

    late = T0 + GRANT_TTL + EXPIRED_RETENTION
    third = persistent.open()
    try:
        assert third.use_once(namespace="n", value="later", now=late, expires_at=late + 60)
        assert third.get_grant(grant.grant_id) is not None  # grants are records: never purged
    finally:
        third.close()
    assert _count(persistent, "pactmw_used_values") == 1
    assert _count(persistent, "pactmw_device_authorizations") == 0
    assert _count(persistent, "pactmw_refresh_tokens") == 0


def test_memory_store_purges_too() -> None:
    store = open_store("memory://")
    try:
        for i in range(200):
            store.use_once(namespace="n", value=f"v{i}", now=T0 + i, expires_at=T0 + i + 1)
        # Purged every PURGE_EVERY calls, so far fewer than 200 records remain.
        assert len(store._used) < 100  # type: ignore[attr-defined]
        assert not store.use_once(namespace="n", value="v199", now=T0 + 199.5, expires_at=T0)
    finally:
        store.close()


# --- input checks and lifecycle ------------------------------------------------------------------


def test_nul_characters(store: Store) -> None:
    with pytest.raises(ValueError, match="NUL"):
        _device(store, user_code="AB\x00")
    with pytest.raises(ValueError, match="NUL"):
        _device(store, scopes=("a\x00",))
    with pytest.raises(TypeError):
        _device(store, scopes="flights:upcoming:read")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        _grant(store, account="acct\x00")
    with pytest.raises(ValueError, match="NUL"):
        _grant(store, scopes=("ok", "bad\x00"))
    with pytest.raises(ValueError, match="NUL"):
        store.use_once(namespace="n", value="v\x00", now=T0, expires_at=T0 + 1)
    grant = _grant(store)
    _issue(store, grant)
    with pytest.raises(ValueError, match="NUL"):
        _rotate(store, "rt-0", "rt\x00", now=T0 + 1)
    _device(store)
    with pytest.raises(ValueError, match="NUL"):
        _approve(store, account="a\x00")
    with pytest.raises(ValueError, match="NUL"):
        _deny(store, account="a\x00")
    # Lookups by a value holding NUL find nothing.
    assert store.device_authorization_by_user_code("WDJB\x00") is None
    assert _poll(store, T0 + 1, code_hash="h\x00") == Poll(kind="unknown")
    assert _poll(store, T0 + 1, client_id="c\x00") == Poll(kind="unknown")
    assert _poll(store, T0 + 1, pa_sub="p\x00") == Poll(kind="unknown")
    assert store.get_grant("g\x00") is None
    assert (
        store.live_grant(brand_id="b\x00", account=ACCOUNT, client_id=CLIENT, pa_sub=PA_SUB, now=T0)
        is None
    )
    assert store.revoke_grant("g\x00", now=T0) is False
    assert store.revoke_account_grants("a\x00", now=T0) == []
    assert store.list_grants(account="a\x00", now=T0) == []
    assert _rotate(store, "rt\x00", "rt-1", now=T0 + 1) == Rotation(kind="unknown")
    assert _rotate(store, "rt-0", "rt-1", now=T0 + 1, pa_sub="p\x00") == Rotation(kind="unknown")
    assert _approve(store, user_code="W\x00") is None
    assert _approve(store, brand_id="b\x00") is None
    assert _deny(store, user_code="W\x00") is None


def test_closed_store_is_unavailable(store: Store) -> None:
    store.close()
    with pytest.raises(StoreUnavailable):
        _device(store)
    with pytest.raises(StoreUnavailable):
        _grant(store)
    with pytest.raises(StoreUnavailable):
        store.use_once(namespace="n", value="v", now=T0, expires_at=T0 + 1)
    with pytest.raises(StoreUnavailable):
        _rotate(store, "a", "b", now=T0)


def test_state_survives_reopening(persistent: Backend) -> None:
    first = persistent.open()
    _device(first)
    approval = _approve(first, scopes=("x", "y"))
    assert approval is not None
    grant = approval.grant
    assert grant is not None
    _issue(first, grant)
    first.use_once(namespace="n", value="v", now=T0, expires_at=T0 + 60)
    first.close()
    second = persistent.open()
    try:
        assert second.get_grant(grant.grant_id) == grant
        assert not second.use_once(namespace="n", value="v", now=T0 + 1, expires_at=T0 + 60)
        assert _poll(second, T0 + 20).kind == "approved"
        assert _rotate(second, "rt-0", "rt-1", now=T0 + 30) == Rotation("rotated", grant)
    finally:
        second.close()


# --- migration -----------------------------------------------------------------------------------


def test_a_version_1_database_upgrades_in_place(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    assert len(migrations) >= 2
    # A database made by an earlier release: only the first migration ran.
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:1])
        old = persistent.open()
        ctx = old.create_conversation(brand_id=BRAND, issuer=CLIENT, sub=PA_SUB, now=T0)
        old.bind_account(ctx, ACCOUNT)
        old.claim_message(context_id=ctx, message_id="m1", text="hi", now=T0, lease_seconds=30)
        old.store_reply(
            context_id=ctx,
            message_id="m1",
            reply_message_id="r1",
            reply_text="hello",
            reply=b"stored bytes",
            now=T0,
        )
        old.set_agent_enabled(CLIENT, False)
        old.close()
    assert schema_version(persistent) == 1
    with pytest.raises((sqlite3.OperationalError, psycopg.errors.UndefinedTable)):
        _count(persistent, "pactmw_grants")

    new = persistent.open()
    try:
        conversation = new.get_conversation(ctx)  # PostgreSQL migrates on first use
        assert schema_version(persistent) == len(migrations)
        assert conversation is not None
        assert conversation.account == ACCOUNT
        claim = new.claim_message(
            context_id=ctx, message_id="m1", text="hi", now=T0 + 1, lease_seconds=30
        )
        assert claim.reply == b"stored bytes"
        assert new.agent_enabled(CLIENT) is False
        assert [t.reply_text for t in new.history(ctx)] == ["hello"]
        # The new tables work.
        _device(new)
        assert _approve(new) is not None
        assert _poll(new, T0 + 20).kind == "approved"
        assert new.use_once(namespace="n", value="v", now=T0, expires_at=T0 + 1)
    finally:
        new.close()


# --- concurrency ---------------------------------------------------------------------------------


def test_concurrent_polls_of_an_approved_code_have_one_winner(store: Store) -> None:
    _device(store)
    assert _approve(store) is not None
    polls = all_at_once(16, lambda _: _poll(store, T0 + 20).kind)
    assert sorted(polls) == ["approved"] + ["consumed"] * 15


def test_concurrent_polls_of_a_pending_code_slow_down(store: Store) -> None:
    _device(store)
    polls = all_at_once(16, lambda _: _poll(store, T0 + 20).kind)
    assert sorted(polls) == ["pending"] + ["slow_down"] * 15


def test_concurrent_rotations_of_one_token_have_one_winner(store: Store) -> None:
    grant = _grant(store)
    _issue(store, grant)
    rotations = all_at_once(16, lambda i: _rotate(store, "rt-0", f"rt-new-{i}", now=T0 + 60))
    kinds = sorted(r.kind for r in rotations)
    assert kinds == ["reused"] * 15 + ["rotated"]
    # Every loser counted as reuse, so the grant is gone, the winner's new token with it.
    final = store.get_grant(grant.grant_id)
    assert final is not None
    assert final.revoked_at == T0 + 60
    [winner] = [i for i, r in enumerate(rotations) if r.kind == "rotated"]
    assert _rotate(store, f"rt-new-{winner}", "rt-next", now=T0 + 61).kind == "revoked"


def test_concurrent_upserts_of_one_key_make_one_grant(store: Store) -> None:
    grants = all_at_once(
        16, lambda i: _grant(store, grant_id=f"g{i:02d}", scopes=(f"s{i:02d}",), now=T0 + i)
    )
    assert len({g.grant_id for g in grants}) == 1
    [only] = store.list_grants(include_inactive=True, now=T0 + 100)
    assert only.grant_id == grants[0].grant_id
    assert only.scopes == tuple(f"s{i:02d}" for i in range(16))
    assert only.expires_at == T0 + 15 + GRANT_TTL


def test_concurrent_use_once_has_one_winner(store: Store) -> None:
    results = all_at_once(
        16, lambda _: store.use_once(namespace="assertion", value="jti", now=T0, expires_at=T0 + 60)
    )
    assert sorted(results) == [False] * 15 + [True]


@pytest.mark.parametrize("existing_grant", [True, False])
def test_concurrent_approvals_and_denials_have_one_winner(
    store: Store, existing_grant: bool
) -> None:
    # Several rounds, the approvers' parity alternating (thread start order tends to favour
    # one parity), so that approvals and denials both win; the invariants hold either way.
    for round_ in range(4):
        account = f"acct-{round_}"
        user_code = f"RACE-{round_:04d}"
        _device(store, code_hash=f"h-race-{round_}", user_code=user_code, scopes=("a", "b"))
        if existing_grant:
            _grant(store, grant_id=f"g-live-{round_}", account=account, scopes=("a",), ttl=60)
        before = store.list_grants(account=account, include_inactive=True, now=T0 + 1)

        def decide(
            i: int, account: str = account, user_code: str = user_code, round_: int = round_
        ) -> DeviceAuthorization | Approval | None:
            if (i + round_) % 2:
                return _deny(store, user_code=user_code, account=account, now=T0 + 1)
            return _approve(
                store,
                user_code=user_code,
                account=account,
                scopes=("b",),
                new_grant_id=f"g-{account}-{i:02d}",
                now=T0 + 1,
            )

        results = all_at_once(16, decide)
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, round_
        [winner] = winners
        stored = store.device_authorization_by_user_code(user_code)
        after = store.list_grants(account=account, include_inactive=True, now=T0 + 1)
        if isinstance(winner, Approval):
            assert stored == winner.authorization
            assert stored.status == "approved"
            assert after == [winner.grant]
            assert winner.grant is not None
            assert winner.grant.scopes == (("a", "b") if existing_grant else ("b",))
            if existing_grant:
                assert winner.grant.grant_id == f"g-live-{round_}"
        else:
            # A winning denial: no grant was written, widened or extended by the losers.
            assert stored == winner
            assert winner.status == "denied"
            assert after == before
        assert stored is not None
        assert _poll(store, T0 + 2, code_hash=f"h-race-{round_}").kind == (
            "approved" if stored.status == "approved" else "denied"
        )


def test_concurrent_creators_of_one_user_code_have_one_winner(store: Store) -> None:
    def create(i: int) -> bool:
        try:
            _device(store, code_hash=f"h{i}")
        except UserCodeTaken:
            return False
        return True

    results = all_at_once(16, create)
    assert sorted(results) == [False] * 15 + [True]
    [winner] = [i for i, ok in enumerate(results) if ok]
    stored = store.device_authorization_by_user_code(USER_CODE)
    assert stored is not None
    assert stored.device_code_hash == f"h{winner}"
