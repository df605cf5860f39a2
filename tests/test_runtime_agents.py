"""Agents added, blocked, allowed and removed at runtime with `pactmw agents`, seen by every
`pactmw serve` process on the store at its next request: two processes on one sqlite file,
and two on one PostgreSQL database (issue 14, "every process sees an add/block on its next
request"). The runtime agent's keys are served by a real JWKS server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from attrs import frozen

from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from tests.support.agent import identity_token, user_message
from tests.support.jwks_server import JwksServer
from tests.support.net import free_port
from tests.support.pg import postgres_server
from tests.support.servers import REPO, process_server, serve_argv

AUDIENCE = "pactmw-runtime-agents"
CONFIGURED = "https://configured.example"
RUNTIME = "https://runtime.example"


@frozen
class Deployment:
    """Two serving processes on one store, the TOML they share, and the agents' keys."""

    bases: tuple[str, str]
    config: Path
    configured_key: PrivateJWK
    runtime_key: PrivateJWK
    jwks: JwksServer

    def agents(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        action, *rest = arguments
        return subprocess.run(
            [sys.executable, "-m", "pactmw", "agents", action, "--config", str(self.config), *rest],
            cwd=REPO,  # the handler's import path resolves from here
            capture_output=True,
            text=True,
            timeout=60,
        )

    def send(self, base: str, key: PrivateJWK, issuer: str) -> int:
        token = identity_token(key, issuer, AUDIENCE, sub="user-1")
        response = httpx.post(
            f"{base}/a2a/acme/message:send",
            json={"message": user_message("Where is my order?")},
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
            timeout=30,
        )
        if response.status_code == 200:
            assert response.json()["message"]["role"] == "ROLE_AGENT"
        else:
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"] == 'Bearer realm="a2a"'
        return response.status_code

    def statuses(self, key: PrivateJWK, issuer: str) -> list[int]:
        """What each process answers the agent now (one request each)."""
        return [self.send(base, key, issuer) for base in self.bases]


def _inline(key: PrivateJWK) -> str:
    entries = ", ".join(f'{k} = "{v}"' for k, v in key.public.to_dict().items())
    return "{ keys = [ { " + entries + " } ] }"


@contextlib.contextmanager
def _deployment(store_url: str, workdir: Path) -> Iterator[Deployment]:
    configured_key = generate_private_jwk("ES256", kid="configured-1")
    runtime_key = generate_private_jwk("ES256", kid="runtime-1")
    ports = (free_port(), free_port())
    config = workdir / "pactmw.toml"
    config.write_text(
        f'base_url = "http://127.0.0.1:{ports[0]}"\n'
        f'audience = "{AUDIENCE}"\n'
        f'store = "{store_url}"\n'
        "allow_http_jwks_on_loopback = true\n"
        "[[agents]]\n"
        f'issuer = "{CONFIGURED}"\n'
        f"jwks = {_inline(configured_key)}\n"
        "[brands.acme]\n"
        'handler = "examples.bots:order_bot"\n'
    )
    with (
        JwksServer(public_key_set([runtime_key])) as jwks,
        process_server(serve_argv(config, ports[0]), ports[0], log=workdir / "a.log"),
        process_server(serve_argv(config, ports[1]), ports[1], log=workdir / "b.log"),
    ):
        yield Deployment(
            (f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}"),
            config,
            configured_key,
            runtime_key,
            jwks,
        )


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    workdir = tmp_path_factory.mktemp(f"runtime-agents-{request.param}")
    if request.param == "sqlite":
        db = workdir / "state" / "pactmw.db"
        db.parent.mkdir()
        # The serving processes create the database; the commands refuse a missing one.
        with _deployment(f"sqlite:///{db}", workdir) as started:
            yield started
    else:
        with postgres_server() as pg, _deployment(pg.create_database(), workdir) as started:
            yield started


def test_a_runtime_agent_is_accepted_blocked_allowed_and_removed_everywhere(
    deployment: Deployment,
) -> None:
    key = deployment.runtime_key
    assert deployment.statuses(key, RUNTIME) == [401, 401]  # unknown issuer
    assert deployment.jwks.total_hits == 0

    added = deployment.agents("add", RUNTIME, deployment.jwks.url, "--name", "Runtime PA")
    assert added.returncode == 0, added.stderr
    assert added.stdout == f"added {RUNTIME} (keys from {deployment.jwks.url})\n"
    assert deployment.statuses(key, RUNTIME) == [200, 200]
    assert deployment.jwks.hits[deployment.jwks.jwks_path] == 2  # one fetch per process

    blocked = deployment.agents("block", RUNTIME)
    assert (blocked.returncode, blocked.stdout) == (0, f"blocked {RUNTIME}\n")
    assert deployment.statuses(key, RUNTIME) == [401, 401]
    allowed = deployment.agents("allow", RUNTIME)
    assert (allowed.returncode, allowed.stdout) == (0, f"allowed {RUNTIME}\n")
    assert deployment.statuses(key, RUNTIME) == [200, 200]

    listed = json.loads(deployment.agents("list", "--json").stdout)
    assert [(a["issuer"], a["source"], a["status"], a["name"]) for a in listed] == [
        (CONFIGURED, "config", "allowed", ""),
        (RUNTIME, "runtime", "allowed", "Runtime PA"),
    ]

    removed = deployment.agents("remove", RUNTIME)
    assert (removed.returncode, removed.stdout) == (0, f"removed {RUNTIME}\n")
    assert deployment.statuses(key, RUNTIME) == [401, 401]
    assert deployment.jwks.hits[deployment.jwks.jwks_path] == 2  # refused before any fetch


def test_a_configured_agent_is_blocked_and_allowed_everywhere(deployment: Deployment) -> None:
    key = deployment.configured_key
    assert deployment.statuses(key, CONFIGURED) == [200, 200]
    assert deployment.agents("block", CONFIGURED).returncode == 0
    assert deployment.statuses(key, CONFIGURED) == [401, 401]
    again = deployment.agents("block", CONFIGURED)
    assert (again.returncode, again.stdout) == (0, f"{CONFIGURED} was already blocked\n")
    assert deployment.agents("allow", CONFIGURED).returncode == 0
    assert deployment.statuses(key, CONFIGURED) == [200, 200]
    # A configured agent is not the command's to remove.
    refused = deployment.agents("remove", CONFIGURED)
    assert refused.returncode == 1
    assert "nothing removed: https://configured.example is configured" in refused.stderr
    assert deployment.statuses(key, CONFIGURED) == [200, 200]
