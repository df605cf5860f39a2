"""Use-once memories: "this `jti` was seen before" for proofs and assertions. Pure interfaces.

Every single-use token pactmw verifies (Parafé presentation proofs, RFC 9449 DPoP proofs,
Poppy client and Session assertions) is checked against a `ReplayMemory`. The verifiers take
one as an argument and never know where it keeps its records: `MemoryReplayMemory` for one
process, `StoreReplayMemory` over a pactmw Store's `use_once` when several processes (or
servers) must agree that a token is used once.
"""

from __future__ import annotations

import threading
from typing import Protocol

from pactmw.core import _fork


class ReplayMemory(Protocol):
    """Remembers keys so that what they name is accepted once.

    `first_use` is True only the first time `key` is seen while its record is unexpired. Of
    concurrent callers exactly one gets True. `may_block` tells async drivers to call it in a
    worker thread.
    """

    may_block: bool

    def first_use(self, key: str, *, now: float, expires_at: float) -> bool: ...


def remember_until(last_accepted: float) -> float:
    """The `expires_at` to record for a token that is accepted until `last_accepted`, that
    instant included.

    A memory forgets a record once `expires_at <= now` (every `ReplayMemory` and the stores'
    `use_once`), so a record kept only until `last_accepted` would let the token be used
    again at that very instant. One second more covers it, whatever the clock's resolution.
    """
    return last_accepted + 1


class MemoryReplayMemory:
    """Per-process replay memory (tests, a single worker). Expired entries are purged once
    the memory holds more than `max_entries` (the Parafé reference's rule)."""

    may_block = False

    def __init__(self, max_entries: int = 10_000) -> None:
        self._max = max_entries
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    def first_use(self, key: str, *, now: float, expires_at: float) -> bool:
        with self._lock:
            if len(self._seen) > self._max:
                self._seen = {k: t for k, t in self._seen.items() if t > now}
            seen = self._seen.get(key)
            if seen is not None and now < seen:
                return False
            self._seen[key] = expires_at
            return True


class UseOnce(Protocol):
    """The one Store method a `StoreReplayMemory` needs (core never imports the store)."""

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool: ...


class StoreReplayMemory:
    """Replay memory in a pactmw Store (`use_once`), shared by every process on that store:
    what multi-worker deployments need for "a token is single-use" to hold.

    `namespace` keeps one kind of token apart from another (a DPoP `jti` never collides
    with an assertion's).
    """

    may_block = True

    def __init__(self, store: UseOnce, namespace: str = "parafe.proof") -> None:
        self._store = store
        self.namespace = namespace

    def first_use(self, key: str, *, now: float, expires_at: float) -> bool:
        return self._store.use_once(
            namespace=self.namespace, value=key, now=now, expires_at=expires_at
        )


__all__ = [
    "MemoryReplayMemory",
    "ReplayMemory",
    "StoreReplayMemory",
    "UseOnce",
    "remember_until",
]
