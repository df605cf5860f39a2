"""Real servers for the adapter tests, each with its own verifier and its own JWKS URIs.

Six servers run the same cases (see `SERVER_NAMES`): Starlette behind the pure ASGI middleware
and behind Starlette's `AuthenticationMiddleware` (both on uvicorn in a thread), a plain WSGI
app and a Flask app (both on Werkzeug in a thread), and one Django project run by
`manage.py runserver` (WSGI) and by uvicorn (ASGI), each in its own process.

Every server gets its own copy of the agent registry (`pactmw_config`), whose JWKS URIs are
paths on one shared `JwksServer` namespaced by the server's name, so hit counts are exact per
server and per agent. The JWKS downtime cases get a `JwksServer` per server (downtime stops a
whole listener); the timeout case shares one server that never answers in time.

Servers start lazily, once per module, and are warmed at start: the `main`, `rotating` and
`cached` agents each make one successful request, so their keys are cached from then on and
`Target.warmed_at` says when the rotation test may rely on the 30 s refetch cooldown being over.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.config import Settings
from tests.adapters import apps
from tests.adapters.commands import CHECKOUT_ENV
from tests.adapters.tokens import AgentKey, claims, jwks
from tests.support.jwks_server import JwksServer, Mode
from tests.support.net import loopback_client
from tests.support.parties import AUDIENCE
from tests.support.servers import (
    django_server,
    uvicorn_server,
    werkzeug_server,
)

SERVER_NAMES = (
    "starlette-middleware",
    "starlette-auth-backend",
    "wsgi",
    "flask",
    "django-wsgi",
    "django-asgi",
)

#: The JWKS fetch timeout every server is configured with (seconds).
JWKS_TIMEOUT = 1.0

# One issuer per role; each server registers all of them (with its own JWKS URIs).
ISS_MAIN = "https://pa.example"  # ES256 + RS256 (+ an Ed25519 key, published but never valid)
ISS_DISABLED = "https://pa.example/disabled-pa"  # same JWKS as main, enabled = False
ISS_FRESH = "https://pa.example/fresh"  # same keys, a URI only refused-alg tokens name
ISS_OTHER = "https://other-pa.example"  # a different agent with its own key
ISS_ROTATING = "https://pa.example/rotating"  # rotates from rot-1 to rot-2 (last test)
ISS_FLOOD = "https://pa.example/flood"  # receives the unknown-kid flood
ISS_CACHED = "https://pa.example/cached"  # on the per-server JWKS server that goes down
ISS_COLD = "https://pa.example/cold"  # same down server, never fetched before
ISS_HANG = "https://pa.example/hang"  # on the JWKS server that never answers in time


@dataclass(frozen=True)
class AgentKeys:
    es: AgentKey
    rs: AgentKey
    ed: AgentKey
    other: AgentKey
    rot1: AgentKey
    rot2: AgentKey

    def main_jwks(self) -> dict[str, Any]:
        return jwks(self.es, self.rs, self.ed)


@dataclass
class Target:
    """A server under test and the hooks that tell the cases how it differs from the others."""

    name: str
    base_url: str
    client: httpx.Client
    keys_server: JwksServer
    down_server: JwksServer
    slow_server: JwksServer
    #: The route under the guarded prefix `/a2a/` (guarded by middleware, or by a decorator
    #: for the `AuthenticationMiddleware` server, which has no prefix of its own).
    protected: str = "/a2a/echo"
    public: str = "/public"
    #: Routes outside the prefix that only the adapter's decorator protects.
    decorated: tuple[str, ...] = ("/decorated",)
    #: Whether a refusal is answered while the request body is still arriving. Django's
    #: ASGI handler buffers the whole body before any middleware runs, so it is False there.
    answers_before_body: bool = True
    #: Framework-specific assertions on a successful echo (`request.user`, ...).
    check_echo: Callable[[httpx.Response], None] = lambda response: None
    #: Assertions on every response of this server (Django: the middleware's mode).
    check_response: Callable[[httpx.Response], None] = lambda response: None
    warmed_at: float = field(default=0.0)

    @property
    def all_protected(self) -> tuple[str, ...]:
        return (self.protected, *self.decorated)

    def jwks_path(self, role: str) -> str:
        """The path of this server's JWKS for `role` on the shared keys server."""
        return f"/{self.name}/{role}.json"

    def hang_path(self) -> str:
        return f"/{self.name}/hang.json"

    def get(self, path: str, token: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self.client.get(path, headers=headers, **kwargs)

    def post(self, path: str, body: bytes, token: str | None = None) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self.client.post(path, content=body, headers=headers)


def pactmw_config(
    name: str, keys_server: JwksServer, down_server: JwksServer, slow_server: JwksServer
) -> dict[str, Any]:
    """The `PACTMW` settings dict of server `name` (the same shape for every framework)."""

    def uri(role: str) -> str:
        return keys_server.url_for(f"/{name}/{role}.json")

    return {
        "audience": AUDIENCE,
        "allow_http_jwks_on_loopback": True,
        "jwks_timeout": JWKS_TIMEOUT,
        "protect_prefix": "/a2a/",
        "agents": [
            {"issuer": ISS_MAIN, "name": "Demo PA", "jwks_uri": uri("main")},
            {"issuer": ISS_DISABLED, "jwks_uri": uri("main"), "enabled": False},
            {"issuer": ISS_FRESH, "jwks_uri": uri("fresh")},
            {"issuer": ISS_OTHER, "jwks_uri": uri("other")},
            {"issuer": ISS_ROTATING, "jwks_uri": uri("rotating")},
            {"issuer": ISS_FLOOD, "jwks_uri": uri("flood")},
            {"issuer": ISS_CACHED, "jwks_uri": down_server.url_for("/cached.json")},
            {"issuer": ISS_COLD, "jwks_uri": down_server.url_for("/cold.json")},
            {"issuer": ISS_HANG, "jwks_uri": slow_server.url_for(f"/{name}/hang.json")},
        ],
    }


def _check_starlette_echo(response: httpx.Response) -> None:
    body = response.json()
    assert body["is_authenticated"] is True
    assert "personal_agent" in body["scopes"]
    assert "authenticated" in body["scopes"]
    assert body["display_name"] == body["actor_id"]


def _django_checks(
    mode: str, request_class: str
) -> tuple[Callable[[httpx.Response], None], Callable[[httpx.Response], None]]:
    def check_response(response: httpx.Response) -> None:
        assert response.headers.get("x-pactmw-mode") == mode, dict(response.headers)

    def check_echo(response: httpx.Response) -> None:
        assert response.json()["request_class"] == request_class

    return check_echo, check_response


class Harness:
    """Starts each server on first use and stops them all at the end of the module."""

    def __init__(
        self,
        keys: AgentKeys,
        keys_server: JwksServer,
        slow_server: JwksServer,
        workdir: Path,
    ) -> None:
        self.keys = keys
        self.keys_server = keys_server
        self.slow_server = slow_server
        self.workdir = workdir
        self.stack = contextlib.ExitStack()
        self.targets: dict[str, Target] = {}

    def close(self) -> None:
        self.stack.close()

    def get(self, name: str) -> Target:
        if name not in self.targets:
            self.targets[name] = self._start(name)
        return self.targets[name]

    def _start(self, name: str) -> Target:
        main = self.keys.main_jwks()
        for role, document in {
            "main": main,
            "fresh": main,
            "flood": main,
            "other": jwks(self.keys.other),
            "rotating": jwks(self.keys.rot1),
        }.items():
            self.keys_server.set_json(f"/{name}/{role}.json", document)
        self.slow_server.set_json(f"/{name}/hang.json", main)
        down = self.stack.enter_context(JwksServer(keys=main))
        down.set_json("/cached.json", main)
        down.set_json("/cold.json", main)
        config = pactmw_config(name, self.keys_server, down, self.slow_server)

        extra: dict[str, Any] = {}
        if name.startswith("starlette"):
            verifier = Settings.from_mapping(config).build_verifier()
            build = (
                apps.starlette_middleware_app
                if name == "starlette-middleware"
                else apps.starlette_auth_backend_app
            )
            base_url = self.stack.enter_context(uvicorn_server(build(verifier)))
            extra["check_echo"] = _check_starlette_echo
        elif name == "wsgi":
            verifier = Settings.from_mapping(config).build_verifier()
            base_url = self.stack.enter_context(werkzeug_server(apps.wsgi_app(verifier)))
        elif name == "flask":
            base_url = self.stack.enter_context(werkzeug_server(apps.flask_app(config)))
        else:
            base_url = self._start_django(name, config)
            mode, request_class = (
                ("sync", "WSGIRequest") if name == "django-wsgi" else ("async", "ASGIRequest")
            )
            extra["check_echo"], extra["check_response"] = _django_checks(mode, request_class)
            extra["decorated"] = ("/decorated-sync", "/decorated-async")
            extra["answers_before_body"] = name == "django-wsgi"

        client = self.stack.enter_context(loopback_client(base_url=base_url, timeout=15.0))
        target = Target(
            name=name,
            base_url=base_url,
            client=client,
            keys_server=self.keys_server,
            down_server=down,
            slow_server=self.slow_server,
            **extra,
        )
        self._warm(target)
        return target

    def _start_django(self, name: str, config: dict[str, Any]) -> str:
        server = django_server(
            config,
            asgi=name != "django-wsgi",
            settings="pactmw_testsite.settings",
            workdir=self.workdir,
            name=name,
            extra_env=CHECKOUT_ENV,
        )
        return self.stack.enter_context(server)

    def _warm(self, target: Target) -> None:
        """One good request per agent whose keys later cases rely on being cached."""
        for issuer, key in (
            (ISS_MAIN, self.keys.es),
            (ISS_ROTATING, self.keys.rot1),
            (ISS_CACHED, self.keys.es),
        ):
            response = target.get(target.protected, key.sign(claims(issuer)))
            assert response.status_code == 200, (target.name, issuer, response.text[:300])
        assert self.keys_server.hits[target.jwks_path("rotating")] == 1
        target.warmed_at = time.monotonic()


@pytest.fixture(scope="module")
def agent_keys() -> AgentKeys:
    return AgentKeys(
        es=AgentKey.generate("ES256", "es-1"),
        rs=AgentKey.generate("RS256", "rs-1"),
        ed=AgentKey.generate("EdDSA", "ed-1"),
        other=AgentKey.generate("ES256", "other-1"),
        rot1=AgentKey.generate("ES256", "rot-1"),
        rot2=AgentKey.generate("RS256", "rot-2"),
    )


@pytest.fixture(scope="module")
def keys_server() -> Iterator[JwksServer]:
    with JwksServer() as server:
        yield server


@pytest.fixture(scope="module")
def slow_server() -> Iterator[JwksServer]:
    """Accepts connections but answers only after far longer than `JWKS_TIMEOUT`."""
    with JwksServer() as server:
        server.delay = 60.0
        server.mode = Mode.SLOW
        yield server


@pytest.fixture(scope="module")
def harness(
    agent_keys: AgentKeys,
    keys_server: JwksServer,
    slow_server: JwksServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Harness]:
    harness = Harness(agent_keys, keys_server, slow_server, tmp_path_factory.mktemp("adapters"))
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture(params=SERVER_NAMES)
def target(request: pytest.FixtureRequest, harness: Harness) -> Target:
    """The server under test (function-scoped, so tests run in file order for every server)."""
    name: str = request.param
    return harness.get(name)
