"""The memory store's one rule for every operation: it runs holding the store's lock, and a
closed store refuses it with `StoreUnavailable`; the lock is released either way, so neither
a refusal nor an operation that raises leaves the store stuck for the next caller."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pactmw.store import MemoryStore, StoreUnavailable

T0 = 1_700_000_000.0


def _upsert(store: MemoryStore, grant_id: str, account: str) -> None:
    store.upsert_grant(
        grant_id=grant_id,
        brand_id="acme",
        account=account,
        client_id="client",
        pa_sub="pa-sub",
        scopes=("a",),
        now=T0,
        expires_at=T0 + 3600,
    )


def _in_another_thread(call: Callable[[], object]) -> BaseException | None:
    # A lock left held would make `call` wait for ever: give it a deadline instead.
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed back to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=5)
    assert not thread.is_alive(), "the store's lock was left held"
    return raised[0] if raised else None


def test_a_closed_memory_store_refuses_calls_and_keeps_its_lock_free() -> None:
    store = MemoryStore()
    store.add_agent(issuer="https://pa.example", name="", jwks_uri="https://pa.example/j", now=T0)
    store.close()
    with pytest.raises(StoreUnavailable, match=r"^the memory store is closed$"):
        store.get_agent("https://pa.example")
    # The refusal released the lock: another thread is refused too (not blocked), and
    # closing again still works.
    refused = _in_another_thread(store.list_agents)
    assert isinstance(refused, StoreUnavailable)
    assert str(refused) == "the memory store is closed"
    assert _in_another_thread(store.close) is None


def test_an_operation_that_raises_releases_the_lock() -> None:
    store = MemoryStore()
    _upsert(store, "g-1", "acct-1")
    # Raised under the lock: the grant id is taken by another key's grant.
    with pytest.raises(ValueError, match="already used"):
        _upsert(store, "g-1", "acct-2")
    assert _in_another_thread(lambda: _upsert(store, "g-2", "acct-2")) is None
    assert [g.grant_id for g in store.list_grants(include_inactive=True, now=T0)] == [
        "g-2",
        "g-1",
    ]
    store.close()
    with pytest.raises(StoreUnavailable):
        store.get_grant("g-1")
