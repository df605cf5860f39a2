"""The Poppy Session contract (store/_protocols/sessions.py) on every backend: the real
`MemoryStore`, `SqliteStore`, `PostgresStore` (schema version 6 included) and the Django
store on sqlite and PostgreSQL (its migration 0003)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pactmw.store import MemoryStore, PostgresStore, SqliteStore, Store
from pactmw.store._protocols.sessions import PoppySession, SessionStore
from tests.store.support import (
    ALL_BACKENDS,
    Backend,
    all_at_once,
    backend_module,
    open_backend,
    schema_version,
)

NOW = 1_000_000.0
HOUR = 3600.0


Opener = Callable[[], SessionStore]


@pytest.fixture(params=ALL_BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a store on one backend's data (each call a new handle on the same data)."""
    opened: list[Any] = []
    if request.param.startswith("django-"):
        # The Django store on a database Django's migrations made (0003: the Poppy tables).
        backends = open_backend(request.param, request, tmp_path)
        backend = next(backends)

        def open_django() -> SessionStore:
            store = backend.open()
            opened.append(store)
            return store

        yield open_django
        for store in opened:
            store.close()
        next(backends, None)
        return
    if request.param == "memory":
        shared = MemoryStore()
        opened.append(shared)

        def open_memory() -> SessionStore:
            return shared

        yield open_memory
    elif request.param == "sqlite":

        def open_sqlite() -> SessionStore:
            store = SqliteStore(tmp_path / "sessions.db")
            opened.append(store)
            return store

        yield open_sqlite
    else:
        server = request.getfixturevalue("postgres_server")
        dsn = server.create_database()

        def open_postgres() -> SessionStore:
            store = PostgresStore(dsn)
            opened.append(store)
            return store

        yield open_postgres
    for store in opened:
        store.close()
    if request.param == "postgres":
        server.drop_database(dsn.rsplit("/", 1)[1])


@pytest.fixture
def store(opener: Opener) -> SessionStore:
    return opener()


def new(
    store: SessionStore, session_id: str = "ses_1", token: str = "h1", **changes: Any
) -> PoppySession:
    values: dict[str, Any] = {
        "session_id": session_id,
        "brand_id": "shop",
        "client_id": "https://agent.example/agent.json",
        "user_id": "usr_1",
        "jkt": "jkt-1",
        "token_hash": token,
        "now": NOW,
        "expires_at": NOW + HOUR,
    }
    values.update(changes)
    return store.create_session(**values)


def owner(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "session_id": "ses_1",
        "brand_id": "shop",
        "client_id": "https://agent.example/agent.json",
        "user_id": "usr_1",
    }
    values.update(changes)
    return values


def sign_in(store: SessionStore, token: str, account: str = "alice", **changes: Any) -> Any:
    values: dict[str, Any] = {
        **owner(),
        "account": account,
        "grant_id": f"grant-{account}",
        "scopes": ("orders:read", "orders:write"),
        "jkt": "jkt-2",
        "token_hash": token,
        "now": NOW + 10,
        "expires_at": NOW + 10 + HOUR,
    }
    values.update(changes)
    return store.sign_in_session(**values)


def renew(store: SessionStore, token: str, **changes: Any) -> Any:
    values: dict[str, Any] = {
        **owner(),
        "jkt": "jkt-3",
        "token_hash": token,
        "now": NOW + 20,
        "expires_at": NOW + 20 + HOUR,
    }
    values.update(changes)
    return store.renew_session(**values)


def test_a_new_session_is_signed_out_and_found_by_its_token(store: SessionStore) -> None:
    created = new(store)
    assert not created.signed_in
    assert (created.scopes, created.account, created.ever_account) == ((), None, None)
    assert store.session_for_token(token_hash="h1", now=NOW) == created
    assert store.session_for_token(token_hash="other", now=NOW) is None
    assert store.session_for_token(token_hash="h1", now=NOW + HOUR) is None  # expired


def test_ids_and_token_hashes_are_unique(store: SessionStore) -> None:
    new(store)
    with pytest.raises(ValueError, match="already stored"):
        new(store, token="h2")
    with pytest.raises(ValueError, match="already stored"):
        new(store, session_id="ses_2", token="h1")
    new(store, session_id="ses_2", token="h2")  # lifecycle.parallel-sessions: one user, two


@pytest.mark.parametrize(
    "changes", [{"session_id": "a\x00"}, {"token_hash": ""}, {"user_id": ""}, {"jkt": "x\x00"}]
)
def test_inputs_are_checked(store: SessionStore, changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        new(store, **changes)


def test_renewal_gives_a_new_token_and_ends_the_old(store: SessionStore) -> None:
    new(store)
    change = renew(store, "h2")
    assert change.kind == "changed"
    assert change.session.jkt == "jkt-3"
    assert store.session_for_token(token_hash="h1", now=NOW + 21) is None
    assert store.session_for_token(token_hash="h2", now=NOW + 21) == change.session
    assert change.session.created_at == NOW


@pytest.mark.parametrize(
    "changes",
    [
        {"user_id": "usr_2"},  # lifecycle.renew-for-another-user
        {"client_id": "https://other.example/agent.json"},
        {"brand_id": "other"},
        {"session_id": "ses_unknown"},
        {"session_id": "ses\x00"},
    ],
)
def test_pap_4_8_03_only_its_own_agent_and_user_change_a_session(
    store: SessionStore, changes: dict[str, Any]
) -> None:
    new(store)
    assert renew(store, "h2", **changes).kind == "invalid_session"
    assert sign_in(store, "h3", **changes).kind == "invalid_session"
    assert store.session_for_token(token_hash="h1", now=NOW + 30) is not None  # untouched


def test_sign_in_sets_account_scopes_and_a_new_token(store: SessionStore) -> None:
    new(store)
    change = sign_in(store, "h2")
    assert change.kind == "changed"
    session = change.session
    assert session.signed_in
    assert (session.account, session.grant_id, session.ever_account) == (
        "alice",
        "grant-alice",
        "alice",
    )
    assert session.scopes == ("orders:read", "orders:write")
    assert session.signed_in_at == NOW + 10
    assert store.session_for_token(token_hash="h1", now=NOW + 11) is None
    assert store.session_for_token(token_hash="h2", now=NOW + 11) == session


def test_sign_out_keeps_the_token_and_the_account_it_had(store: SessionStore) -> None:
    new(store)
    sign_in(store, "h2")
    assert store.sign_out_sessions(grant_id="grant-alice", now=NOW + 50) == 1
    found = store.session_for_token(token_hash="h2", now=NOW + 51)
    assert found is not None
    assert not found.signed_in  # PAP-4.9-01: the next request sees it signed out
    assert (found.scopes, found.grant_id, found.ever_account) == ((), None, "alice")
    assert store.sign_out_sessions(grant_id="grant-alice", now=NOW + 52) == 0


def test_pap_4_8_04_never_signs_in_to_another_account(store: SessionStore) -> None:
    new(store)
    sign_in(store, "h2")
    store.sign_out_sessions(grant_id="grant-alice", now=NOW + 50)
    assert sign_in(store, "h3", account="bob").kind == "account_mismatch"
    assert renew(store, "h4").kind == "changed"  # renewal signs out, the account stays bound
    assert sign_in(store, "h5", account="bob").kind == "account_mismatch"
    again = sign_in(store, "h6", account="alice")
    assert again.kind == "changed"
    assert again.session.signed_in


def test_renewing_a_signed_in_session_signs_it_out(store: SessionStore) -> None:
    new(store)
    sign_in(store, "h2")
    change = renew(store, "h3")
    assert not change.session.signed_in
    assert change.session.ever_account == "alice"


def test_sign_out_touches_only_its_grant(store: SessionStore) -> None:
    new(store)
    new(store, session_id="ses_2", token="k1")
    sign_in(store, "h2")
    sign_in(store, "k2", account="alice", session_id="ses_2", grant_id="grant-other")
    assert store.sign_out_sessions(grant_id="grant-alice", now=NOW + 50) == 1
    other = store.session_for_token(token_hash="k2", now=NOW + 51)
    assert other is not None
    assert other.signed_in


def test_two_accounts_racing_to_sign_in_one_session(store: SessionStore) -> None:
    new(store)
    accounts = [f"acct-{i}" for i in range(6)]
    kinds = all_at_once(len(accounts), lambda i: sign_in(store, f"t{i}", account=accounts[i]).kind)
    assert sorted(kinds) == ["account_mismatch"] * 5 + ["changed"]


def test_a_second_handle_sees_the_same_sessions(opener: Opener) -> None:
    one, two = opener(), opener()
    new(one)
    assert sign_in(two, "h2").kind == "changed"
    found = one.session_for_token(token_hash="h2", now=NOW + 11)
    assert found is not None
    assert found.account == "alice"


def test_every_backend_is_a_store_with_sessions(store: SessionStore) -> None:
    assert isinstance(store, Store)


def test_the_sessions_table_is_schema_version_6() -> None:
    from pactmw.store import postgres, sqlite
    from pactmw.store._sql.dialect import POSTGRES_COLUMNS, SQLITE_COLUMNS
    from pactmw.store._sql.sessions import migration

    sqlite_tables, postgres_tables = migration(SQLITE_COLUMNS), migration(POSTGRES_COLUMNS)
    assert sqlite.MIGRATIONS[5][: len(sqlite_tables)] == sqlite_tables
    assert postgres.MIGRATIONS[5][: len(postgres_tables)] == postgres_tables


def test_a_version_5_database_upgrades_to_sessions_in_place(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    # A database of the release before Poppy Sessions: five migrations ran.
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:5])
        old = persistent.open()
        ctx = old.create_conversation(
            brand_id="shop", issuer="https://pa.example", sub="u", now=NOW
        )
        old.close()
    assert schema_version(persistent) == 5

    upgraded = persistent.open()
    try:
        assert upgraded.get_conversation(ctx) is not None  # PostgreSQL migrates on first use
        assert schema_version(persistent) == len(migrations)  # later versions apply too
        created = new(upgraded)
        assert upgraded.session_for_token(token_hash="h1", now=NOW) == created
    finally:
        upgraded.close()


def test_a_session_is_read_by_its_id(store: SessionStore) -> None:
    created = new(store)
    assert store.get_session("ses_1") == created
    assert store.get_session("ses_unknown") is None
    assert store.get_session("ses\x00") is None
    sign_in(store, "h2")
    found = store.get_session("ses_1")
    assert found is not None
    assert found.account == "alice"


def test_cleanup_deletes_sessions_a_day_after_their_token_expired(store: SessionStore) -> None:
    assert isinstance(store, Store)
    new(store)
    new(store, session_id="ses_2", token="k1", expires_at=NOW + 3 * HOUR)
    day = 86_400.0
    kept = store.cleanup(now=NOW + HOUR + day - 1, conversations_idle_before=None)
    assert kept.poppy_sessions == 0
    assert store.get_session("ses_1") is not None  # still renewable the day after expiry
    done = store.cleanup(now=NOW + HOUR + day, conversations_idle_before=None)
    assert done.poppy_sessions == 1
    assert store.get_session("ses_1") is None
    assert store.get_session("ses_2") is not None
    assert store.session_for_token(token_hash="k1", now=NOW) is not None


def test_session_clients_are_the_agents_with_live_sessions_at_each_brand(
    store: SessionStore,
) -> None:
    """What `agents list` shows of Poppy agents that never signed in: each agent and Brand
    with a live Session, signed in or out, once."""
    assert store.session_clients(now=NOW) == ()
    atlas, plain = "https://agent.example/agent.json", "https://plain.example/agent.json"
    new(store)  # atlas at shop, signed out
    new(store, session_id="ses_2", token="k1", user_id="usr_2")  # the same agent and Brand
    new(store, session_id="ses_3", token="m1", brand_id="other")  # atlas at another Brand
    new(store, session_id="ses_4", token="p1", client_id=plain, expires_at=NOW + 2 * HOUR)
    sign_in(store, "h2")  # signed in: still atlas at shop, once
    assert store.session_clients(now=NOW + 20) == (
        ("other", atlas),
        ("shop", atlas),
        ("shop", plain),
    )
    # A Session whose token expired is no longer live (as `session_for_token` has it),
    # though cleanup keeps it a day for a renewal.
    assert store.session_clients(now=NOW + HOUR) == (("shop", atlas), ("shop", plain))
    assert store.session_clients(now=NOW + 10 + HOUR) == (("shop", plain),)
    assert store.session_clients(now=NOW + 2 * HOUR) == ()


def test_session_clients_count_a_renewed_session_by_its_new_token(store: SessionStore) -> None:
    new(store)
    renew(store, "h2", expires_at=NOW + 3 * HOUR)  # a renewal signs out, the agent stays
    assert store.session_clients(now=NOW + 2 * HOUR) == (
        ("shop", "https://agent.example/agent.json"),
    )
