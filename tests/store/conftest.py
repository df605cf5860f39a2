"""Fixtures for the store tests: the backends under test and a session PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pactmw.store import Store
from tests.store.support import ALL_BACKENDS, PERSISTENT, Backend, open_backend
from tests.support.pg import PostgresServer, postgres_server_fixture

# Started on first use only, so memory/sqlite-only runs (-k) never start PostgreSQL.
postgres_server = postgres_server_fixture(scope="session")


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """DSN of the session's shared test database (`pactmw_test`)."""
    return postgres_server.dsn


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from open_backend(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def persistent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backends that keep their own schema (pactmw_schema and MIGRATIONS)."""
    yield from open_backend(request.param, request, tmp_path)


@pytest.fixture(params=PERSISTENT)
def reopenable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backends whose data another `open()` (another handle, process or machine) sees."""
    yield from open_backend(request.param, request, tmp_path)


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    s = backend.open()
    yield s
    s.close()
