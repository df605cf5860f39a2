"""Fixtures for more than one test folder (their helper code is in tests/support)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pactmw.core.jose as jose_module

# The helpers in tests/support assert too (a conformance case's outcome, a page's state); pytest
# explains only the asserts it rewrites, so it must rewrite them before a test imports them.
pytest.register_assert_rewrite("tests.support")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "scaled_timeout(seconds): pytest-timeout's timeout, `seconds` on an idle machine, "
        "stretched by the load when the test starts (tests.support.waits.load_scaled)",
    )


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A `scaled_timeout(seconds)` test gets `timeout(load_scaled(seconds))`, worked out as it
    starts (the load at collection says nothing of the load forty minutes later), and set
    before pytest-timeout reads it: this wrapper runs outside pytest-timeout's own."""
    from tests.support.waits import load_scaled  # after the assert rewrite is registered

    marker = item.get_closest_marker("scaled_timeout")
    if marker is not None:
        item.add_marker(pytest.mark.timeout(load_scaled(marker.args[0])), append=False)
    yield


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
