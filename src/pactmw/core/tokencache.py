"""A bounded cache of verified tokens, so a token presented again skips its signature check.

A personal agent reuses its JWT for up to two minutes, and a delegation token for up to an
hour; verifying the same signature again is the only avoidable cost on the hot path. Keys are
the SHA-256 digest of the whole token (the token itself is never kept), entries live at most
until the token's expiry and `max_age`, and the number of entries is bounded. Callers still
run every check that can change after verification (agent enabled, grant live, time).

An entry is one flat tuple, `(until, *value)`: with 100,000 tokens cached every object per
entry counts (a separate `(until, value)` pair would cost 56 B more per token), so a caller
stores the few fields a cache hit needs, not an object holding them.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVarTuple, Unpack

from pactmw.core import _fork
from pactmw.core.encoding import sha256

_Ts = TypeVarTuple("_Ts")


def token_key(token: str) -> bytes:
    """The cache key of a token: SHA-256 of its bytes.

    The full 256 bits, because a cache hit trusts the presented token to be the verified one
    (the identity verifier reads a hit's claims from it): finding two tokens with one key must
    stay out of reach (2^128 work, where a 128-bit digest would give 2^64). SHA-256 is also the
    fastest of hashlib's digests here: 0.77 µs a token against BLAKE2b-128's 1.08.
    """
    return sha256(token.encode("utf-8", "surrogatepass"))


class VerifiedTokenCache(Generic[Unpack[_Ts]]):
    """Thread-safe; reads take no lock (a dict read is atomic), writes do.

    `put(key, value)` stores the tuple `value`; `get` returns `(until, *value)`. When full,
    the oldest entries go first (insertion order), which is also roughly the order in which
    tokens expire: eviction needs no per-entry bookkeeping (an LRU would move an entry on every
    hit, and a token is worth keeping until it expires, however recently it was used).
    """

    def __init__(self, *, max_entries: int = 100_000, max_age: float = 300.0) -> None:
        if max_entries < 0 or max_age < 0:
            raise ValueError("max_entries and max_age must not be negative")
        self.max_entries = max_entries
        self.max_age = max_age
        self._entries: dict[bytes, tuple[float, Unpack[_Ts]]] = {}
        self._lock = threading.Lock()
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    def get(self, key: bytes, now: float) -> tuple[float, Unpack[_Ts]] | None:
        """`(until, *value)` cached for `key`, unless it has expired (`until <= now`)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= now:
            self._entries.pop(key, None)
            return None
        return entry

    def put(self, key: bytes, value: tuple[Unpack[_Ts]], *, expires_at: float, now: float) -> None:
        """Remember `value` until `expires_at` (bounded by `max_age` from now).

        `get` never returns an entry at or after `expires_at`.
        """
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
            entries[key] = (until, *value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


__all__ = [
    "VerifiedTokenCache",
    "token_key",
]
