"""Fixtures for more than one test folder (their helper code is in tests/support)."""

from __future__ import annotations

from typing import Any

import pytest

import pactmw.core.jose as jose_module

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
