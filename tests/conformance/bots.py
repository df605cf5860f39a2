"""The conformance suite's support bot: echoes, and records every run it makes.

Each run appends one line `contextId<TAB>messageId<TAB>brand` to the file named by the
`PACTMW_CONFORMANCE_RUNS` environment variable, so a test can prove the bot ran exactly once
per messageId even when the Provider runs in another process (Flask, Django).

Triggers (the text of the message):

* `slow:<seconds> ...` sleeps before answering (for concurrent-retry tests);
* `boom` raises (the Provider must answer 500 INTERNAL and let a retry run the bot again).
"""

from __future__ import annotations

import fcntl
import os
import time

from pactmw.provider import Turn

RUNS_ENV = "PACTMW_CONFORMANCE_RUNS"


def record_run(turn: Turn) -> None:
    """Append this run to the runs file (a no-op when the variable is unset)."""
    path = os.environ.get(RUNS_ENV)
    if not path:
        return
    line = f"{turn.context_id}\t{turn.message_id!r}\t{turn.brand.id}\n"
    with open(path, "a", encoding="utf-8", errors="backslashreplace") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.write(line)
            handle.flush()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def counting_bot(turn: Turn) -> str:
    """Answer `<brand> #<turn number>: <text>`, after recording the run."""
    record_run(turn)
    text = turn.text
    if text.startswith("slow:"):
        seconds, _, _ = text[len("slow:") :].partition(" ")
        time.sleep(min(float(seconds), 10.0))
    if text == "boom":
        raise RuntimeError("the bot failed on purpose")
    return f"{turn.brand.id} #{len(turn.history) + 1}: {text}"
