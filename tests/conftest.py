"""Fixtures for more than one test folder (their helper code is in tests/support)."""

from __future__ import annotations

from typing import Any

import pytest

import pactmw.core.jose as jose_module
from pactmw.provider._log_throttle import STORE_OUTAGES

# The helpers in tests/support assert too (a conformance case's outcome, a page's state); pytest
# explains only the asserts it rewrites, so it must rewrite them before a test imports them.
pytest.register_assert_rewrite("tests.support")


@pytest.fixture
def signature_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the real signature verifications pactmw makes (one entry each) during a test."""
    calls: list[int] = []
    real = jose_module.verify_signature

    def counting(jws: Any, key: Any) -> None:
        calls.append(1)
        real(jws, key)

    monkeypatch.setattr(jose_module, "verify_signature", counting)
    return calls


@pytest.fixture(autouse=True)
def _no_store_outage_of_another_test() -> None:
    """Each test begins with no store outage logged: the outages are the process's, so one
    left by an earlier test would be ended by this test's first store call that works, in a
    `store available again` line this test did not cause."""
    STORE_OUTAGES.forget()
