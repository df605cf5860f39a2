"""`last_used_at` of grants (the connected agents page's "last used"), on every backend:
written at most once per interval, read back with the grant, and added in place to a
database made before it (schema version 7)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from pactmw.store import GrantUsageStore, Store
from pactmw.store.base import Grant
from tests.store.support import Backend, backend_module, schema_version

T0 = 1_700_000_000.0


def grant(store: Store, grant_id: str = "g-1") -> Grant:
    return store.upsert_grant(
        grant_id=grant_id,
        brand_id="acme",
        account="acct-1",
        client_id="https://pa.example",
        pa_sub="u1",
        scopes=("orders:read",),
        now=T0,
        expires_at=T0 + 3600,
    )


def execute(backend: Backend, statement: str) -> None:
    """Run one statement on a persistent backend's database directly."""
    if backend.name == "sqlite":
        with sqlite3.connect(backend.url.removeprefix("sqlite:///")) as conn:
            conn.execute(statement)
        return
    with psycopg.connect(backend.url) as pconn:
        pconn.execute(statement)


def test_use_is_recorded_at_most_once_per_interval(store: Store) -> None:
    assert isinstance(store, GrantUsageStore)
    made = grant(store)
    assert made.last_used_at is None
    assert store.record_grant_use("g-1", now=T0 + 1, every=60) is True
    assert store.record_grant_use("g-1", now=T0 + 30, every=60) is False  # within the minute
    got = store.get_grant("g-1")
    assert got is not None
    assert got.last_used_at == T0 + 1
    assert store.record_grant_use("g-1", now=T0 + 61, every=60) is True
    listed = store.list_grants(account="acct-1", now=T0 + 62)
    assert [g.last_used_at for g in listed] == [T0 + 61]
    # Widening a grant keeps when it was last used; an unknown id changes nothing.
    widened = store.upsert_grant(
        grant_id="g-other",
        brand_id="acme",
        account="acct-1",
        client_id="https://pa.example",
        pa_sub="u1",
        scopes=("orders:cancel",),
        now=T0 + 70,
        expires_at=T0 + 3600,
    )
    assert widened.grant_id == "g-1"
    again = store.get_grant("g-1")
    assert again is not None
    assert again.last_used_at == T0 + 61
    assert store.record_grant_use("nope", now=T0 + 200, every=60) is False
    assert store.record_grant_use("bad\x00id", now=T0 + 200, every=60) is False


def test_a_version_6_database_gains_the_column_in_place(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    assert len(migrations) >= 7
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:6])
        old = persistent.open()
        old.create_conversation(brand_id="acme", issuer="https://pa.example", sub="u1", now=T0)
        old.close()
    assert schema_version(persistent) == 6
    # A grant row as version 6 wrote it (today's code reads the new column, so SQL it is).
    scopes = "'[\"orders:read\"]'" if persistent.name == "sqlite" else "'{orders:read}'"
    execute(
        persistent,
        "INSERT INTO pactmw_grants (grant_id, brand_id, account, client_id, pa_sub, scopes,"
        " created_at, updated_at, expires_at) VALUES ('g-1', 'acme', 'acct-1',"
        f" 'https://pa.example', 'u1', {scopes}, {T0}, {T0}, {T0 + 3600})",
    )
    new = persistent.open()
    try:
        kept = new.get_grant("g-1")
        assert kept is not None
        assert kept.last_used_at is None
        assert schema_version(persistent) == len(migrations)
        assert isinstance(new, GrantUsageStore)
        assert new.record_grant_use("g-1", now=T0 + 5, every=60) is True
        used = new.get_grant("g-1")
        assert used is not None
        assert used.last_used_at == T0 + 5
    finally:
        new.close()
