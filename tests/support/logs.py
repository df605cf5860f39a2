"""What an attacker's value may do to the operator's logs: nothing.

`HOSTILE` is the value a test puts in a request-controlled field (a JWT's `iss` or `kid`, a
`client_id`, a broker's code); `assert_logs_tame` checks the lines pactmw logged while it was
handled: none breaks the line (`\\n`, `\\r`), drives a terminal (ESC) or floods the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

#: A newline and a carriage return (a forged line), an ANSI sequence (hidden text under a
#: `tail -f`), then 10 KiB.
HOSTILE = "x\nINFO pactmw.identity: forged\r\x1b[2K\x1b[8m" + "A" * 10 * 1024

#: The longest line pactmw may log: its own words and a few values of at most
#: `pactmw.core.encoding.LOGGABLE_LIMIT` (200) characters each; far below `HOSTILE`.
LINE_BOUND = 2000


def pactmw_records(records: Iterable[logging.LogRecord]) -> list[logging.LogRecord]:
    return [record for record in records if record.name.startswith("pactmw")]


def assert_logs_tame(records: Iterable[logging.LogRecord]) -> list[str]:
    """The messages of the `pactmw` records among `records`, after checking each; returns
    them so that a test can also check that it saw the line it expected."""
    messages = [record.getMessage() for record in pactmw_records(records)]
    for message in messages:
        assert "\n" not in message, message[:300]
        assert "\r" not in message, message[:300]
        assert "\x1b" not in message, message[:300]
        assert len(message) <= LINE_BOUND, (len(message), message[:300])
    return messages


__all__ = ["HOSTILE", "LINE_BOUND", "assert_logs_tame", "pactmw_records"]
