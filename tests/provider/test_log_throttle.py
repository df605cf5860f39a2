"""A repeated event is said once, then at most once an interval (found in a deployment trial:
a store outage logged one ERROR line per request, and flooded the log under traffic)."""

from __future__ import annotations

import logging
import threading

import pytest

from pactmw.provider._log_throttle import (
    Ended,
    Said,
    ThrottledLog,
    log_store_outage,
    log_store_recovery,
)
from pactmw.provider.errors import error_response
from pactmw.store.base import StoreUnavailable


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_first_event_then_one_summary_an_interval() -> None:
    clock = Clock()
    log = ThrottledLog(60.0, clock=clock)
    assert log.event("k") == Said(first=True, more=0, seconds=0.0)
    for _ in range(5):
        clock.now += 10.0
        assert log.event("k") is None
    clock.now += 10.0
    assert log.event("k") == Said(first=False, more=6, seconds=60.0)
    assert log.event("other") == Said(first=True, more=0, seconds=0.0)  # keys are apart
    clock.now += 1.0
    assert log.event("k") is None
    # Quiet for more than an interval: the run ended; the next event opens a new one, and
    # the one its predecessor left unsaid is counted before it.
    clock.now += 61.0
    assert log.event("k") == Said(first=True, more=1, seconds=1.0)
    # A clock set back an hour (a wall clock): a new run, not an hour of silence.
    clock.now -= 3600.0
    assert log.event("k") == Said(first=True, more=0, seconds=0.0)


def test_keys_past_the_bound_are_forgotten() -> None:
    log = ThrottledLog(60.0, clock=Clock(), max_keys=2)
    for key in ("a", "b", "c"):
        assert log.event(key) is not None
    assert log.event("c") is None
    assert log.event("a") == Said(first=True, more=0, seconds=0.0)  # forgotten: said again


def test_threads_say_the_first_event_once() -> None:
    log = ThrottledLog(60.0, clock=Clock())
    said: list[Said | None] = []
    lock = threading.Lock()

    def hit() -> None:
        for _ in range(200):
            answer = log.event("k")
            with lock:
                said.append(answer)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [s for s in said if s is not None] == [Said(first=True, more=0, seconds=0.0)]


def test_an_outage_is_one_line_then_a_summary(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    outages = ThrottledLog(60.0, clock=clock)
    logger = logging.getLogger("pactmw.provider")
    down = StoreUnavailable("PostgreSQL pactmw@db:5432/pactmw is unavailable: refused")
    with caplog.at_level(logging.ERROR, logger="pactmw.provider"):
        for _ in range(100):
            log_store_outage(logger, down, outages=outages)
            clock.now += 1.0
        log_store_outage(logger, down, " on a consent page", outages=outages)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, f"store unavailable: {down}"),
        (
            logging.ERROR,
            f"store still unavailable: 60 more requests answered 503 in the 60 s since the "
            f"last line: {down}",
        ),
        (logging.ERROR, f"store unavailable on a consent page: {down}"),
    ]


def test_error_response_says_an_outage_once(caplog: pytest.LogCaptureFixture) -> None:
    down = StoreUnavailable("the store of test_error_response_says_an_outage_once is down")
    with caplog.at_level(logging.ERROR, logger="pactmw.provider"):
        answers = {error_response(down).status for _ in range(50)}
    assert answers == {503}
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count(f"store unavailable: {down}") == 1
    assert all(m.startswith("store still unavailable: ") for m in messages[1:]), messages


def test_end_adds_up_every_run_since_the_first_event() -> None:
    # Found in an operations review: the log said when an outage began, never when it ended.
    clock = Clock()
    log = ThrottledLog(60.0, clock=clock)
    assert log.end() is None  # nothing began: nothing to end (the hot path)
    log.event("a")
    clock.now += 30.0
    log.event("b")
    for _ in range(3):
        clock.now += 50.0
        log.event("a")
    clock.now += 100.0  # quiet: "a"'s run ended without a success, still unreported
    log.event("a")  # a new run of "a": the outage goes on, counted from its first event
    clock.now += 5.0
    assert log.end() == Ended(events=6, seconds=285.0)
    assert log.end() is None  # said once: the next event begins a new outage
    assert log.event("a") == Said(first=True, more=0, seconds=0.0)


def test_an_outage_ends_with_one_line_when_the_store_works_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    outages = ThrottledLog(60.0, clock=clock)
    logger = logging.getLogger("pactmw.provider")
    down = StoreUnavailable("sqlite database /srv/pactmw.db: database is locked")
    with caplog.at_level(logging.INFO, logger="pactmw.provider"):
        log_store_recovery(logger, outages)  # no outage was logged: nothing to say
        for _ in range(90):
            log_store_outage(logger, down, outages=outages)
            clock.now += 1.0
        log_store_recovery(logger, outages)
        log_store_recovery(logger, outages)  # once
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, f"store unavailable: {down}"),
        (
            logging.ERROR,
            f"store still unavailable: 60 more requests answered 503 in the 60 s since the "
            f"last line: {down}",
        ),
        (
            logging.WARNING,
            "store available again after 90 s: 90 requests answered 503 since it failed",
        ),
    ]


def test_two_causes_are_two_runs_and_one_recovery(caplog: pytest.LogCaptureFixture) -> None:
    # The runs are process-wide, keyed by the message (and where it was met): two causes at
    # once (a locked database, then its tables gone; or two stores) are each said in full and
    # summed up apart, each line naming its own cause; the store working again ends both.
    clock = Clock()
    outages = ThrottledLog(60.0, clock=clock)
    logger = logging.getLogger("pactmw.provider")
    locked = StoreUnavailable("sqlite database /srv/pactmw.db: database is locked")
    gone = StoreUnavailable("sqlite database /srv/pactmw.db: no such table: pactmw_agents")
    with caplog.at_level(logging.INFO, logger="pactmw.provider"):
        for _ in range(40):
            log_store_outage(logger, locked, outages=outages)
            log_store_outage(logger, gone, outages=outages)
            clock.now += 2.0
        log_store_recovery(logger, outages)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, f"store unavailable: {locked}"),
        (logging.ERROR, f"store unavailable: {gone}"),
        (
            logging.ERROR,
            f"store still unavailable: 30 more requests answered 503 in the 60 s since the "
            f"last line: {locked}",
        ),
        (
            logging.ERROR,
            f"store still unavailable: 30 more requests answered 503 in the 60 s since the "
            f"last line: {gone}",
        ),
        (
            logging.WARNING,
            "store available again after 80 s: 80 requests answered 503 since it failed",
        ),
    ]


def test_a_store_that_fails_one_call_in_two_is_not_a_flood(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A store half down (one table missing, a lock held elsewhere now and then): each request
    # has a call that works and one that fails. Ending the outage at every call that works
    # would say it began and ended at every request, two lines a request: the end is said at
    # most once an interval, and meanwhile the outage goes on, its failures counted.
    clock = Clock()
    outages = ThrottledLog(60.0, clock=clock)
    logger = logging.getLogger("pactmw.provider")
    gone = StoreUnavailable("sqlite database /srv/pactmw.db: no such table: pactmw_grants")
    with caplog.at_level(logging.INFO, logger="pactmw.provider"):
        for _ in range(150):  # a request a second for 150 s
            log_store_outage(logger, gone, outages=outages)
            log_store_recovery(logger, outages)
            clock.now += 1.0
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, f"store unavailable: {gone}"),
        (
            logging.WARNING,
            "store available again after 0 s: 1 requests answered 503 since it failed",
        ),
        (logging.ERROR, f"store unavailable: {gone}"),
        (
            logging.WARNING,
            "store available again after 59 s: 60 requests answered 503 since it failed",
        ),
        (logging.ERROR, f"store unavailable: {gone}"),
        (
            logging.WARNING,
            "store available again after 59 s: 60 requests answered 503 since it failed",
        ),
        (logging.ERROR, f"store unavailable: {gone}"),
    ]
