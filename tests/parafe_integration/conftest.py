"""Fixtures of the Parafé integration tests (their helpers are in support.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pactmw.core.jwk import generate_private_jwk
from pactmw.store import open_store
from tests.provider import OTHER_ISSUER, Kit
from tests.support.parties import ISSUER


@pytest.fixture
def kit() -> Iterator[Kit]:
    """A Provider kit on a memory store, whose clock is the wall clock when the test starts:
    Parafé tokens are issued on the wall clock."""
    keys = {
        ISSUER: generate_private_jwk("ES256", kid="pa-1"),
        OTHER_ISSUER: generate_private_jwk("ES256", kid="other-1"),
    }
    kit = Kit(keys, lambda: open_store("memory://"))
    kit.clock.now = time.time()
    yield kit
    kit.close()
