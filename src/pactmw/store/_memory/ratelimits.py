"""Rate-limit counters of the memory store (see `RateLimitStore`)."""

from __future__ import annotations

from pactmw.store._memory.core import MemoryCore

__all__ = ["RateLimitsMixin"]


class RateLimitsMixin(MemoryCore):
    """`RateLimitStore` on the in-memory state: one process, so no sharing by default."""

    # A memory store lives in one process: counting here is what the per-process counter
    # already does, with a lock round more.
    shares_rate_limits = False

    def _count_request(
        self, counters: tuple[tuple[str, int], ...], window_start: float, window_end: float
    ) -> bool:
        with self._open:
            updated: list[tuple[str, tuple[float, float, int]]] = []
            for key, limit in counters:
                start, end, count = self._rate_counts.get(key, (window_start, window_end, 0))
                if start < window_start:  # a later window: the count restarts
                    start, end, count = window_start, window_end, 0
                if count >= limit:
                    return False  # nothing written yet: a refused request counts nowhere
                updated.append((key, (start, end, count + 1)))
            self._rate_counts.update(updated)
            return True
