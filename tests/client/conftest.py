"""Fixtures for the client tests: one personal agent, its JWKS over HTTP, one Provider."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pactmw.client import AgentCredentials, AgentSigner, JwksHost
from tests.client.support import Provided, StaticServer, run_provider
from tests.support.parties import AUDIENCE, ISSUER


@pytest.fixture(scope="session")
def signer() -> AgentSigner:
    return AgentSigner.generate(issuer=ISSUER, kid="pa-1")


@pytest.fixture(scope="session")
def jwks_host(signer: AgentSigner) -> Iterator[JwksHost]:
    with signer.serve_jwks() as host:
        yield host


@pytest.fixture(scope="session")
def provided(signer: AgentSigner, jwks_host: JwksHost) -> Iterator[Provided]:
    with run_provider(signer, jwks_host.url) as running:
        yield running


@pytest.fixture
def me(signer: AgentSigner) -> AgentCredentials:
    """A fresh user of the personal agent, so no two tests share conversations or grants."""
    return signer.for_user(f"user-{uuid.uuid4().hex[:10]}", AUDIENCE)


@pytest.fixture
def static() -> Iterator[StaticServer]:
    server = StaticServer()
    yield server
    server.close()
