"""Fixtures for the Provider tests (helpers live in `tests.provider`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.store import open_store
from tests.provider import OTHER_ISSUER, Drive, Kit, async_drive, sync_drive
from tests.support.parties import ISSUER


@pytest.fixture(scope="session")
def pa_keys() -> dict[str, PrivateJWK]:
    return {
        ISSUER: generate_private_jwk("ES256", kid="pa-1"),
        OTHER_ISSUER: generate_private_jwk("ES256", kid="other-1"),
    }


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> Callable[[], str]:
    """A factory of fresh store URLs of one backend."""
    counter = iter(range(1_000_000))
    if request.param == "memory":
        return lambda: "memory://"
    return lambda: f"sqlite:///{tmp_path}/store-{next(counter)}.db"


@pytest.fixture
def kit(pa_keys: dict[str, PrivateJWK], store_url: Callable[[], str]) -> Iterator[Kit]:
    kit = Kit(pa_keys, lambda: open_store(store_url()))
    yield kit
    kit.close()


@pytest.fixture
def memory_kit(pa_keys: dict[str, PrivateJWK]) -> Iterator[Kit]:
    """A kit on the memory store only (for tests that do not depend on the backend)."""
    kit = Kit(pa_keys, lambda: open_store("memory://"))
    yield kit
    kit.close()


@pytest.fixture(params=["sync", "async"])
def drive(request: pytest.FixtureRequest) -> Drive:
    """Answer one request through `handle` or through `ahandle`."""
    return sync_drive if request.param == "sync" else async_drive
