"""One log line per interval for an event that repeats under traffic.

A store outage fails every request, and an agent past its rate limit is refused as often as
it retries: one line per event floods the log exactly when an operator reads it. A
`ThrottledLog` says the first event of a run in full, then at most one summary per
`interval` (how many more, in how many seconds) while the run lasts; a run ends after an
`interval` without its event, and the next event says itself in full again.

`end` ends every run at once, for an outage that is known to be over: a store outage ends
with one line when the store works again (`log_store_recovery`), how long it lasted and how
many requests it refused, so that the log says when it ended, not only when it began.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from attrs import frozen

from pactmw.core import _fork
from pactmw.store.base import StoreUnavailable

__all__ = [
    "INTERVAL",
    "MAX_KEYS",
    "STORE_OUTAGES",
    "Ended",
    "Said",
    "ThrottledLog",
    "log_store_outage",
    "log_store_recovery",
]

logger = logging.getLogger("pactmw.provider")

#: At most one line per this many seconds for one kind of event: a minute of an outage is one
#: line, and the next says whether it goes on.
INTERVAL = 60.0

#: How many kinds of event (keys) are followed at once. Past it the least recently seen is
#: forgotten, so its next event is said in full: a bound on memory, and still on the lines
#: (only keys that keep changing are said more than once an interval).
MAX_KEYS = 256


@frozen
class Said:
    """What to log for one event: its own line (`first`: a run begins), and before it a
    summary when `more` events went unsaid in the `seconds` since the last line."""

    first: bool
    more: int
    seconds: float


@frozen
class Ended:
    """What the runs `ThrottledLog.end` ended add up to: `events` in all, the first of them
    `seconds` before the end."""

    events: int
    seconds: float


class _Run:
    __slots__ = ("began_at", "last_at", "more", "said_at", "total")

    def __init__(self, now: float, began_at: float | None = None, total: int = 0) -> None:
        self.said_at = now
        self.last_at = now
        self.more = 0
        # Since the first event of this key that no `end` ended: a run that ends by a quiet
        # interval is not over for `end` (traffic stopped, the store may still be down).
        self.began_at = now if began_at is None else began_at
        self.total = total + 1


class ThrottledLog:
    """Runs of events by key; thread-safe. `clock` is monotonic seconds."""

    def __init__(
        self,
        interval: float = INTERVAL,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_KEYS,
    ) -> None:
        self.interval = interval
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._ended_at: float | None = None  # when `end` last ended runs
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    def event(self, key: str, now: float | None = None) -> Said | None:
        """One more event of `key` (at `now`, default the `clock`'s): what to say about it, or
        None (counted for the summary)."""
        with self._lock:
            now = self._clock() if now is None else now
            run = self._runs.get(key)
            # Quiet for a whole interval, the run ended: what it left unsaid goes first. So
            # does a clock set back (a wall clock's `now`), rather than silence until it
            # catches up.
            if run is None or not 0 <= now - run.last_at <= self.interval:
                ended = (0, 0.0) if run is None else (run.more, run.last_at - run.said_at)
                self._runs[key] = _Run(now) if run is None else _Run(now, run.began_at, run.total)
                self._runs.move_to_end(key)
                while len(self._runs) > self.max_keys:
                    self._runs.popitem(last=False)
                return Said(first=True, more=ended[0], seconds=ended[1])
            self._runs.move_to_end(key)
            run.last_at = now
            run.more += 1
            run.total += 1
            if 0 <= now - run.said_at < self.interval:
                return None
            said = Said(first=False, more=run.more, seconds=now - run.said_at)
            run.said_at, run.more = now, 0
            return said

    def end(self, now: float | None = None) -> Ended | None:
        """End every run (at `now`, default the `clock`'s): how many events they counted since
        the first of them, or None when none was running, or when `end` last ended runs less
        than an `interval` ago: then they go on. The next event of any key after an end is
        said in full again.

        At most one end an interval, as at most one summary: a store that fails one call in
        two (a table missing, a lock held elsewhere now and then) would otherwise begin and
        end an outage at every request, two lines a request."""
        if not self._runs:  # the hot path (a store call that worked): no lock taken
            return None
        with self._lock:
            if not self._runs:  # another thread ended them meanwhile
                return None
            now = self._clock() if now is None else now
            if self._ended_at is not None and 0 <= now - self._ended_at < self.interval:
                return None
            began = min(run.began_at for run in self._runs.values())
            events = sum(run.total for run in self._runs.values())
            self._runs.clear()
            self._ended_at = now
        return Ended(events=events, seconds=max(0.0, now - began))

    def forget(self) -> None:
        """Forget every run and the last end, saying nothing, as a new process begins: for
        tests, which share one process and its `STORE_OUTAGES`."""
        with self._lock:
            self._runs.clear()
            self._ended_at = None


#: The store outages of this process, by what they say (a store's message names the store, so
#: two stores down are two runs; a new kind of failure is said in full). A store call that
#: works ends them all (`log_store_recovery`): the process cannot tell which run was whose.
STORE_OUTAGES = ThrottledLog()


def log_store_outage(
    logger: logging.Logger,
    exc: StoreUnavailable,
    where: str = "",
    outages: ThrottledLog = STORE_OUTAGES,
) -> None:
    """Log at ERROR that a request met a store that cannot be used (`where`: " on a consent
    page", or ""): the first of a run as `store unavailable: <message>`, then at most one
    summary line per interval while it lasts."""
    message = str(exc)  # a store's message never contains a password
    said = outages.event(f"{where}\0{message}")
    if said is None:
        return
    if said.more:
        logger.error(
            "store still unavailable%s: %d more requests answered 503 in the %.0f s since "
            "the last line: %s",
            where,
            said.more,
            said.seconds,
            message,
        )
    if said.first:
        logger.error("store unavailable%s: %s", where, message)


def log_store_recovery(log: logging.Logger = logger, outages: ThrottledLog = STORE_OUTAGES) -> None:
    """Log at WARNING, once, that the store works again after an outage `log_store_outage`
    logged: how long since its first 503, and how many requests were answered 503. Called
    where a store call has just worked (the drivers' store calls, a caller the guard verified
    against the store); costs a dict's truth test when no outage was logged.

    WARNING, not INFO: it closes what was logged at ERROR, and a Django or gunicorn app that
    configures no logging for pactmw shows WARNING and up only (Python's last-resort handler),
    where INFO would show the outage begin and never end."""
    ended = outages.end()
    if ended is None:
        return
    log.warning(
        "store available again after %.0f s: %d requests answered 503 since it failed",
        ended.seconds,
        ended.events,
    )
