"""The rate-limit counters (`RateLimitStore.count_request`), the same on every backend."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.store import Cleanup, RateLimitStore, Store
from tests.store.support import (
    PERSISTENT,
    Backend,
    all_at_once,
    backend_module,
    process_url,
    processes_at_once,
    racer_script,
    schema_version,
)

T0 = 1_800_000_000.0  # a window start (a multiple of 60)
W = 60.0


def counters(store: Store) -> RateLimitStore:
    assert isinstance(store, RateLimitStore)
    return store


def count(store: Store, *pairs: tuple[str, int], start: float = T0) -> bool:
    return counters(store).count_request(
        counters=list(pairs), window_start=start, window_end=start + W
    )


def test_a_window_admits_exactly_the_limit_and_refusals_count_nowhere(store: Store) -> None:
    assert [count(store, ("k", 3)) for _ in range(5)] == [True, True, True, False, False]
    assert count(store, ("other", 1))  # keys are counted apart
    # The next window starts afresh: the two refusals above used nothing up.
    assert [count(store, ("k", 3), start=T0 + W) for _ in range(4)] == [True] * 3 + [False]


def test_a_lagging_window_counts_into_the_current_one(store: Store) -> None:
    assert count(store, ("k", 2), start=T0 + W)
    # Another process whose clock lags still names the previous window: it must not reset
    # the count (that would admit more than the limit), it counts into the current one.
    assert count(store, ("k", 2), start=T0)
    assert not count(store, ("k", 2), start=T0)
    assert not count(store, ("k", 2), start=T0 + W)


def test_every_counter_or_none(store: Store) -> None:
    assert count(store, ("agent", 5), ("user", 1))
    # The user's counter is full: the agent's is not raised either.
    assert not count(store, ("agent", 5), ("user", 1))
    assert [count(store, ("agent", 5)) for _ in range(5)] == [True] * 4 + [False]


def test_limits_may_change_between_calls(store: Store) -> None:
    assert count(store, ("k", 2))
    assert count(store, ("k", 2))
    assert not count(store, ("k", 2))
    assert count(store, ("k", 3))  # a raised limit admits what it allows
    assert not count(store, ("k", 1))


@pytest.mark.parametrize(
    ("pairs", "start", "end", "error"),
    [
        ([("k\x00", 1)], T0, T0 + W, ValueError),
        ([("k", 0)], T0, T0 + W, ValueError),
        ([("k", True)], T0, T0 + W, ValueError),
        ([("k", 1), ("k", 2)], T0, T0 + W, ValueError),
        ([("k", 1)], T0, T0, ValueError),
        ([(b"k", 1)], T0, T0 + W, TypeError),
    ],
)
def test_bad_arguments_are_refused(
    store: Store, pairs: list[tuple[str, int]], start: float, end: float, error: type[Exception]
) -> None:
    with pytest.raises(error):
        counters(store).count_request(counters=pairs, window_start=start, window_end=end)
    assert count(store, ("k", 1))  # nothing was counted


def test_cleanup_drops_ended_windows_only(store: Store) -> None:
    assert count(store, ("old", 1))
    assert count(store, ("current", 1), start=T0 + W)
    done = store.cleanup(now=T0 + W, conversations_idle_before=None)
    assert done == Cleanup(rate_counters=1)
    assert count(store, ("old", 1))  # gone, so counted afresh (in its old window)
    assert not count(store, ("current", 1), start=T0 + W)  # kept: still full
    assert store.cleanup(now=T0 + W, conversations_idle_before=None) == Cleanup(rate_counters=1)


def test_concurrent_requests_never_exceed_the_limit(backend: Backend) -> None:
    # Several store objects (separate connections) where the backend has them, as separate
    # workers would: 40 requests race for 10 places, in one window, for two counters.
    stores = [backend.open() for _ in range(1 if backend.name == "memory" else 4)]
    try:
        admitted = all_at_once(
            40,
            lambda i: count(stores[i % len(stores)], ("agent", 10), ("user", 25)),
        )
    finally:
        for s in stores:
            s.close()
    assert admitted.count(True) == 10
    assert admitted.count(False) == 30


def test_sharing_by_default_is_the_backends_to_say(backend: Backend) -> None:
    store = backend.open()
    try:
        # PostgreSQL (its own store or a Django site's) is shared by many processes.
        shared = backend.name in ("postgres", "django-postgres")
        assert counters(store).shares_rate_limits is shared
    finally:
        store.close()


def test_a_version_4_database_upgrades_in_place(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    assert len(migrations) >= 5
    # A database of the release before shared rate limits: four migrations ran.
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:4])
        old = persistent.open()
        ctx = old.create_conversation(brand_id="acme", issuer="https://pa.example", sub="u", now=T0)
        old.close()
    assert schema_version(persistent) == 4
    new = persistent.open()
    try:
        assert new.get_conversation(ctx) is not None  # kept (PostgreSQL migrates on first use)
        assert schema_version(persistent) == len(migrations)
        assert count(new, ("k", 1))
        assert not count(new, ("k", 1))
    finally:
        new.close()


# argv: url, work dir, worker index. Each process counts 5 requests; prints how many it got in.
RACER = racer_script(
    "url, work, index",
    """admitted = sum(
    store.count_request(
        counters=[("agent", 7), ("user", 100)], window_start=1_800_000_000.0,
        window_end=1_800_000_060.0,
    )
    for _ in range(5)
)
print(admitted, flush=True)
store.close()
""",
)


@pytest.fixture(params=PERSISTENT)
def process_store_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A store URL the racing processes can open (Django's: with test settings)."""
    yield from process_url(request.param, request, tmp_path, monkeypatch)


def test_processes_racing_on_one_store_never_exceed_the_limit(
    process_store_url: str, tmp_path: Path
) -> None:
    work = tmp_path / "race"
    work.mkdir()
    url = process_store_url
    argvs = [[sys.executable, "-c", RACER, url, str(work), str(i)] for i in range(4)]
    outputs = processes_at_once(argvs, work)
    assert sum(int(out) for out in outputs) == 7  # 20 requests, 7 places, 4 processes
