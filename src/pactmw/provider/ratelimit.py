"""Fixed-window rate limits per personal agent and per (personal agent, sub).

A `RateLimiter` counts in this process (each process counts its own), or in the store when
given one (`RateLimitStore`): then every process on that store shares one count, so N
workers allow a limit once rather than N times. Which of the two a Provider uses is
`shared_rate_limits` (by default: the store's `shares_rate_limits`, true for PostgreSQL).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading

from attrs import frozen

from pactmw.core import _fork
from pactmw.core.encoding import loggable
from pactmw.provider._log_throttle import ThrottledLog
from pactmw.provider.flow import SubFlow, store
from pactmw.store import RateLimitStore

logger = logging.getLogger("pactmw.provider")


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
    """Counts requests in fixed windows: in this process, or in `store` when one is given.

    `namespace` keeps the counters of different limiters apart in a shared store (the A2A
    operations, the consent pages and the token endpoint may all count the same agent), and
    names the limit in the log line of a refusal (`admit`). That line names the key counted
    as `key_name` (`issuer`, a Poppy `client_id`), or not at all when None (a client
    address: the consent pages').
    """

    def __init__(
        self,
        limit: RateLimit,
        *,
        store: RateLimitStore | None = None,
        namespace: str = "a2a",
        max_keys: int = 100_000,
        key_name: str | None = "issuer",
    ) -> None:
        self.limit = limit
        self.store = store
        self.namespace = namespace
        self.key_name = key_name
        # Its own runs, timed by the `now` each request is counted at (the Provider's clock).
        self._refusals = ThrottledLog()
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[float, int]] = {}
        self._max_keys = max_keys
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    @property
    def shared(self) -> bool:
        """Whether the counts live in the store (shared by every process on it)."""
        return self.store is not None

    def _limits(self, issuer: str, sub: str) -> list[tuple[str, int]]:
        return [
            (key, allowed)
            for key, allowed in (
                ("a\n" + issuer, self.limit.per_agent),
                (f"u\n{issuer}\n{sub}", self.limit.per_user),
            )
            if allowed is not None
        ]

    def _window(self, key: str, now: float) -> tuple[float, int]:
        window_start = now - now % self.limit.window
        start, count = self._counts.get(key, (window_start, 0))
        return (window_start, 0) if start != window_start else (start, count)

    def check(self, issuer: str, sub: str, now: float) -> int | None:
        """Count one request in this process; return seconds to wait (for `Retry-After`) when
        over a limit.

        A refused request is not counted, so waiting `Retry-After` is always enough. Counts
        in this process even when the limiter has a store: `admit` is what uses the store.
        """
        if not self.limit.enabled:
            return None
        limits = self._limits(issuer, sub)
        with self._lock:
            if len(self._counts) > self._max_keys:
                self._counts.clear()  # a crude bound: counts restart rather than grow forever
            windows = [(key, allowed, *self._window(key, now)) for key, allowed in limits]
            for _, allowed, start, count in windows:
                if count >= allowed:
                    return _wait(start + self.limit.window, now)
            for key, _, start, count in windows:
                self._counts[key] = (start, count + 1)
        return None

    def admit(self, issuer: str, sub: str, now: float) -> SubFlow:
        """Count one request where this limiter counts; the value is the seconds to wait (for
        `Retry-After`) when over a limit, else None. One store operation when shared.

        A refusal is logged at INFO (`rate limit refused: ...`), once and then at most once a
        minute for one `issuer` while it goes on: an agent that retries at once would
        otherwise flood the log. Never the `sub` (a claim) nor a token."""
        if not self.limit.enabled:
            return None
        wait = yield from self._admit(issuer, sub, now)
        if wait is not None:
            self._log_refusal(issuer, wait, now)
        return wait

    def _admit(self, issuer: str, sub: str, now: float) -> SubFlow:
        if self.store is None:
            return self.check(issuer, sub, now)
        start = now - now % self.limit.window
        end = start + self.limit.window
        # Hashed keys: the store holds no client address, issuer or user id in clear, and
        # every key has one length whatever a client sent.
        counters = [(self._stored_key(key), allowed) for key, allowed in self._limits(issuer, sub)]
        admitted: bool = yield store(
            self.store.count_request, counters=counters, window_start=start, window_end=end
        )
        return None if admitted else _wait(end, now)

    def _log_refusal(self, issuer: str, wait: int, now: float) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        said = self._refusals.event(issuer, now)
        if said is None:
            return
        who = f" {self.key_name}={loggable(issuer)}" if self.key_name else ""
        if said.more:
            logger.info(
                "rate limit refused: limit=%s%s: %d more requests refused in the %.0f s "
                "since the last line",
                self.namespace,
                who,
                said.more,
                said.seconds,
            )
        if said.first:
            logger.info("rate limit refused: limit=%s%s retry_after=%d", self.namespace, who, wait)

    def _stored_key(self, key: str) -> str:
        return hashlib.sha256(f"{self.namespace}\n{key}".encode()).hexdigest()


def _wait(window_end: float, now: float) -> int:
    return max(1, math.ceil(window_end - now))


def counting_store(store: object, shared: bool | None, setting: str) -> RateLimitStore | None:
    """The store rate limits are counted in, or None to count in each process.

    `shared` None follows the store (`RateLimitStore.shares_rate_limits`); True needs a
    store that keeps counters (else ValueError naming `setting`); False counts per process.
    """
    if shared is False:
        return None
    if not isinstance(store, RateLimitStore):
        if shared:
            raise ValueError(
                f"{setting} needs a store that keeps rate-limit counters; "
                f"{type(store).__name__} does not"
            )
        return None
    return store if shared or store.shares_rate_limits else None


__all__ = [
    "RateLimit",
    "RateLimiter",
    "counting_store",
]
