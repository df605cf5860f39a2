"""Progress for long steps, on stderr."""

from __future__ import annotations

import math
import time
from typing import TextIO

from pactmw.core.encoding import printable


class Progress:
    """Progress for long steps, on `stream` (stderr): notes as lines; a status that updates in
    place on a terminal, or is printed every `every` seconds otherwise. `None`: silent."""

    def __init__(self, stream: TextIO | None = None, *, every: float = 10.0) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and stream.isatty())
        self.every = every
        self._last = -math.inf
        self._open = False

    def note(self, text: str) -> None:
        if self.stream is None:
            return
        self.end_status()
        print(printable(text), file=self.stream, flush=True)

    def status(self, text: str) -> None:
        if self.stream is None:
            return
        text = printable(text)  # notes and statuses quote the Provider (a link, a code)
        if self.tty:
            self.stream.write("\r" + text + "\x1b[K")
            self.stream.flush()
            self._open = True
            return
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            print(text, file=self.stream, flush=True)

    def end_status(self) -> None:
        if self.stream is not None and self._open:
            self.stream.write("\n")
            self.stream.flush()
        self._open = False
        self._last = -math.inf


__all__ = [
    "Progress",
]
