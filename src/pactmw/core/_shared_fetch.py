"""A bounded cache whose concurrent misses for one key share one fetch.

`JwksCache` (key sets by URI), `DiscoveryCache` (issuers) and `ClientMetadataCache`
(documents by `client_id`) all keep their answers this way; only what they fetch, when an
answer is stale and what a crashed, slow or refused fetch means differ, and those are the
callbacks a `SharedFetches` is built with.

No lock is held while fetching: the first caller to miss leads the fetch (in its own thread
when blocking, in a worker thread under asyncio), the others wait on its future, which is
always completed, even when the fetch raises something unexpected.

Keys often come from requests (an open-mode token's issuer, the `jwks_uri` its discovery
document names, a Poppy `client_id`), so anyone can make up new ones. Two rules keep a stream
of made-up keys from costing the keys in real use:

- **Eviction is a segmented LRU** (as Caffeine's, W-TinyLFU's main region): a new entry
  starts in *probation*; the owner `promote`s it once it served a successful verification,
  into the *protected* segment (at most `PROTECTED_SHARE` of the entries). Past
  `max_entries`, the least recently used entry of probation goes first, so entries that never
  verified anything can push out only each other. Past its share, protected demotes its least
  recently used entry to probation, where it gets a last chance.
- **Fetches of new keys are limited**: a key that is neither protected nor vouched for by
  the caller (`vetted`: it comes from configuration) may be fetched only while fewer than
  `max_new_fetches` such fetches run; the excess is refused at once with `rules.refused(key)`
  and logged once per burst. Protected keys and vetted ones are never refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

from attrs import frozen

from pactmw.core import _fork
from pactmw.core.encoding import loggable

_Value = TypeVar("_Value")

#: The share of a cache's entries kept for keys that served a successful verification:
#: Caffeine's split (80 % protected, 20 % probation). A cache full of agents in use still
#: leaves a fifth of its room to newcomers, and a flood of newcomers can use only that fifth.
PROTECTED_SHARE = 0.8

#: How many fetches of new keys (not protected, not vetted) may run at once per cache. A real
#: new agent's first fetch takes one slot for a few hundred milliseconds, so sixteen is far
#: above the rate at which agents a server never saw show up (a cold start of a busy server
#: fetches its agents sixteen at a time), while a flood of made-up keys holds at most sixteen
#: sockets and threads per cache, and cannot fill an async server's default executor (32
#: threads at most) with one cache.
MAX_NEW_FETCHES = 16

#: Refusals less than this many seconds apart belong to one burst, logged once: a flood keeps
#: the slots full for as long as it lasts, and one line says so.
BURST_GAP = 60.0


@frozen
class FetchRules(Generic[_Value]):
    """What a `SharedFetches` does on a miss, given the key and the value cached before (None
    when there is none).

    `fetch` blocks and should never raise: a failure is a value too (kept keys, an error to
    repeat). `crashed` is the value to publish when `fetch` raised anyway (given what it
    raised), so that waiters are not left hanging. A waiter gives up after `timeout` seconds
    with `timed_out(key)`; a fetch of a new key past the limit raises `refused(key)`, and the
    first one of a burst is logged on `logger`, naming what is fetched (`what`).
    """

    fetch: Callable[[str, _Value | None], _Value]
    crashed: Callable[[str, _Value | None, BaseException], _Value]
    timeout: float
    timed_out: Callable[[str], Exception]
    refused: Callable[[str], Exception]
    what: str
    logger: logging.Logger


class SharedFetches(Generic[_Value]):
    """Values by key, at most `max_entries` of them in two segments (see the module
    docstring); thread-safe. `clock` (monotonic seconds) only tells bursts of refusals
    apart."""

    def __init__(
        self,
        rules: FetchRules[_Value],
        max_entries: int,
        *,
        max_new_fetches: int = MAX_NEW_FETCHES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rules = rules
        self.max_entries = max_entries
        self.max_protected = int(max_entries * PROTECTED_SHARE)
        self.max_new_fetches = max_new_fetches
        self._clock = clock
        self._lock = threading.Lock()
        self._probation: OrderedDict[str, _Value] = OrderedDict()
        self._protected: OrderedDict[str, _Value] = OrderedDict()
        self._inflight: dict[str, Future[_Value]] = {}
        self._new_inflight: set[str] = set()
        self._last_refusal: float | None = None
        _fork.reset_in_child(self)

    def _reset_in_child(self) -> None:
        """In a forked child: a lock no thread of the child holds, and no fetch under way
        (the parent's complete their futures in the parent only: a child waiting on one
        would time out, and the key would stay "being fetched" there for ever)."""
        self._lock = threading.Lock()
        self._inflight = {}
        self._new_inflight = set()

    def peek(self, key: str) -> _Value | None:
        """The value held for `key`, however old, or None; never fetches."""
        with self._lock:
            value = self._protected.get(key)
            return self._probation.get(key) if value is None else value

    def held(self, key: str, stale: Callable[[_Value | None], bool]) -> _Value | None:
        """The value held for `key` when `stale` says it will do (what `get` would answer
        without fetching or waiting), else None; never fetches."""
        with self._lock:
            value = self._touch(key)
            if value is None or stale(value):
                return None
            return value

    def promote(self, key: str) -> None:
        """Mark `key`'s value as having served a successful verification: it moves to the
        protected segment, where made-up keys cannot push it out. No-op when not held."""
        with self._lock:
            value = self._probation.pop(key, None)
            if value is None:
                if key in self._protected:
                    self._protected.move_to_end(key)
                return
            self._protected[key] = value
            while len(self._protected) > self.max_protected:
                # The total is unchanged: the demoted entry gets probation's most recent place.
                demoted, demoted_value = self._protected.popitem(last=False)
                self._probation[demoted] = demoted_value

    def get(
        self, key: str, stale: Callable[[_Value | None], bool], *, vetted: bool = False
    ) -> _Value | None:
        """The value for `key`, fetched first (blocking) when `stale` says the held one (or
        None) will not do. None only when nothing is held and `stale(None)` is false.
        `vetted`: the key comes from configuration, not from a request (never refused)."""
        value, future, leader = self._begin(key, stale, vetted)
        if future is None:
            return value
        if leader:
            self._lead(key, future, value)
        try:
            return future.result(timeout=self.rules.timeout)
        except concurrent.futures.TimeoutError as exc:  # not builtin on Python 3.10
            raise self.rules.timed_out(key) from exc

    async def aget(
        self, key: str, stale: Callable[[_Value | None], bool], *, vetted: bool = False
    ) -> _Value | None:
        """Async `get`: a fresh value never leaves the event loop; a fetch runs in a thread.

        The fetch completes the shared future from its thread, so a cancelled caller cannot
        leave other waiters hanging.
        """
        value, future, leader = self._begin(key, stale, vetted)
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

    def _touch(self, key: str) -> _Value | None:
        """The value held for `key`, now the most recent of its segment (under the lock)."""
        for segment in (self._protected, self._probation):
            value = segment.get(key)
            if value is not None:
                segment.move_to_end(key)
                return value
        return None

    def _begin(
        self, key: str, stale: Callable[[_Value | None], bool], vetted: bool
    ) -> tuple[_Value | None, Future[_Value] | None, bool]:
        """(the held value, the future to wait on or to complete, whether this caller leads
        the fetch); bookkeeping under the lock, no I/O. Raises `rules.refused` past the
        limit of new fetches."""
        with self._lock:
            value = self._touch(key)
            if not stale(value):
                return value, None, False
            future = self._inflight.get(key)
            if future is not None:
                return value, future, False
            new = not vetted and key not in self._protected
            if not new or len(self._new_inflight) < self.max_new_fetches:
                future = Future()
                self._inflight[key] = future
                if new:
                    self._new_inflight.add(key)
                return value, future, True
            now = self._clock()
            first = self._last_refusal is None or now - self._last_refusal > BURST_GAP
            self._last_refusal = now
        if first:
            self.rules.logger.warning(
                "%s fetch refused: reason=fetch_limit limit=%d url=%s state=refusing new "
                "URLs (that never verified anything) until fewer than %d are being fetched; "
                "agents verified before are served as usual",
                self.rules.what,
                self.max_new_fetches,
                loggable(key),  # made up by whoever sent the request
                self.max_new_fetches,
            )
        raise self.rules.refused(key)

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
            del self._inflight[key]
            self._new_inflight.discard(key)
            if key in self._protected:  # a refetch keeps its place
                self._protected[key] = value
                self._protected.move_to_end(key)
            else:
                self._probation[key] = value
                self._probation.move_to_end(key)
                while self._probation and (
                    len(self._probation) + len(self._protected) > self.max_entries
                ):
                    self._probation.popitem(last=False)
        if not future.done():
            future.set_result(value)


__all__ = ["BURST_GAP", "MAX_NEW_FETCHES", "PROTECTED_SHARE", "FetchRules", "SharedFetches"]
