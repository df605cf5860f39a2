"""Real Providers for the conformance suite: one per framework, each on its own port and store.

Targets (every test that takes `target` or `wire` runs against each):

* `starlette`: `A2AProviderApp` on uvicorn, in this process;
* `cli`: `python -m pactmw serve --config FILE` (when `src/pactmw/cli` exists);
* `flask`: `python examples/flask_app/app.py --port N` with `PACTMW_CONFIG=FILE`;
* `django`: `python examples/django_app/manage.py runserver 127.0.0.1:N --noreload` with
  `PACTMW_CONFIG=FILE`.

The test personal agent's public key is served by a real JWKS server; the configuration
registers it (`issuer` = that server's origin) and a disabled agent `{issuer}/disabled-pa`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.provider import Provider, ProviderSettings, load_toml
from tests.conformance.bots import RUNS_ENV
from tests.conformance.helpers import (
    AUDIENCE,
    BRAND_TABLES,
    LIMITED_WINDOW,
    Target,
    TestPA,
    Wire,
)
from tests.support.jwks_server import JwksServer
from tests.support.net import free_port, loopback_client
from tests.support.servers import REPO, process_server, uvicorn_server, wait_until_ok
from tests.support.toml import toml_value

PA_KID = "conformance-pa-1"
HANDLER = "tests.conformance.bots:counting_bot"

TARGETS = ["starlette"]
if (REPO / "src" / "pactmw" / "cli").is_dir() or (REPO / "src" / "pactmw" / "cli.py").exists():
    TARGETS.append("cli")
TARGETS += ["flask", "django"]


# -- configuration ----------------------------------------------------------------------------


def _toml_table(lines: list[str], header: str, table: dict[str, Any]) -> None:
    lines.append(header)
    for key, value in table.items():
        if not (isinstance(value, list) and value and isinstance(value[0], dict)):
            lines.append(f"{key} = {toml_value(value)}")


def provider_config(
    *,
    port: int,
    pa: TestPA,
    store: Path,
    rate_limit: dict[str, Any] | None = None,
    max_body_bytes: int | None = None,
) -> str:
    """The TOML of one Provider: the test PA, the disabled PA, Brands `acme` and `globex`."""
    top: dict[str, Any] = {
        "base_url": f"http://127.0.0.1:{port}",
        "audience": AUDIENCE,
        "allow_http_jwks_on_loopback": True,
        "store": f"sqlite:///{store}",
        "organization": "Conformance Provider",
    }
    if max_body_bytes is not None:
        top["max_body_bytes"] = max_body_bytes
    lines = [f"{key} = {toml_value(value)}" for key, value in top.items()]
    for agent in (
        {"issuer": pa.issuer, "name": "conformance-pa", "jwks_uri": pa.jwks_uri},
        {"issuer": pa.second_issuer, "name": "second-pa", "jwks_uri": pa.jwks_uri},
        {
            "issuer": pa.disabled_issuer,
            "name": "disabled-pa",
            "jwks_uri": pa.jwks_uri,
            "enabled": False,
        },
    ):
        lines.append("")
        _toml_table(lines, "[[agents]]", agent)
    for brand_id, table in BRAND_TABLES.items():
        lines.append("")
        _toml_table(lines, f"[brands.{brand_id}]", {**table, "handler": HANDLER})
        for skill in table.get("skills", []):
            _toml_table(lines, f"[[brands.{brand_id}.skills]]", skill)
    if rate_limit:
        lines.append("")
        _toml_table(lines, "[rate_limit]", rate_limit)
    return "\n".join(lines) + "\n"


# -- servers ----------------------------------------------------------------------------------


def _argv(kind: str, config: Path, port: int) -> list[str]:
    if kind == "cli":
        return [sys.executable, "-m", "pactmw", "serve", "--config", str(config),
                "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    if kind == "flask":
        return [sys.executable, "examples/flask_app/app.py", "--port", str(port)]
    if kind == "django":
        return [sys.executable, "examples/django_app/manage.py", "runserver",
                f"127.0.0.1:{port}", "--noreload"]  # fmt: skip
    raise ValueError(kind)


@contextlib.contextmanager
def run_target(
    kind: str,
    directory: Path,
    pa: TestPA,
    runs_file: Path,
    **config: Any,
) -> Iterator[Target]:
    """Start one Provider of `kind` with its own config and sqlite store; yield the Target."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config_file = directory / "pactmw.toml"
    config_file.write_text(
        provider_config(port=port, pa=pa, store=directory / "pactmw.db", **config)
    )
    target = Target(kind, f"http://127.0.0.1:{port}", runs_file, config_file)
    if kind == "starlette":
        settings = ProviderSettings.from_mapping(load_toml(str(config_file)))
        provider = Provider.from_settings(settings)
        try:
            with uvicorn_server(A2AProviderApp(provider), port=port):
                wait_until_ok(target.card_url())
                yield target
        finally:
            provider.close()
        return
    target.log_file = directory / "server.log"
    env = {
        "PACTMW_CONFIG": str(config_file),
        RUNS_ENV: str(runs_file),
        "SHOP_DATABASE": str(directory / "shop.sqlite3"),
    }
    with process_server(_argv(kind, config_file, port), port, env=env, log=target.log_file):
        try:
            wait_until_ok(target.card_url())
        except TimeoutError:
            sys.stderr.write(target.log_tail())
            raise
        yield target


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pa_key() -> Any:
    return generate_private_jwk("ES256", kid=PA_KID)


@pytest.fixture(scope="session")
def jwks_server(pa_key: Any) -> Iterator[JwksServer]:
    with JwksServer(keys=public_key_set([pa_key]).to_dict()) as server:
        yield server


@pytest.fixture(scope="session")
def pa(pa_key: Any, jwks_server: JwksServer) -> TestPA:
    return TestPA(issuer=jwks_server.base_url, key=pa_key, jwks_uri=jwks_server.url)


@pytest.fixture(scope="session")
def runs_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bot's runs file, shared by every target (message ids are random UUIDs)."""
    path = tmp_path_factory.mktemp("runs") / "runs.tsv"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(RUNS_ENV, str(path))  # for the in-process (starlette) targets
        yield path


@pytest.fixture(scope="session", params=TARGETS)
def target(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pa: TestPA,
    runs_file: Path,
) -> Iterator[Target]:
    """A real Provider per framework, with the default limits."""
    directory = tmp_path_factory.mktemp(f"target-{request.param}")
    with run_target(request.param, directory, pa, runs_file) as running:
        yield running


@pytest.fixture(scope="session", params=TARGETS)
def per_agent_limited(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pa: TestPA,
    runs_file: Path,
) -> Iterator[Target]:
    """A dedicated Provider per framework with `[rate_limit] per_agent = 3` (1-day window)."""
    directory = tmp_path_factory.mktemp(f"limited-{request.param}")
    with run_target(
        request.param,
        directory,
        pa,
        runs_file,
        rate_limit={"per_agent": 3, "window": LIMITED_WINDOW},
    ) as running:
        yield running


@pytest.fixture(scope="session")
def per_user_limited(
    tmp_path_factory: pytest.TempPathFactory, pa: TestPA, runs_file: Path
) -> Iterator[Target]:
    """An in-process Provider with `[rate_limit] per_user = 2` (1-day window)."""
    directory = tmp_path_factory.mktemp("per-user-limited")
    with run_target(
        "starlette", directory, pa, runs_file, rate_limit={"per_user": 2, "window": LIMITED_WINDOW}
    ) as running:
        yield running


@pytest.fixture(scope="session")
def http() -> Iterator[httpx.Client]:
    with loopback_client(timeout=30) as client:
        yield client


@pytest.fixture
def wire(http: httpx.Client, target: Target, pa: TestPA) -> Wire:
    return Wire(http, target, pa)
