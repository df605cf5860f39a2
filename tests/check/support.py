"""What the `pactmw check` tests share: the personal agent made by `pactmw keygen`, Provider
configurations, Providers (in this process or as `pactmw serve`), and running the checker as a
user runs it (a subprocess, real files, real ports)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.core.jwk import PrivateJWK, import_private_jwk
from pactmw.provider import Provider, ProviderSettings
from pactmw.store.base import Store
from tests.support.agent import identity_token
from tests.support.net import free_port
from tests.support.servers import REPO, process_server, uvicorn_server, wait_until_ok
from tests.support.toml import toml_value

PYTHON_M = (sys.executable, "-m", "pactmw")
AUDIENCE = "urn:pactmw:check:provider"
BRANDS = ("acme", "globex")
SUMMARY = re.compile(r"(\d+) passed, (\d+) failed")


def run_pactmw(
    *arguments: str, cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m pactmw ARGUMENTS` to completion, output as text."""
    return subprocess.run(
        [*PYTHON_M, *arguments],
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


@dataclass(frozen=True)
class Agent:
    """The test personal agent: its files from `pactmw keygen` and where its JWKS is served."""

    key_file: Path
    jwks_file: Path
    issuer: str
    jwks_uri: str

    @property
    def key(self) -> PrivateJWK:
        return import_private_jwk(self.key_file.read_text())

    def token(self, sub: str = "user-1", **overrides: Any) -> str:
        return identity_token(self.key, self.issuer, AUDIENCE, sub=sub, **overrides)

    def check_args(self, card_url: str, *extra: str) -> list[str]:
        return [
            "check",
            card_url,
            "--issuer",
            self.issuer,
            "--key",
            str(self.key_file),
            "--audience",
            AUDIENCE,
            *extra,
        ]


def check(agent: Agent, card_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`pactmw check` as a user runs it."""
    return run_pactmw(*agent.check_args(card_url, *extra))


@dataclass(frozen=True)
class Outcome:
    """A `pactmw check --json` run: which checks passed and failed, and the exit status."""

    returncode: int
    passed: list[str]
    failed: dict[str, dict[str, Any]]
    document: dict[str, Any]


def check_json(agent: Agent, card_url: str, *extra: str) -> Outcome:
    result = check(agent, card_url, "--json", *extra)
    assert result.returncode in (0, 1), result.stderr
    document = json.loads(result.stdout)
    checks = document["checks"]
    assert document["passed"] + document["failed"] == document["total"] == len(checks)
    assert {"name", "passed", "expected", "actual"} == set(checks[0])
    return Outcome(
        returncode=result.returncode,
        passed=[c["name"] for c in checks if c["passed"]],
        failed={c["name"]: c for c in checks if not c["passed"]},
        document=document,
    )


def text_lines(stdout: str) -> tuple[list[str], str]:
    """The check lines and the summary line of a text run; checks the output's shape."""
    lines = stdout.splitlines()
    assert lines, "no output"
    summary = lines[-1]
    assert SUMMARY.fullmatch(summary), summary
    checks = lines[:-1]
    for line in checks:
        assert re.match(r"(PASS|FAIL)  \S", line), line
    return checks, summary


# -- Provider configurations -----------------------------------------------------------------------


def provider_toml(
    *,
    base_url: str,
    agent: Agent,
    handler: str,
    store: str = "memory://",
    brands: Sequence[str] = BRANDS,
    delegation: Mapping[str, Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """A Provider configuration: the agent, its disabled twin `{issuer}/disabled-pa`, and
    `brands` answered by `handler`; `delegation` adds `[brands.ID.delegation]` tables."""
    top: dict[str, Any] = {
        "base_url": base_url,
        "audience": AUDIENCE,
        "allow_http_jwks_on_loopback": True,
        "store": store,
        "organization": "pactmw check tests",
        **(extra or {}),
    }
    lines = [f"{key} = {toml_value(value)}" for key, value in top.items()]
    for table in (
        {"issuer": agent.issuer, "name": "Check agent", "jwks_uri": agent.jwks_uri},
        {"issuer": f"{agent.issuer}/disabled-pa", "jwks_uri": agent.jwks_uri, "enabled": False},
    ):
        lines += ["", "[[agents]]", *(f"{k} = {toml_value(v)}" for k, v in table.items())]
    for brand in brands:
        lines += ["", f"[brands.{brand}]", f"name = {toml_value(brand.title() + ' Support')}"]
        lines.append(f"handler = {toml_value(handler)}")
        if delegation and brand in delegation:
            lines += ["", f"[brands.{brand}.delegation]"]
            lines += [f"{k} = {toml_value(v)}" for k, v in delegation[brand].items()]
    return "\n".join(lines) + "\n"


def card_url(base_url: str, brand: str = "acme") -> str:
    return f"{base_url}/a2a/{brand}/.well-known/agent-card.json"


@contextlib.contextmanager
def in_process_provider(
    directory: Path,
    agent: Agent,
    *,
    handler: str = "pactmw.demo:demo_bot",
    store: Store | None = None,
    wrap: Any = None,
    delegation: Mapping[str, Mapping[str, Any]] | None = None,
    port: int | None = None,
    public_url: str | None = None,
) -> Iterator[str]:
    """Our Starlette app (`A2AProviderApp`) on uvicorn in this process; `wrap(app)` puts a
    middleware around it, `store` replaces the memory store, `public_url` is its `base_url`
    when not where it listens. Yields the base URL it listens on."""
    from pactmw.provider import load_toml

    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    config = directory / "pactmw.toml"
    config.write_text(
        provider_toml(
            base_url=public_url or base_url,
            agent=agent,
            handler=handler,
            delegation=delegation,
            extra={"data_dir": str(directory / ".pactmw")},
        )
    )
    settings = ProviderSettings.from_mapping(load_toml(str(config)))
    provider = Provider.from_settings(settings, store=store)
    app: Any = A2AProviderApp(provider)
    if wrap is not None:
        app = wrap(app)
    try:
        with uvicorn_server(app, port=port):
            wait_until_ok(card_url(base_url))
            yield base_url
    finally:
        provider.close()


@contextlib.contextmanager
def served_provider(
    directory: Path,
    agent: Agent,
    argv: Any,
    *,
    handler: str,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """A Provider in its own process: `argv(config, port)` is its command line. Yields the
    base URL once its card answers."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    config = directory / "pactmw.toml"
    config.write_text(
        provider_toml(
            base_url=base_url,
            agent=agent,
            handler=handler,
            store=f"sqlite:///{directory / 'pactmw.db'}",
        )
    )
    log = directory / "server.log"
    full_env = {"PACTMW_CONFIG": str(config), **(env or {})}
    with process_server(argv(config, port), port, env=full_env, log=log):
        try:
            wait_until_ok(card_url(base_url))
        except TimeoutError:
            sys.stderr.write(log.read_text(errors="replace")[-4000:])
            raise
        yield base_url
