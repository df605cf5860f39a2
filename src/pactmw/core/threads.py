"""A pool of worker threads for the blocking calls of async drivers, with a cheap hand-off.

`asyncio.to_thread` goes through `loop.run_in_executor`: a `functools.partial`, a
`concurrent.futures.Future` with its own condition variable, `ThreadPoolExecutor.submit`
(a lock and a thread-count check per call), and a chained asyncio future. Under load that
machinery, not the work handed off, was the largest cost of a `message:send` on sqlite
(docs/performance.md). Here a hand-off is one put on a C `SimpleQueue` and, back, an append
to the loop's inbox: only the first result since the loop last emptied it wakes the loop
(`call_soon_threadsafe`, whose self-pipe write releases the GIL), and the loop completes
the awaiting asyncio futures of all the results waiting there at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from pactmw.core import _fork

T = TypeVar("T")

__all__ = ["WorkerThreads"]

# What a worker takes from the queue: the loop, its inbox and the future to answer, and the
# call to make (in a copy of the caller's context, as asyncio.to_thread does); None stops one
# worker.
_Job = tuple[
    asyncio.AbstractEventLoop,
    "_Inbox",
    "asyncio.Future[Any]",
    contextvars.Context,
    Callable[..., Any],
    tuple[Any, ...],
]


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.cancelled():  # the awaiting task was cancelled (a client went away)
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(error)


class _Inbox:
    """The results waiting for one event loop, and whether a drain is already on its way.

    Why no result is ever stranded (a worker appends and sees a drain pending just as the
    drain finds the deque empty): a worker appends first and reads `scheduled` after; the
    drain clears `scheduled` first and pops after, until the deque is empty. Each of these
    steps is atomic and they happen in one order (the GIL runs one bytecode at a time; the
    deque's append and popleft are atomic). A worker that reads True leaves its result to a
    drain that has been or is about to be scheduled (whoever set True schedules one right
    after) and has not cleared the flag yet, since clearing it is a drain's first step: that
    drain pops only after clearing, so after this append, and it pops until the deque is
    empty, so it delivers this result. A worker that reads False schedules a drain itself.
    At worst two drains run where one would do, the second finding nothing.
    (The argument leans on the GIL's one order of steps: a free-threaded build would want a
    lock around the append and the flag.)

    Only the loop's thread pops, so `while items: popleft()` cannot race another consumer.
    The inbox holds no reference to its loop: the pool's map of inboxes keys them weakly by
    loop, and a value that referred to its key would keep every loop alive.
    """

    __slots__ = ("items", "scheduled")

    def __init__(self) -> None:
        self.items: deque[
            tuple[Callable[[asyncio.Future[Any], Any], None], asyncio.Future[Any], Any]
        ] = deque()
        self.scheduled = False

    def drain(self) -> None:
        """Answer every waiting result (on the loop's thread)."""
        self.scheduled = False  # first: see the class's docstring
        items = self.items
        popleft = items.popleft
        while items:
            answer, future, outcome = popleft()
            answer(future, outcome)


class WorkerThreads:
    """Up to `max_threads` daemon threads (by default as many as asyncio's default executor
    has: the CPU count + 4, at most 32), started when first needed, that run blocking calls
    for coroutines: `await threads.run(fn, *args)` is `await asyncio.to_thread(fn, *args)`
    for the caller (same result, same exception, the caller's context variables), at half to
    a third of its CPU cost per call (docs/performance.md).

    Share one per application; it may serve several event loops. A call waits in the queue
    while all threads are busy, as with a `ThreadPoolExecutor` at its limit. A thread idle for
    `idle_seconds` exits. `close` stops the threads once they finish; a closed pool refuses
    new calls with `RuntimeError`.
    """

    def __init__(
        self,
        max_threads: int | None = None,
        *,
        idle_seconds: float = 30.0,
        name: str = "pactmw-worker",
    ) -> None:
        if max_threads is None:
            # asyncio's default executor's size: sync bots keep the concurrency they had.
            max_threads = min(32, (os.cpu_count() or 1) + 4)
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.max_threads = max_threads
        #: A thread idle this long exits (a pool nobody uses holds no threads).
        self.idle_seconds = idle_seconds
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards the thread list and the idle count
        self._threads: list[threading.Thread] = []
        # Threads waiting for a job. `run` reads it without the lock: a stale value only
        # starts a thread one call late (or early), and never loses a job, which stays queued.
        self._idle = 0
        self._closed = False
        # One inbox per event loop using the pool (results go back to the loop of their
        # caller), and the last one used: a server's requests all come from one loop, so
        # `run` finds it with one identity test instead of a weak-key lookup.
        self._inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = (
            weakref.WeakKeyDictionary()
        )
        self._recent: tuple[weakref.ref[asyncio.AbstractEventLoop], _Inbox] | None = None
        _fork.reset_in_child(self)

    def _reset_in_child(self) -> None:
        """In a forked child: none of the parent's threads (counted idle, they would take
        the child's calls that nobody runs), jobs (the parent's loops wait for them) or
        inboxes, and a lock no thread of the child holds. Threads start on demand."""
        self._jobs = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = []
        self._idle = 0
        self._inboxes = weakref.WeakKeyDictionary()
        self._recent = None

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Call `fn(*args)` in a worker thread and return (or raise) what it does."""
        if self._closed:
            raise RuntimeError("the worker threads are closed")
        loop = asyncio.get_running_loop()
        recent = self._recent
        inbox = recent[1] if recent is not None and recent[0]() is loop else self._inbox(loop)
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, inbox, future, contextvars.copy_context(), fn, args))
        if self._idle <= 0 and len(self._threads) < self.max_threads:
            self._start_thread()
        return await future

    def close(self) -> None:
        """Stop the threads once they finish what they run; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in self._threads:
                self._jobs.put(None)

    def _inbox(self, loop: asyncio.AbstractEventLoop) -> _Inbox:
        # Only ever called on `loop`'s own thread, so two threads never make two inboxes for
        # one loop; the map itself is shared, hence the lock.
        with self._lock:
            inbox = self._inboxes.get(loop)
            if inbox is None:
                inbox = self._inboxes[loop] = _Inbox()
            self._recent = (weakref.ref(loop), inbox)
        return inbox

    def _start_thread(self) -> None:
        with self._lock:
            if self._closed or len(self._threads) >= self.max_threads:
                return
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            # Counted idle before it starts, so the calls queued meanwhile do not each start
            # another thread for the one job this thread is about to take.
            self._idle += 1
        thread.start()

    def _retire(self) -> bool:
        """An idle thread leaves (True) unless a job arrived meanwhile."""
        with self._lock:
            self._idle -= 1
            # After the decrement: a job put from now on sees one idle thread fewer in `run`
            # and starts a thread if none is left; one put before is still in the queue.
            if not self._jobs.empty():
                self._idle += 1
                return False
            self._threads.remove(threading.current_thread())
            return True

    def _work(self) -> None:
        jobs, lock = self._jobs, self._lock
        while True:
            try:
                job = jobs.get(timeout=self.idle_seconds)
            except queue.Empty:
                if self._retire():
                    return
                continue
            if job is None:
                return
            with lock:  # `-=` from several threads is not atomic
                self._idle -= 1
            loop, inbox, future, context, fn, args = job
            del job
            answer: Callable[[asyncio.Future[Any], Any], None]
            try:
                outcome: Any = context.run(fn, *args)
                answer = _set_result
            except BaseException as error:
                outcome, answer = error, _set_exception
            with lock:
                self._idle += 1
            # Append, then read the flag (the order `_Inbox` explains): the loop is woken
            # (a self-pipe write, a system call that hands the GIL over) only by the first
            # result since its last drain; those that follow before the drain runs ride
            # along, which is what happens under load, the loop busy with other requests.
            inbox.items.append((answer, future, outcome))
            if not inbox.scheduled:
                inbox.scheduled = True
                try:
                    loop.call_soon_threadsafe(inbox.drain)
                except RuntimeError:
                    # The loop closed while the call ran: nobody waits for these results,
                    # and the futures would keep the closed loop alive.
                    inbox.items.clear()
            # Hold no result, argument or future while waiting for the next job.
            del loop, inbox, future, context, fn, args, outcome
