"""The transcript the demo prints: numbered steps, parts, notes and who said what."""

from __future__ import annotations

import json
from typing import TextIO


class Transcript:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.steps = 0

    def step(self, title: str) -> None:
        self.steps += 1
        self.line()
        self.line(f"[{self.steps}] {title}")

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def part(self, title: str) -> None:
        self.line()
        self.line(f"== {title} ==")

    def note(self, text: str) -> None:
        self.line(f"    {text}")

    def say(self, speaker: str, listener: str, text: str) -> None:
        self.line(f"    {speaker} → {listener}: {json.dumps(text, ensure_ascii=False)}")


__all__ = [
    "Transcript",
]
