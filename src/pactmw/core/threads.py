"""A pool of worker threads for the blocking calls of async drivers, with a cheap hand-off.

`asyncio.to_thread` goes through `loop.run_in_executor`: a `functools.partial`, a
`concurrent.futures.Future` with its own condition variable, `ThreadPoolExecutor.submit`
(a lock and a thread-count check per call), and a chained asyncio future. Under load that
machinery, not the work handed off, was the largest cost of a `message:send` on sqlite
(docs/performance.md). Here a hand-off is one put on a C `SimpleQueue` and, back, one
`call_soon_threadsafe` that completes the awaiting asyncio future directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["WorkerThreads"]

# What a worker takes from the queue: the loop and future to answer, and the call to make
# (in a copy of the caller's context, as asyncio.to_thread does); None stops one worker.
_Job = tuple[
    asyncio.AbstractEventLoop,
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

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Call `fn(*args)` in a worker thread and return (or raise) what it does."""
        if self._closed:
            raise RuntimeError("the worker threads are closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, contextvars.copy_context(), fn, args))
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
            loop, future, context, fn, args = job
            del job
            answer: Callable[[asyncio.Future[Any], Any], None]
            try:
                outcome: Any = context.run(fn, *args)
                answer = _set_result
            except BaseException as error:
                outcome, answer = error, _set_exception
            with lock:
                self._idle += 1
            # A loop closed while the call ran raises RuntimeError: nobody is waiting then.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(answer, future, outcome)
            # Hold no result, argument or future while waiting for the next job.
            del loop, future, context, fn, args, outcome
