"""A bounded cache whose concurrent misses for one key share one fetch.

`JwksCache` (key sets by URI) and `ClientMetadataCache` (documents by `client_id`) both keep
their answers this way; only what they fetch, when an answer is stale and what a crashed or
slow fetch means differ, and those are the callbacks a `SharedFetches` is built with.

No lock is held while fetching: the first caller to miss leads the fetch (in its own thread
when blocking, in a worker thread under asyncio), the others wait on its future, which is
always completed, even when the fetch raises something unexpected.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

from attrs import frozen

_Value = TypeVar("_Value")


@frozen
class FetchRules(Generic[_Value]):
    """What a `SharedFetches` does on a miss, given the key and the value cached before (None
    when there is none).

    `fetch` blocks and should never raise: a failure is a value too (kept keys, an error to
    repeat). `crashed` is the value to publish when `fetch` raised anyway (given what it
    raised), so that waiters are not left hanging. A waiter gives up after `timeout` seconds
    with `timed_out(key)`.
    """

    fetch: Callable[[str, _Value | None], _Value]
    crashed: Callable[[str, _Value | None, BaseException], _Value]
    timeout: float
    timed_out: Callable[[str], Exception]


class SharedFetches(Generic[_Value]):
    """Values by key, the least recently used dropped past `max_entries`; thread-safe."""

    def __init__(self, rules: FetchRules[_Value], max_entries: int) -> None:
        self.rules = rules
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._values: OrderedDict[str, _Value] = OrderedDict()
        self._inflight: dict[str, Future[_Value]] = {}

    def peek(self, key: str) -> _Value | None:
        """The value held for `key`, however old, or None; never fetches."""
        with self._lock:
            return self._values.get(key)

    def held(self, key: str, stale: Callable[[_Value | None], bool]) -> _Value | None:
        """The value held for `key` when `stale` says it will do (what `get` would answer
        without fetching or waiting), else None; never fetches."""
        with self._lock:
            value = self._values.get(key)
            if value is None or stale(value):
                return None
            self._values.move_to_end(key)  # a use, as in `get`
            return value

    def get(self, key: str, stale: Callable[[_Value | None], bool]) -> _Value | None:
        """The value for `key`, fetched first (blocking) when `stale` says the held one (or
        None) will not do. None only when nothing is held and `stale(None)` is false."""
        value, future, leader = self._begin(key, stale)
        if future is None:
            return value
        if leader:
            self._lead(key, future, value)
        try:
            return future.result(timeout=self.rules.timeout)
        except concurrent.futures.TimeoutError as exc:  # not builtin on Python 3.10
            raise self.rules.timed_out(key) from exc

    async def aget(self, key: str, stale: Callable[[_Value | None], bool]) -> _Value | None:
        """Async `get`: a fresh value never leaves the event loop; a fetch runs in a thread.

        The fetch completes the shared future from its thread, so a cancelled caller cannot
        leave other waiters hanging.
        """
        value, future, leader = self._begin(key, stale)
        if future is None:
            return value
        if leader:
            asyncio.get_running_loop().run_in_executor(None, self._lead, key, future, value)
        try:
            return await asyncio.wait_for(
                # shield: a caller's timeout or cancellation must not cancel the shared fetch.
                asyncio.shield(asyncio.wrap_future(future)),
                timeout=self.rules.timeout,
            )
        except asyncio.TimeoutError as exc:
            raise self.rules.timed_out(key) from exc

    def _begin(
        self, key: str, stale: Callable[[_Value | None], bool]
    ) -> tuple[_Value | None, Future[_Value] | None, bool]:
        """(the held value, the future to wait on or to complete, whether this caller leads
        the fetch); bookkeeping under the lock, no I/O."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            if not stale(value):
                return value, None, False
            future = self._inflight.get(key)
            if future is not None:
                return value, future, False
            future = Future()
            self._inflight[key] = future
            return value, future, True

    def _lead(self, key: str, future: Future[_Value], previous: _Value | None) -> None:
        """Fetch for every waiter and publish the value, whatever happens."""
        try:
            value = self.rules.fetch(key, previous)
        except BaseException as exc:  # pragma: no cover - every fetch catches what it expects
            # Whatever happened (KeyboardInterrupt, a bug), the fetch must finish: waiters
            # must not wait on a future nobody will complete.
            self._publish(key, future, self.rules.crashed(key, previous, exc))
            raise
        self._publish(key, future, value)

    def _publish(self, key: str, future: Future[_Value], value: _Value) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.max_entries:
                self._values.popitem(last=False)
            del self._inflight[key]
        if not future.done():
            future.set_result(value)


__all__ = ["FetchRules", "SharedFetches"]
