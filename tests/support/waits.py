"""A call that may never return, run where the test can stop waiting for it, and a test's
time budget scaled to how loaded the machine is."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = ["MAX_LOAD_FACTOR", "load_factor", "load_scaled", "outcome_within"]

#: The most a budget is stretched: a hang still fails, at worst this many times later.
MAX_LOAD_FACTOR = 4.0


def outcome_within(
    bound: float, operation: Callable[[], object], *, waiting_for: str
) -> BaseException | None:
    """What `operation` raised (None if nothing), or an AssertionError saying it is still
    waiting for `waiting_for` after `bound` seconds (a hang check, not a timing: the bound is
    far above the time the call is meant to take). The call runs in a daemon thread, so a
    hung one does not hold up the test run's exit."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            operation()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound)
    if thread.is_alive():
        return AssertionError(f"still waiting for {waiting_for} after {bound:g} s")
    return raised[0] if raised else None


def load_factor() -> float:
    """How many times slower than on an idle machine work runs now: runnable processes per
    core (the last minute's load average over the CPU count), between 1 and
    `MAX_LOAD_FACTOR`. A 2-core machine shared with other test runs sits at 2 to 4."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(max(per_core, 1.0), MAX_LOAD_FACTOR)


def load_scaled(seconds: float) -> float:
    """`seconds`, a budget measured on an idle machine, stretched by `load_factor()`."""
    return seconds * load_factor()
