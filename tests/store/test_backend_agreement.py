"""Corners where the backends once disagreed and now share one behaviour.

Written when the sqlite and PostgreSQL stores came to share one SQL implementation: each
test runs on memory, sqlite and PostgreSQL.
"""

from __future__ import annotations

import pytest

from pactmw.store import Store

T0 = 1_700_000_000.0
TTL = 600.0


def _create(store: Store, *, code_hash: str, now: float) -> None:
    store.create_device_authorization(
        device_code_hash=code_hash,
        user_code="WDJB-MJHT",
        brand_id="skyline",
        client_id="https://pa.example",
        pa_sub="pa-user-1",
        scopes=("flights:upcoming:read",),
        now=now,
        expires_at=now + TTL,
        interval=5.0,
    )


def test_an_expired_authorization_hash_is_not_reused_for_its_own_user_code(store: Store) -> None:
    # The user code is free again once its holder expired, but the device code hash is
    # still stored (PostgreSQL used to replace the row here; memory and sqlite refused).
    _create(store, code_hash="sha256-device-1", now=T0)
    with pytest.raises(ValueError, match="already stored"):
        _create(store, code_hash="sha256-device-1", now=T0 + TTL)
    kept = store.device_authorization_by_user_code("WDJB-MJHT")
    assert kept is not None
    assert kept.created_at == T0
