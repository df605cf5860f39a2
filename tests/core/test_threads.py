"""WorkerThreads: what `asyncio.to_thread` promises its caller, through a cheaper hand-off."""

from __future__ import annotations

import asyncio
import contextvars
import operator
import threading
import time
from typing import Any

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


# -- the way back: results wait in the loop's inbox, one wake-up per drain ----------------------


def _count_wakeups(loop: asyncio.AbstractEventLoop) -> list[int]:
    """Count the pool's wake-ups of `loop` (the drains it schedules from worker threads)."""
    woken = [0]
    schedule = loop.call_soon_threadsafe

    def counting(callback: Any, *args: Any, context: contextvars.Context | None = None) -> Any:
        if getattr(callback, "__name__", "") == "drain":
            woken[0] += 1
        return schedule(callback, *args, context=context)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign, assignment]
    return woken


def test_many_concurrent_completions_are_all_delivered() -> None:
    threads = WorkerThreads(max_threads=4)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(threads.run(pow, i, 2) for i in range(2000))))

    assert asyncio.run(main()) == [i * i for i in range(2000)]
    threads.close()


def test_results_that_arrive_while_the_loop_is_busy_wake_it_once() -> None:
    threads = WorkerThreads(max_threads=4)
    calls = 50

    def busy_until_every_result_waits(loop: asyncio.AbstractEventLoop) -> None:
        # A long callback: the loop cannot drain while the workers finish every call. Waits
        # for their results, not for a time, so the test means the same on any machine.
        inbox = threads._inboxes[loop]
        for _ in range(10_000):
            if len(inbox.items) == calls:
                return
            time.sleep(0.001)
        raise AssertionError(f"only {len(inbox.items)} of {calls} results arrived")

    async def main() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        woken = _count_wakeups(loop)
        await threads.run(int)  # the loop's inbox exists before the jobs are queued
        woken[0] = 0
        started = [asyncio.ensure_future(threads.run(operator.neg, i)) for i in range(calls)]
        await asyncio.sleep(0)  # every call queued
        loop.call_soon(busy_until_every_result_waits, loop)
        results = list(await asyncio.gather(*started))
        return results, woken[0]

    results, woken = asyncio.run(main())
    assert results == [-i for i in range(calls)]
    # The first result schedules a drain; the other 49 find it pending and only append.
    assert woken == 1
    threads.close()


def test_two_loops_on_one_pool_each_get_their_own_results() -> None:
    threads = WorkerThreads(max_threads=4)
    both_running = threading.Barrier(2, timeout=10)

    def in_thread(base: int, out: dict[int, list[int]]) -> None:
        async def main() -> list[int]:
            both_running.wait()  # the two loops use the pool at the same time
            return list(
                await asyncio.gather(*(threads.run(operator.add, base, i) for i in range(500)))
            )

        # Debug mode: completing a future from another loop's thread raises there.
        out[base] = asyncio.run(main(), debug=True)

    out: dict[int, list[int]] = {}
    workers = [
        threading.Thread(target=in_thread, args=(base, out), daemon=True) for base in (0, 10_000)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert out == {base: [base + i for i in range(500)] for base in (0, 10_000)}
    threads.close()


def test_a_cancelled_caller_among_many_leaves_the_others_their_results() -> None:
    threads = WorkerThreads(max_threads=2)
    release = threading.Event()

    async def main() -> list[int]:
        slow = asyncio.ensure_future(threads.run(release.wait, 10))
        others = [asyncio.ensure_future(threads.run(operator.neg, i)) for i in range(20)]
        await asyncio.sleep(0)
        slow.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await slow
        return list(await asyncio.gather(*others))

    assert asyncio.run(main()) == [-i for i in range(20)]
    threads.close()


def test_results_exceptions_and_context_variables_in_one_batch() -> None:
    threads = WorkerThreads(max_threads=3)

    def answer(i: int) -> str:
        if i % 3 == 0:
            raise KeyError(REQUEST_ID.get())
        return REQUEST_ID.get()

    async def one(i: int) -> str:
        REQUEST_ID.set(f"req-{i}")  # each task's own context
        try:
            return await threads.run(answer, i)
        except KeyError as error:
            return f"raised {error.args[0]}"

    async def main() -> list[str]:
        return list(await asyncio.gather(*(one(i) for i in range(300))))

    expected = [f"raised req-{i}" if i % 3 == 0 else f"req-{i}" for i in range(300)]
    assert asyncio.run(main()) == expected
    threads.close()


def test_a_loop_closed_while_a_call_runs_leaves_the_pool_serving_others() -> None:
    threads = WorkerThreads(max_threads=1)
    running, release = threading.Event(), threading.Event()

    def wait_for_release() -> int:
        running.set()
        release.wait(10)
        return 1

    loop = asyncio.new_event_loop()
    loop.run_until_complete(asyncio.sleep(0))
    job = loop.create_task(threads.run(wait_for_release))
    loop.run_until_complete(asyncio.sleep(0))  # queued
    assert running.wait(10)
    job.cancel()
    loop.close()  # with the call still running: its result has no loop to go to
    release.set()

    async def call() -> int:
        return await threads.run(lambda: 7)

    assert asyncio.run(call()) == 7
    threads.close()
