"""A call that may never return, run where the test can stop waiting for it."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["outcome_within"]


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
