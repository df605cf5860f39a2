"""Sessions a verified `session_closed` ended: their tokens are refused from then on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pactmw.core import _fork

if TYPE_CHECKING:
    from pactmw.store.base import Store

#: A session closed by a verified `session_closed` is remembered this long: its tokens are
#: refused even offline (they last 5 minutes; a day is plenty, and bounded).
CLOSED_SESSION_MEMORY = 24 * 3600.0
_CLOSED_NAMESPACE = "parafe.closed_session"


class ClosedSessions:
    """The closed sessions of one agent: in `store` (shared by every worker on it), or in
    this process without one. `clock` is wall-clock epoch seconds. Thread-safe."""

    def __init__(self, store: Store | None, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock
        self._closed: dict[str, float] = {}
        self._lock = threading.Lock()
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    def is_closed(self, session_id: str) -> bool:
        """Whether `session_id` was closed (blocking with a store)."""
        now = self._clock()
        if self._store is not None:
            # An unexpired record is a closed session; asking records nothing.
            return self._store.is_marked(namespace=_CLOSED_NAMESPACE, value=session_id, now=now)
        with self._lock:
            until = self._closed.get(session_id)
            return until is not None and now < until

    def close(self, session_id: str) -> None:
        """Remember `session_id` as closed for `CLOSED_SESSION_MEMORY` seconds."""
        now = self._clock()
        until = now + CLOSED_SESSION_MEMORY
        if self._store is not None:
            self._store.use_once(
                namespace=_CLOSED_NAMESPACE, value=session_id, now=now, expires_at=until
            )
            return
        with self._lock:
            self._closed = {k: v for k, v in self._closed.items() if v > now}
            self._closed[session_id] = until


__all__ = [
    "CLOSED_SESSION_MEMORY",
    "ClosedSessions",
]
