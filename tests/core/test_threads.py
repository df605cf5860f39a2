"""WorkerThreads: what `asyncio.to_thread` promises its caller, through a cheaper hand-off."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from pactmw.core.threads import WorkerThreads

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def test_runs_in_another_thread_and_returns_the_result() -> None:
    threads = WorkerThreads()

    async def main() -> tuple[str, str]:
        here = threading.current_thread().name
        there = await threads.run(lambda: threading.current_thread().name)
        return here, there

    here, there = asyncio.run(main())
    assert here != there
    assert there.startswith("pactmw-worker")
    threads.close()


def test_passes_arguments_and_raises_what_the_call_raises() -> None:
    threads = WorkerThreads()

    def divide(a: int, b: int) -> float:
        return a / b

    async def main() -> None:
        assert await threads.run(divide, 6, 3) == 2
        with pytest.raises(ZeroDivisionError):
            await threads.run(divide, 1, 0)
        assert await threads.run(divide, 1, 4) == 0.25  # the thread survived the error

    asyncio.run(main())
    threads.close()


def test_the_call_sees_the_callers_context_variables() -> None:
    threads = WorkerThreads()

    async def main() -> str:
        REQUEST_ID.set("req-42")
        return await threads.run(REQUEST_ID.get)

    assert asyncio.run(main()) == "req-42"
    threads.close()


def test_blocked_calls_get_their_own_threads_up_to_the_limit() -> None:
    threads = WorkerThreads(max_threads=4)
    barrier = threading.Barrier(4, timeout=10)

    def meet() -> str:
        barrier.wait()  # only returns once four calls run at the same time
        return threading.current_thread().name

    async def main() -> list[str]:
        return list(await asyncio.gather(*(threads.run(meet) for _ in range(4))))

    names = asyncio.run(main())
    assert len(set(names)) == 4
    threads.close()


def test_calls_beyond_the_limit_wait_for_a_thread() -> None:
    threads = WorkerThreads(max_threads=2)
    running = 0
    most = 0
    lock = threading.Lock()

    def work(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.01)
        with lock:
            running -= 1
        return i

    async def main() -> list[int]:
        return list(await asyncio.gather(*(threads.run(work, i) for i in range(20))))

    assert asyncio.run(main()) == list(range(20))
    assert most <= 2
    threads.close()


def test_a_cancelled_caller_leaves_the_pool_working() -> None:
    threads = WorkerThreads(max_threads=1)
    release = threading.Event()

    async def main() -> int:
        slow = asyncio.ensure_future(threads.run(release.wait, 10))
        await asyncio.sleep(0.01)
        slow.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await slow
        return await threads.run(lambda: 7)

    assert asyncio.run(main()) == 7
    threads.close()


def test_idle_threads_exit_and_new_calls_start_one_again() -> None:
    threads = WorkerThreads(idle_seconds=0.05)

    async def call() -> threading.Thread:
        return await threads.run(threading.current_thread)

    first = asyncio.run(call())
    first.join(timeout=10)
    assert not first.is_alive(), "the idle thread never exited"
    second = asyncio.run(call())
    assert second is not first
    assert second.is_alive()
    threads.close()


def test_serves_several_event_loops() -> None:
    threads = WorkerThreads(max_threads=2)

    async def call(i: int) -> int:
        return await threads.run(lambda: i * 2)

    assert [asyncio.run(call(i)) for i in range(3)] == [0, 2, 4]
    threads.close()


def test_a_closed_pool_refuses_calls() -> None:
    threads = WorkerThreads()

    async def call() -> int:
        return await threads.run(lambda: 1)

    assert asyncio.run(call()) == 1
    threads.close()
    threads.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(call())


def test_needs_at_least_one_thread() -> None:
    with pytest.raises(ValueError, match="max_threads"):
        WorkerThreads(max_threads=0)
