"""When a grant was last used, for the person's connected agents page ("last used").

Not part of `Store` itself: a store without it still serves every request; the page then
shows no "last used" date.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pactmw.store._inputs import has_nul

__all__ = ["GrantUsageStore"]


@runtime_checkable
class GrantUsageStore(Protocol):
    """Records the use of a grant cheaply: at most one write per grant per `every` seconds."""

    def record_grant_use(self, grant_id: str, *, now: float, every: float) -> bool:
        """Set the grant's `last_used_at` to `now` unless it was set less than `every` seconds
        before `now`; True if it was written. An unknown grant id is no change (False)."""
        return not has_nul(grant_id) and self._record_grant_use(grant_id, now, every)

    def _record_grant_use(self, grant_id: str, now: float, every: float) -> bool:
        """What a backend implements: the conditional write, atomically."""
        ...
