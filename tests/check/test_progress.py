"""`pactmw check`'s progress on stderr quotes the Provider (the login link, the user code it
sent): its control characters are shown as escapes, never sent to the terminal."""

from __future__ import annotations

import io

from pactmw.check import Progress

FORGED = "BCDF-GHJK\x1b[2J\rPASS identity: everything"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_note_shows_control_characters_as_escapes() -> None:
    stream = io.StringIO()
    Progress(stream).note(f"(user code {FORGED}; waiting up to 60 s)")
    assert stream.getvalue() == (
        "(user code BCDF-GHJK\\x1b[2J\\rPASS identity: everything; waiting up to 60 s)\n"
    )


def test_a_status_on_a_terminal_keeps_only_its_own_control_characters() -> None:
    stream = _Terminal()
    Progress(stream).status(f"waiting for {FORGED}")
    # Its own: the carriage return before and the erase-line after; the quoted text escaped.
    assert stream.getvalue() == "\rwaiting for BCDF-GHJK\\x1b[2J\\rPASS identity: everything\x1b[K"
