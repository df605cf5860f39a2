"""Fixed-window rate limits per personal agent and per (personal agent, sub)."""

from __future__ import annotations

import math
import threading

from attrs import frozen


@frozen
class RateLimit:
    """Requests allowed per `window` seconds; None disables a limit (the default)."""

    per_agent: int | None = None
    per_user: int | None = None
    window: float = 60.0

    @property
    def enabled(self) -> bool:
        return self.per_agent is not None or self.per_user is not None


class RateLimiter:
    """Counts requests in fixed windows, in this process (each process counts its own)."""

    def __init__(self, limit: RateLimit, *, max_keys: int = 100_000) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[float, int]] = {}
        self._max_keys = max_keys

    def _window(self, key: str, now: float) -> tuple[float, int]:
        window_start = now - now % self.limit.window
        start, count = self._counts.get(key, (window_start, 0))
        return (window_start, 0) if start != window_start else (start, count)

    def check(self, issuer: str, sub: str, now: float) -> int | None:
        """Count one request; return seconds to wait (for `Retry-After`) when over a limit.

        A refused request is not counted, so waiting `Retry-After` is always enough.
        """
        if not self.limit.enabled:
            return None
        limits = [
            (key, allowed)
            for key, allowed in (
                ("a\n" + issuer, self.limit.per_agent),
                (f"u\n{issuer}\n{sub}", self.limit.per_user),
            )
            if allowed is not None
        ]
        with self._lock:
            if len(self._counts) > self._max_keys:
                self._counts.clear()  # a crude bound: counts restart rather than grow forever
            windows = [(key, allowed, *self._window(key, now)) for key, allowed in limits]
            for _, allowed, start, count in windows:
                if count >= allowed:
                    return max(1, math.ceil(start + self.limit.window - now))
            for key, _, start, count in windows:
                self._counts[key] = (start, count + 1)
        return None


__all__ = [
    "RateLimit",
    "RateLimiter",
]
