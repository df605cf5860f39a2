"""The bot of the reliability tests: it records every run in a file and shows what it saw.

`pactmw serve` imports it by path (`tests.reliability.bots:recording_bot`), so several server
processes, and a server that is killed and started again, all append to the same file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pactmw.provider import Turn

SLOW_MARK = "[slow]"


def recording_bot(turn: Turn) -> str:
    """Log the run to $PACTMW_TEST_RUNS, sleep on `[slow]`, answer with what the turn saw.

    The file gets `start MESSAGE_ID PID` before the bot works and `done MESSAGE_ID PID` after,
    one small append each (atomic across processes). The reply names the message, the turn
    number and the earlier answered message ids, so a client can check that the reply belongs
    to its message and that the history the bot saw is exactly the conversation so far.
    """
    runs = os.environ["PACTMW_TEST_RUNS"]
    _append(runs, f"start {turn.message_id} {os.getpid()}\n")
    if SLOW_MARK in turn.text:
        time.sleep(float(os.environ.get("PACTMW_TEST_SLOW_SECONDS", "2")))
    earlier = ",".join(t.message_id for t in turn.history)
    reply = f"re {turn.message_id} turn {len(turn.history) + 1} after [{earlier}]: {turn.text}"
    _append(runs, f"done {turn.message_id} {os.getpid()}\n")
    return reply


def _append(path: str, line: str) -> None:
    with open(path, "a") as runs:
        runs.write(line)


def slow_first_bot(turn: Turn) -> str:
    """`recording_bot`, but slow on `[slow]` only the first time it sees the message (a
    backend that was slow once): that attempt outlasts `turn_timeout`, a retry answers at once."""
    runs = os.environ["PACTMW_TEST_RUNS"]
    seen = os.path.exists(runs) and f"start {turn.message_id} " in Path(runs).read_text()
    _append(runs, f"start {turn.message_id} {os.getpid()}\n")
    if SLOW_MARK in turn.text and not seen:
        time.sleep(float(os.environ.get("PACTMW_TEST_SLOW_SECONDS", "2")))
    earlier = ",".join(t.message_id for t in turn.history)
    reply = f"re {turn.message_id} turn {len(turn.history) + 1} after [{earlier}]: {turn.text}"
    _append(runs, f"done {turn.message_id} {os.getpid()}\n")
    return reply
