"""Authorization details of the memory store (the contract, with its input checks:
store/_protocols/details.py)."""

from __future__ import annotations

from pactmw.store._memory.core import MemoryCore

__all__ = ["DetailsMixin"]


class DetailsMixin(MemoryCore):
    """The primitives of `AuthorizationDetailsStore`, on the in-memory state."""

    def __init__(self) -> None:
        super().__init__()
        # owner -> {entry text: expires_at}, in insertion order.
        self._details: dict[str, dict[str, float | None]] = {}

    def _add_authorization_details(
        self, owner: str, entries: tuple[str, ...], now: float, expires_at: float | None
    ) -> None:
        with self._open:
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

    def _authorization_details(self, owner: str) -> tuple[str, ...]:
        with self._open:
            return tuple(self._details.get(owner, {}))
