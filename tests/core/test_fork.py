"""The verifiers' in-process state in a child forked while another thread uses it.

A preloading server (`gunicorn --preload`, Flask's `init_app`, Django's middleware) builds
the Provider, its verifiers and their caches in the master and forks the workers. A lock
held by another thread at the fork would be held for ever in the child, a fetch under way
would never end there, and the parent's worker threads do not exist there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from pactmw.core._shared_fetch import FetchRules, SharedFetches
from pactmw.core.fetch import FetchPolicy
from pactmw.core.replay import MemoryReplayMemory
from pactmw.core.threads import WorkerThreads
from pactmw.core.tokencache import VerifiedTokenCache
from pactmw.protocols._agent_registry import MemoryAgentOverrides
from pactmw.protocols.parafe import BrokerKeys
from tests.support.forks import BOUND, held_elsewhere, in_forked_child
from tests.support.net import closed_port_url

T0 = 1_700_000_000.0


def test_the_verified_token_cache_takes_entries_in_a_child_forked_while_a_write_held_it() -> None:
    cache: VerifiedTokenCache[str] = VerifiedTokenCache()
    cache.put(b"parent", ("p",), expires_at=T0 + 60, now=T0)

    def work() -> object:
        cache.put(b"child", ("c",), expires_at=T0 + 60, now=T0)
        return cache.get(b"child", T0), cache.get(b"parent", T0)

    with held_elsewhere(cache._lock):
        assert in_forked_child(work) == ((T0 + 60, "c"), (T0 + 60, "p"))


def test_the_replay_memory_answers_in_a_child_forked_while_a_thread_held_it() -> None:
    memory = MemoryReplayMemory()
    assert memory.first_use("seen", now=T0, expires_at=T0 + 60)

    def work() -> object:
        return (
            memory.first_use("new", now=T0, expires_at=T0 + 60),
            memory.first_use("seen", now=T0, expires_at=T0 + 60),  # what the parent saw
        )

    with held_elsewhere(memory._lock):
        assert in_forked_child(work) == (True, False)


def _rules(fetch: Callable[[str, str | None], str]) -> FetchRules[str]:
    return FetchRules(
        fetch=fetch,
        crashed=lambda key, previous, exc: f"crashed {key}",
        # Longer than a child may take: a child waiting for the parent's fetch hangs.
        timeout=BOUND * 2,
        timed_out=lambda key: TimeoutError(key),
        refused=lambda key: RuntimeError(key),
        what="test document",
        logger=logging.getLogger("tests.fork"),
    )


def test_shared_fetches_answer_in_a_child_forked_while_a_thread_held_their_lock() -> None:
    fetches = SharedFetches(_rules(lambda key, previous: f"fetched {key}"), max_entries=10)

    def work() -> object:
        return fetches.get("k", lambda value: value is None)

    with held_elsewhere(fetches._lock):
        assert in_forked_child(work) == "fetched k"


def test_a_child_forked_during_a_fetch_fetches_for_itself() -> None:
    # The parent's fetch completes its future in the parent only: a child waiting on it
    # would wait until the timeout, and the key would stay "being fetched" in the child.
    release = threading.Event()
    started = threading.Event()

    def fetch(key: str, previous: str | None) -> str:
        if threading.current_thread().name == "parent-fetch":
            started.set()
            release.wait(BOUND)
            return "parent's"
        return "child's"

    fetches = SharedFetches(_rules(fetch), max_entries=10)
    fetching = threading.Thread(
        target=fetches.get, args=("k", lambda value: value is None), name="parent-fetch"
    )
    fetching.start()
    assert started.wait(BOUND)
    try:
        assert in_forked_child(lambda: fetches.get("k", lambda value: value is None)) == ("child's")
    finally:
        release.set()
        fetching.join(BOUND)
    assert fetches.peek("k") == "parent's"


def test_worker_threads_run_calls_in_a_child_forked_after_they_ran_in_the_parent() -> None:
    # The parent's idle thread is counted as idle in the child, where it does not exist.
    threads = WorkerThreads()
    assert asyncio.run(threads.run(lambda: "parent")) == "parent"

    def work() -> object:
        return asyncio.run(threads.run(lambda: "child"))

    with held_elsewhere(threads._lock):
        assert in_forked_child(work) == "child"
    assert asyncio.run(threads.run(lambda: "parent again")) == "parent again"
    threads.close()


def test_agent_overrides_are_set_in_a_child_forked_while_a_thread_held_them() -> None:
    overrides = MemoryAgentOverrides()
    overrides.set_agent_enabled("https://blocked.example", False)

    def work() -> object:
        overrides.set_agent_enabled("https://other.example", False)
        return (
            overrides.agent_enabled("https://other.example"),
            overrides.agent_enabled("https://blocked.example"),
        )

    with held_elsewhere(overrides._lock):
        assert in_forked_child(work) == (False, False)


def test_the_parafe_broker_keys_look_up_documents_in_a_child_forked_while_held() -> None:
    keys = BrokerKeys(closed_port_url(), fetch_policy=FetchPolicy(allow_http_on_loopback=True))

    def work() -> object:
        return keys._cached("agent-1")  # under the lock; nothing cached

    with held_elsewhere(keys._lock):
        assert in_forked_child(work) is None
