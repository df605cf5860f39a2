"""RFC 9396 authorization details kept with a device authorization or a grant.

Not part of `Store` itself: a Provider needs these operations only for a Brand that accepts
authorization details, and refuses such a Brand at startup on a store without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pactmw.store._inputs import has_nul, reject_nul

__all__ = ["AuthorizationDetailsStore"]


@runtime_checkable
class AuthorizationDetailsStore(Protocol):
    """Entries (JSON texts) held per owner (`device:<code hash>`, `grant:<grant id>`)."""

    def add_authorization_details(
        self, *, owner: str, entries: Sequence[str], now: float, expires_at: float | None
    ) -> None:
        """Add the entries `owner` does not hold yet (the same text is held once), after the
        ones it holds, in one atomic step: concurrent adds to one owner keep every entry.

        `expires_at` (None: never) lets the store delete them once expired; every call also
        drops entries that expired before `now`. Refuses NUL in any string (ValueError).
        """
        reject_nul(owner=owner, **{f"entries[{i}]": e for i, e in enumerate(entries)})
        self._add_authorization_details(owner, tuple(entries), now, expires_at)

    def authorization_details(self, *, owner: str) -> tuple[str, ...]:
        """The entries `owner` holds, oldest first (expired ones may still be listed until
        a later add drops them: callers hold their owners' own expiry)."""
        return () if has_nul(owner) else self._authorization_details(owner)

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _add_authorization_details(
        self, owner: str, entries: tuple[str, ...], now: float, expires_at: float | None
    ) -> None:
        """Drop expired entries, then add the new ones after the held ones, atomically."""
        ...

    def _authorization_details(self, owner: str) -> tuple[str, ...]: ...
