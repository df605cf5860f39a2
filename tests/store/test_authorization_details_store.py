"""The authorization-details operations, the same on every backend, and their migration."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from pactmw.store import AuthorizationDetailsStore, Store
from pactmw.store import postgres as pg_backend
from pactmw.store import sqlite as sqlite_backend
from tests.store.support import Backend, all_at_once

T0 = 1_800_000_000.0
REBOOK = '{"type":"rebook","identifier":"K7PQ2M","target_flight":"SK 318"}'
OTHER = '{"type":"rebook","identifier":"Q2M7PK","target_flight":"SK 100"}'


def details(store: Store) -> AuthorizationDetailsStore:
    assert isinstance(store, AuthorizationDetailsStore)
    return store


def test_entries_are_kept_per_owner_once_each_in_order(store: Store) -> None:
    held = details(store)
    assert held.authorization_details(owner="grant:g1") == ()
    held.add_authorization_details(owner="grant:g1", entries=[REBOOK], now=T0, expires_at=None)
    held.add_authorization_details(
        owner="grant:g1", entries=[OTHER, REBOOK, OTHER], now=T0, expires_at=None
    )
    held.add_authorization_details(owner="grant:g2", entries=[OTHER], now=T0, expires_at=None)
    assert held.authorization_details(owner="grant:g1") == (REBOOK, OTHER)
    assert held.authorization_details(owner="grant:g2") == (OTHER,)
    assert held.authorization_details(owner="grant:g1\x00") == ()
    with pytest.raises(ValueError, match="NUL"):
        held.add_authorization_details(owner="g", entries=["a\x00"], now=T0, expires_at=None)


def test_long_entries_and_expiry(store: Store) -> None:
    held = details(store)
    long_entry = '{"type":"t","note":"' + "x" * 20_000 + '"}'
    held.add_authorization_details(
        owner="device:h1", entries=[long_entry], now=T0, expires_at=T0 + 600
    )
    held.add_authorization_details(owner="grant:g", entries=[REBOOK], now=T0, expires_at=None)
    assert held.authorization_details(owner="device:h1") == (long_entry,)
    # A later add drops what expired before it; entries without an expiry stay.
    held.add_authorization_details(
        owner="device:h2", entries=[OTHER], now=T0 + 601, expires_at=T0 + 1200
    )
    assert held.authorization_details(owner="device:h1") == ()
    assert held.authorization_details(owner="grant:g") == (REBOOK,)
    assert held.authorization_details(owner="device:h2") == (OTHER,)


def test_concurrent_adds_to_one_owner_keep_every_entry(backend: Backend) -> None:
    stores = [backend.open() for _ in range(1 if backend.name == "memory" else 4)]
    try:
        entries = [f'{{"type":"t","n":{i}}}' for i in range(8)]

        def add(i: int) -> None:
            target = details(stores[i % len(stores)])
            target.add_authorization_details(
                owner="grant:g", entries=[entries[i], entries[(i + 1) % 8]], now=T0, expires_at=None
            )

        all_at_once(8, add)
        held = details(stores[0]).authorization_details(owner="grant:g")
        assert sorted(held) == sorted(entries)
    finally:
        for opened in stores:
            opened.close()


def test_a_version_2_database_gains_the_table_and_keeps_its_grants(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = sqlite_backend if persistent.name == "sqlite" else pg_backend
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:2])
        old = persistent.open()
        old.set_agent_enabled("https://pa.example", False)
        old.close()
    query = "SELECT version FROM pactmw_schema"
    if persistent.name == "sqlite":
        with sqlite3.connect(persistent.url.removeprefix("sqlite:///")) as conn:
            assert conn.execute(query).fetchone()[0] == 2
    new = persistent.open()
    try:
        assert new.agent_enabled("https://pa.example") is False
        details(new).add_authorization_details(
            owner="grant:g", entries=[REBOOK], now=T0, expires_at=None
        )
        assert details(new).authorization_details(owner="grant:g") == (REBOOK,)
    finally:
        new.close()
    if persistent.name == "sqlite":
        with sqlite3.connect(persistent.url.removeprefix("sqlite:///")) as conn:
            assert conn.execute(query).fetchone()[0] == len(module.MIGRATIONS)
    else:
        with psycopg.connect(persistent.url) as pconn:
            row = pconn.execute(query).fetchone()
            assert row is not None
            assert row[0] == len(module.MIGRATIONS)
