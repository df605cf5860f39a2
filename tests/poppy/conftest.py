"""Poppy test fixtures: a personal agent made with the SDK's own `AgentIdentity`, its
metadata and keys served over real TLS on 127.0.0.1 (a trustme CA, `connect_to`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
from personal_agent_protocol.demo.kit import AgentIdentity

from pactmw.core.client_metadata import ClientMetadataCache
from tests.support.jwks_server import JwksServer
from tests.support.pg import postgres_server_fixture
from tests.support.tls import TestCA

AGENT_DOMAIN = "agent.example"
STRANGER_DOMAIN = "stranger.example"

postgres_server = postgres_server_fixture(scope="session")


def sdk_fixture(name: str) -> Any:
    """A JSON fixture shipped in the SDK's wheel (`protocol/fixtures/...`)."""
    root = resources.files("personal_agent_protocol") / "protocol" / "fixtures"
    return json.loads((root / name).read_text(encoding="utf-8"))


def conformance_cases(suite: str, **match: Any) -> list[dict[str, Any]]:
    """The cases of one conformance suite whose members equal `match`."""
    cases: list[dict[str, Any]] = sdk_fixture(f"conformance/{suite}.json")["cases"]
    return [c for c in cases if all(c.get(k) == v for k, v in match.items())]


@pytest.fixture(scope="session")
def ca() -> TestCA:
    return TestCA()


@pytest.fixture(scope="session")
def agent() -> AgentIdentity:
    return AgentIdentity(domain=AGENT_DOMAIN, name="Atlas")


@pytest.fixture(scope="session")
def agent_site(ca: TestCA, agent: AgentIdentity) -> Iterator[JwksServer]:
    """The agent's website: `/agent.json` (its metadata) and `/jwks.json`."""
    context = ca.server_context(AGENT_DOMAIN, STRANGER_DOMAIN)
    with JwksServer(agent.jwks, jwks_path="/jwks.json", server_context=context) as server:
        server.set_json(agent.path, agent.metadata)
        yield server


@pytest.fixture
def clients(ca: TestCA, agent_site: JwksServer) -> ClientMetadataCache:
    policy = ca.policy(agent_site.port, AGENT_DOMAIN, STRANGER_DOMAIN, timeout=3.0)
    return ClientMetadataCache(policy)
