"""A bounded cache of verified tokens, so a token presented again skips its signature check.

A personal agent reuses its JWT for up to two minutes, and a delegation token for up to an
hour; verifying the same signature again is the only avoidable cost on the hot path. Keys are
a 16-byte BLAKE2b digest of the whole token (the token itself is never kept), entries live at
most until the token's expiry and `max_age`, and the number of entries is bounded. Callers
still run every check that can change after verification (agent enabled, grant live, time).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Generic, TypeVar

V = TypeVar("V")


def token_key(token: str) -> bytes:
    """The cache key of a token: BLAKE2b-128 of its bytes."""
    return hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class VerifiedTokenCache(Generic[V]):
    """Thread-safe; reads take no lock (a dict read is atomic), writes do.

    When full, the oldest entries go first (insertion order), which is also roughly the order
    in which tokens expire.
    """

    def __init__(self, *, max_entries: int = 100_000, max_age: float = 300.0) -> None:
        if max_entries < 0 or max_age < 0:
            raise ValueError("max_entries and max_age must not be negative")
        self.max_entries = max_entries
        self.max_age = max_age
        self._entries: dict[bytes, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: bytes, now: float) -> V | None:
        """The value cached for `key`, unless it has expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= now:
            self._entries.pop(key, None)
            return None
        return entry[1]

    def put(self, key: bytes, value: V, *, expires_at: float, now: float) -> None:
        """Remember `value` until `expires_at` (bounded by `max_age` from now)."""
        if self.max_entries == 0:
            return
        until = min(expires_at, now + self.max_age)
        if until <= now:
            return
        with self._lock:
            entries = self._entries
            # Oldest first: drop what has expired (entries are inserted in roughly the order
            # they expire, so this keeps memory flat when agents mint a token per request),
            # then whatever the bound requires.
            while entries:
                oldest = next(iter(entries))
                if entries[oldest][0] > now and len(entries) < self.max_entries:
                    break
                del entries[oldest]
            entries[key] = (until, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


__all__ = [
    "VerifiedTokenCache",
    "token_key",
]
