"""Clocks a test controls, for every `clock=` parameter of pactmw (epoch seconds)."""

from __future__ import annotations

import time

__all__ = ["FakeClock", "OffsetClock", "wait_for_room_in_window"]


class FakeClock:
    """Seconds that move only when the test says so: `advance`, or `sleep` (which also
    records each wait in `slept`, for code that takes a `sleep=` callable)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class OffsetClock:
    """Wall-clock seconds plus an `offset` the test may move, or a `frozen` instant.

    For a server under test whose clients sign with the real time.
    """

    def __init__(self) -> None:
        self.offset = 0.0
        self.frozen: float | None = None

    def __call__(self) -> float:
        return self.frozen if self.frozen is not None else time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def wait_for_room_in_window(window: float, room: float) -> None:
    """Sleep into the next rate-limit window when fewer than `room` seconds are left of this
    one. pactmw's windows are fixed and aligned to the epoch (`now - now % window`), so
    requests that a real clock times and that must be counted together (the last one refused)
    are, if they are made within `room` seconds after this returns."""
    left = window - time.time() % window
    if left < room:
        time.sleep(left + 0.05)
