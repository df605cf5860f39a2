"""Fixtures for the store tests: a session PostgreSQL server and its DSN."""

from __future__ import annotations

import pytest

try:
    from tests.pg import PostgresServer, postgres_server_fixture
except ModuleNotFoundError:
    # Plain `pytest` (not `python -m pytest`) without a tests/__init__.py puts tests/ itself,
    # not the project root, on sys.path.
    from pg import PostgresServer, postgres_server_fixture  # type: ignore[no-redef,import-not-found]

# Started on first use only, so memory/sqlite-only runs (-k) never start PostgreSQL.
postgres_server = postgres_server_fixture(scope="session")


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """DSN of the session's shared test database (`pactmw_test`)."""
    return postgres_server.dsn
