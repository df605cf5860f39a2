"""A bot for tests that run several server processes: it records every run in a file."""

from __future__ import annotations

import os
import time

from pactmw.provider import Turn


def counting_bot(turn: Turn) -> str:
    """Append the message id to $PACTMW_TEST_RUNS, wait $PACTMW_TEST_BOT_DELAY s, answer."""
    with open(os.environ["PACTMW_TEST_RUNS"], "a") as runs:
        runs.write(turn.message_id + "\n")  # one small append: atomic across processes
    time.sleep(float(os.environ.get("PACTMW_TEST_BOT_DELAY", "0")))
    return f"turn {len(turn.history) + 1} (pid {os.getpid()}): {turn.text}"
