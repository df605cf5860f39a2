"""A check's outcome, a check's failure, and the run's outcome as a line and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from pactmw.core.errors import PactmwError


@frozen
class CheckResult:
    """One check's outcome. On failure `expected` says what PACT wants and `actual` what came
    back; on success `actual` is a short summary of what was seen."""

    name: str
    passed: bool
    expected: str
    actual: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "expected": self.expected,
            "actual": self.actual,
        }

    def line(self) -> str:
        """The one output line: `PASS  name` or `FAIL  name: expected ...; got ...`."""
        if self.passed:
            return f"PASS  {self.name}"
        expected, actual = _one_line(self.expected), _one_line(self.actual)
        return f"FAIL  {self.name}: expected {expected}; got {actual}"


class Mismatch(PactmwError):
    """A check's failure: what was expected and what came back."""

    def __init__(self, expected: str, actual: str) -> None:
        super().__init__(f"expected {expected}; got {actual}")
        self.expected = expected
        self.actual = actual


def _one_line(text: str) -> str:
    return " ".join(text.split())


def summary_line(results: Sequence[CheckResult]) -> str:
    """`N passed, M failed`."""
    passed = sum(1 for result in results if result.passed)
    return f"{passed} passed, {len(results) - passed} failed"


def results_json(card_url: str, results: Sequence[CheckResult]) -> dict[str, Any]:
    passed = sum(1 for result in results if result.passed)
    return {
        "card_url": card_url,
        "checks": [result.to_json() for result in results],
        "passed": passed,
        "failed": len(results) - passed,
        "total": len(results),
    }


__all__ = [
    "CheckResult",
    "Mismatch",
    "results_json",
    "summary_line",
]
