"""The test personal agent, made the way a user makes one: `pactmw keygen` writes the private
JWK and the public JWKS; a real JWKS server publishes the JWKS file at the agent's origin."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.check.support import Agent, run_pactmw
from tests.support.jwks_server import JwksServer


@pytest.fixture(scope="session")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    directory = tmp_path_factory.mktemp("agent")
    key_file, jwks_file = directory / "agent.jwk", directory / "jwks.json"
    made = run_pactmw(
        "keygen", "--alg", "ES256", "--kid", "check-agent-1",
        "--out", str(key_file), "--jwks", str(jwks_file),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    with JwksServer(keys=json.loads(jwks_file.read_text())) as server:
        yield Agent(key_file, jwks_file, issuer=server.base_url, jwks_uri=server.url)
