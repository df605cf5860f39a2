"""Device authorizations bound to their user at the poll (Poppy device sign-in, §4.6): one
behaviour on every backend (memory, sqlite, PostgreSQL, the Django store on both).

A Poppy agent asks for a device code with its client assertion only, so the authorization
names no user (`pa_sub` None); the person approves it on the consent page (no grant yet);
the poll that collects it names the polling Session's User ID, which binds it and writes
the grant in the same transaction. PACT's authorizations (a user from the start) keep
their behaviour (tests/store/test_delegation_contract.py).
"""

from __future__ import annotations

import pytest

from pactmw.store import Approval, Poll, Store, UserCodeTaken
from tests.store.support import Backend, all_at_once, backend_module, schema_version

T0 = 1_700_000_000.0
BRAND = "shop"
CLIENT = "https://atlas.example/agent.json"
USER = "usr_1"
OTHER_USER = "usr_2"
CODE_HASH = "sha256-device-poppy"
USER_CODE = "BCDF-GHJK"
GRANT_TTL = 30 * 86_400.0


def _unbound(store: Store, *, code_hash: str = CODE_HASH, user_code: str = USER_CODE) -> None:
    store.create_device_authorization(
        device_code_hash=code_hash,
        user_code=user_code,
        brand_id=BRAND,
        client_id=CLIENT,
        pa_sub=None,
        scopes=("orders:read", "orders:write"),
        now=T0,
        expires_at=T0 + 600,
        interval=5.0,
    )


def _approve(
    store: Store, *, account: str = "alice", scopes: tuple[str, ...] = ("orders:read",)
) -> Approval | None:
    return store.approve_device_authorization(
        user_code=USER_CODE,
        brand_id=BRAND,
        account=account,
        granted_scopes=scopes,
        new_grant_id="unused_grant_id",
        now=T0 + 10,
        grant_expires_at=T0 + 10 + GRANT_TTL,
    )


def _poll(
    store: Store,
    *,
    user: str = USER,
    now: float = T0 + 20,
    client_id: str = CLIENT,
    brand_id: str = BRAND,
    new_grant_id: str | None = "poppygrant_1",
    session_account: str | None = None,
) -> Poll:
    return store.poll_device_code(
        device_code_hash=CODE_HASH,
        client_id=client_id,
        brand_id=brand_id,
        pa_sub=user,
        now=now,
        new_grant_id=new_grant_id,
        grant_expires_at=now + GRANT_TTL,
        session_account=session_account,
    )


def test_an_authorization_without_a_user_is_stored_unbound(store: Store) -> None:
    _unbound(store)
    found = store.device_authorization_by_user_code(USER_CODE)
    assert found is not None
    assert (found.pa_sub, found.status, found.client_id) == (None, "pending", CLIENT)


def test_approving_it_writes_no_grant_until_a_poll_binds_a_user(store: Store) -> None:
    _unbound(store)
    approval = _approve(store)
    assert approval is not None
    assert approval.grant is None
    assert approval.authorization.status == "approved"
    assert approval.authorization.account == "alice"
    assert approval.authorization.granted_scopes == ("orders:read",)
    assert approval.authorization.grant_id is None
    assert store.list_grants(now=T0 + 10) == []
    # Decided: a second approval or a denial changes nothing.
    assert _approve(store, account="bob") is None


def test_any_user_of_the_client_polls_it_pending_but_no_other_client_or_brand(
    store: Store,
) -> None:
    _unbound(store)
    assert _poll(store, user=USER, now=T0 + 10).kind == "pending"
    assert _poll(store, user=OTHER_USER, now=T0 + 20).kind == "pending"
    assert _poll(store, client_id="https://plain.example/agent.json").kind == "unknown"
    assert _poll(store, brand_id="other").kind == "unknown"


def test_the_poll_that_collects_it_binds_its_user_and_writes_the_grant(store: Store) -> None:
    _unbound(store)
    assert _approve(store, scopes=("orders:write", "orders:read")) is not None
    poll = _poll(store, user=USER)
    assert poll.kind == "approved"
    bound = poll.authorization
    assert bound is not None
    assert (bound.status, bound.pa_sub, bound.grant_id) == ("consumed", USER, "poppygrant_1")
    grant = store.get_grant("poppygrant_1")
    assert grant is not None
    assert (grant.brand_id, grant.account, grant.client_id, grant.pa_sub) == (
        BRAND,
        "alice",
        CLIENT,
        USER,
    )
    assert grant.scopes == ("orders:read", "orders:write")
    assert grant.expires_at == T0 + 20 + GRANT_TTL
    stored = store.device_authorization_by_user_code(USER_CODE)
    assert stored == bound
    # Collected once: the same user reads `consumed`; another user no longer matches it.
    assert _poll(store, user=USER, now=T0 + 30).kind == "consumed"
    assert _poll(store, user=OTHER_USER, now=T0 + 30).kind == "unknown"


def test_binding_widens_the_users_live_grant(store: Store) -> None:
    existing = store.upsert_grant(
        grant_id="poppygrant_0",
        brand_id=BRAND,
        account="alice",
        client_id=CLIENT,
        pa_sub=USER,
        scopes=("orders:write",),
        now=T0,
        expires_at=T0 + GRANT_TTL,
    )
    _unbound(store)
    assert _approve(store) is not None
    poll = _poll(store)
    assert poll.kind == "approved"
    assert poll.authorization is not None
    assert poll.authorization.grant_id == existing.grant_id
    widened = store.get_grant(existing.grant_id)
    assert widened is not None
    assert widened.scopes == ("orders:read", "orders:write")
    assert store.get_grant("poppygrant_1") is None


def test_pap_4_8_04_a_session_of_another_account_reads_account_mismatch(
    store: Store,
) -> None:
    # PAP-4.8-04: a Session ever signed in to bob is never signed in to alice.
    _unbound(store)
    assert _approve(store, account="alice") is not None
    assert _poll(store, session_account="bob").kind == "account_mismatch"
    still = store.device_authorization_by_user_code(USER_CODE)
    assert still is not None
    assert (still.status, still.pa_sub, still.grant_id) == ("approved", None, None)
    assert store.list_grants(now=T0 + 20) == []
    # A Session that fits (never signed in, or signed in to alice) collects it.
    assert _poll(store, session_account="alice", now=T0 + 30).kind == "approved"


def test_a_poll_that_cannot_bind_a_user_finds_nothing(store: Store) -> None:
    # PACT's token endpoint polls without a grant id: a Poppy code is not its to collect.
    _unbound(store)
    assert _approve(store) is not None
    assert _poll(store, new_grant_id=None).kind == "unknown"
    still = store.device_authorization_by_user_code(USER_CODE)
    assert still is not None
    assert still.status == "approved"
    assert _poll(store).kind == "approved"


def test_binding_without_a_grant_expiry_is_refused_and_changes_nothing(store: Store) -> None:
    _unbound(store)
    assert _approve(store) is not None
    with pytest.raises(ValueError, match="grant_expires_at"):
        store.poll_device_code(
            device_code_hash=CODE_HASH,
            client_id=CLIENT,
            brand_id=BRAND,
            pa_sub=USER,
            now=T0 + 20,
            new_grant_id="poppygrant_1",
        )
    still = store.device_authorization_by_user_code(USER_CODE)
    assert still is not None
    assert (still.status, still.pa_sub) == ("approved", None)
    assert store.get_grant("poppygrant_1") is None
    assert _poll(store).kind == "approved"


def test_expired_and_denied_unbound_authorizations(store: Store) -> None:
    _unbound(store)
    assert _poll(store, now=T0 + 600).kind == "expired"
    _unbound(store, code_hash="sha256-2", user_code="CDFG-HJKL")
    assert (
        store.decide_device_authorization(
            user_code="CDFG-HJKL",
            approved=False,
            account="alice",
            granted_scopes=(),
            grant_id=None,
            now=T0 + 10,
        )
        is not None
    )
    denied = store.poll_device_code(
        device_code_hash="sha256-2",
        client_id=CLIENT,
        brand_id=BRAND,
        pa_sub=USER,
        now=T0 + 20,
        new_grant_id="poppygrant_2",
        grant_expires_at=T0 + GRANT_TTL,
    )
    assert denied.kind == "denied"


def test_concurrent_polls_of_an_approved_unbound_code_have_one_winner(store: Store) -> None:
    _unbound(store)
    assert _approve(store) is not None
    users = [f"usr_{i}" for i in range(8)]
    kinds = all_at_once(
        8, lambda i: _poll(store, user=users[i], new_grant_id=f"poppygrant_{i}").kind
    )
    assert sorted(kinds).count("approved") == 1
    assert all(kind in ("approved", "consumed", "unknown") for kind in kinds)
    grants = store.list_grants(now=T0 + 30)
    assert len(grants) == 1
    stored = store.device_authorization_by_user_code(USER_CODE)
    assert stored is not None
    assert (stored.pa_sub, stored.grant_id) == (grants[0].pa_sub, grants[0].grant_id)


def test_a_version_9_database_keeps_its_device_authorizations_and_binds_at_the_poll(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:9])
        old = persistent.open()
        old.create_device_authorization(
            device_code_hash="sha256-pact",
            user_code="DFGH-JKLM",
            brand_id=BRAND,
            client_id="https://pa.example",
            pa_sub="pa-user",
            scopes=("orders:read",),
            now=T0,
            expires_at=T0 + 600,
            interval=5.0,
        )
        old.close()
    assert schema_version(persistent) == 9

    upgraded = persistent.open()
    try:
        kept = upgraded.device_authorization_by_user_code("DFGH-JKLM")
        assert kept is not None
        assert (kept.pa_sub, kept.scopes, kept.status) == ("pa-user", ("orders:read",), "pending")
        assert schema_version(persistent) == len(migrations)
        _unbound(upgraded)
        assert _approve(upgraded) is not None
        assert _poll(upgraded).kind == "approved"
        # The user code stays unique after the rebuild.
        with pytest.raises(UserCodeTaken):
            _unbound(upgraded, code_hash="sha256-3")
    finally:
        upgraded.close()
