"""Work done in a child forked while another thread of the parent holds a lock.

A preloading server builds the Provider in its master and forks the workers: a lock some
thread held at the fork stays held for ever in the child (its holder does not exist there),
and the parent's background threads do not exist there either. These helpers fork the way
such a server does (a "fork" multiprocessing context) and bound the child's work, so that a
hang fails the test instead of freezing it.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from multiprocessing.queues import Queue

FORK = multiprocessing.get_context("fork")
#: How long a child may take: far above what its little work needs (a hang check).
BOUND = 60.0


@contextmanager
def held_elsewhere(lock: AbstractContextManager[object]) -> Iterator[None]:
    """`lock` (a Lock or a Condition) held by another thread of this process for the block,
    as by a request of another thread when the server forks."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            done.wait(BOUND)

    holder = threading.Thread(target=hold, name="test-lock-holder", daemon=True)
    holder.start()
    assert taken.wait(BOUND), "the lock was never free"
    try:
        yield
    finally:
        done.set()
        holder.join(BOUND)


def _report(work: Callable[[], object], out: Queue[tuple[bool, object]]) -> None:
    try:
        out.put((True, work()))
    except BaseException as exc:
        out.put((False, f"{type(exc).__name__}: {exc}"))


def in_forked_child(work: Callable[[], object]) -> object:
    """What `work()` returns in a child forked now (it must be picklable); an error it
    raised, or a child still running after `BOUND` seconds (killed), fails the test."""
    out: Queue[tuple[bool, object]] = FORK.Queue()
    child = FORK.Process(target=_report, args=(work, out))
    child.start()
    try:
        ok, value = out.get(timeout=BOUND)
    except queue.Empty:
        ok, value = False, f"no answer: the child still runs after {BOUND:g} s (a hang)"
        child.kill()
    child.join(BOUND)
    if child.is_alive():  # answered, yet stuck on its way out
        child.kill()
        child.join()
    assert ok, value
    return value
