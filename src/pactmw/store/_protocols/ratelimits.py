"""Rate-limit counters kept in the store, so every process of a deployment shares them.

Not part of `Store` itself: a Provider counts in the store only where the store is shared
between processes (PostgreSQL, the Django ORM store); a store without these operations
keeps per-process counting, and one asked to share them is refused at startup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pactmw.store.base import check_counters

__all__ = ["RateLimitStore"]


@runtime_checkable
class RateLimitStore(Protocol):
    """Fixed-window request counters, one per key, counted atomically."""

    @property
    def shares_rate_limits(self) -> bool:
        """Whether a Provider counts its rate limits here unless told otherwise.

        True where several processes (or machines) usually share the store, so that counting
        in it is what makes N workers allow the limit once rather than N times; False for an
        embedded store, where a per-process count is as good and costs no write per request.
        """
        ...

    def count_request(
        self, *, counters: Sequence[tuple[str, int]], window_start: float, window_end: float
    ) -> bool:
        """Count one request against every `(key, limit)` in the fixed window that starts at
        `window_start`; all or nothing.

        Returns True when every key held fewer than its `limit` requests in this window (each
        is now one higher), False when one already held `limit` (then nothing is counted: a
        refused request uses up nothing, so waiting for the window's end is always enough).
        A key's count restarts when a later window starts; a call for a window older than
        the key's current one counts into the current one (process clocks differ slightly).
        Concurrent calls never admit more than `limit` per key and window, in any number of
        processes sharing the store. `window_end` (after `window_start`) is when the counter
        may be deleted (`Store.cleanup`). Keys holding NUL are refused (ValueError); limits
        must be positive (ValueError).
        """
        checked = check_counters(counters, window_start, window_end)
        return self._count_request(checked, window_start, window_end)

    def _count_request(
        self, counters: tuple[tuple[str, int], ...], window_start: float, window_end: float
    ) -> bool:
        """What a backend implements: count into every counter or none, atomically."""
        ...
