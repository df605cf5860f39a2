"""Authorization details of the memory store (see store/_protocols/details.py)."""

from __future__ import annotations

from collections.abc import Sequence

from pactmw.store._memory.core import MemoryCore
from pactmw.store.base import has_nul, reject_nul

__all__ = ["DetailsMixin"]


class DetailsMixin(MemoryCore):
    """`AuthorizationDetailsStore` on the in-memory state."""

    def __init__(self) -> None:
        super().__init__()
        # owner -> {entry text: expires_at}, in insertion order.
        self._details: dict[str, dict[str, float | None]] = {}

    def add_authorization_details(
        self, *, owner: str, entries: Sequence[str], now: float, expires_at: float | None
    ) -> None:
        """Add the entries `owner` does not hold yet; see `AuthorizationDetailsStore`."""
        reject_nul(owner=owner, **{f"entries[{i}]": e for i, e in enumerate(entries)})
        with self._lock:
            self._check_open()
            self._drop_expired_details(now)
            held = self._details.setdefault(owner, {})
            for text in entries:
                held.setdefault(text, expires_at)

    def _drop_expired_details(self, now: float) -> int:
        # Called with the lock held (by adds and by the cleanup); returns how many went.
        dropped = 0
        for name in list(self._details):
            held = self._details[name]
            for text in [t for t, end in held.items() if end is not None and end <= now]:
                del held[text]
                dropped += 1
            if not held:
                del self._details[name]
        return dropped

    def authorization_details(self, *, owner: str) -> tuple[str, ...]:
        """The entries `owner` holds, oldest first; see `AuthorizationDetailsStore`."""
        if has_nul(owner):
            return ()
        with self._lock:
            self._check_open()
            return tuple(self._details.get(owner, {}))
