"""A `PersonalAgentMiddleware` given a wrong argument stops a Starlette or FastAPI app at
startup, naming the argument, on a real uvicorn in its own process.

Starlette builds `Middleware(...)` and `add_middleware(...)` entries on the app's first call,
so the middleware's `ConfigError` (or the `TypeError` of a keyword it does not take) used to
be raised there: under `--lifespan on` uvicorn refused to start, but under its default
`--lifespan auto` it took the error for an app without lifespan, started anyway, and every
request was a 500. Now the middleware Starlette builds answers the startup with
`lifespan.startup.failed` naming the argument, so uvicorn exits under `auto` as under `on`;
under a server that runs no lifespan (`--lifespan off`) every request is a 503 with a clear
body (never a 500), a WebSocket is closed with 1011, and the cause is logged once at ERROR.
Wrapping the app directly (`PersonalAgentMiddleware(app, ...)`) still raises at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import websockets.sync.client
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.testclient import TestClient
from websockets.exceptions import ConnectionClosedError

from pactmw.adapters.asgi import A2AProviderApp, PersonalAgentMiddleware
from pactmw.config import ConfigError
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier
from pactmw.provider import Provider
from pactmw.store import open_store
from tests.support.net import free_port
from tests.support.parties import AUDIENCE
from tests.support.servers import REPO, process_server

pytestmark = pytest.mark.timeout(180)

#: The factories of `tests.adapters.misconfigured_asgi` that Starlette builds lazily.
LAZY = [
    "starlette_middleware",
    "starlette_add_middleware",
    "fastapi_middleware",
    "fastapi_add_middleware",
]
#: Those that wrap the app directly: the middleware is built (and refused) at once.
WRAPPED = ["starlette_wrapped", "fastapi_wrapped"]

#: What each mistake is reported as: the argument named, and for a keyword the class does
#: not take, the class the app wrote (it used to be `GuardedMiddleware.__init__()`, an internal
#: base class the app never names).
SAID = {
    "path_prefix": "path_prefix must be a path starting with '/' (got 'a2a')",
    "unknown": "PersonalAgentMiddleware() got an unexpected keyword argument 'prefix'",
}

#: The 503's body: says the server is misconfigured, names where to look, never the value.
UNAVAILABLE = {
    "error": "temporarily_unavailable",
    "error_description": (
        "This server cannot serve requests: its PersonalAgentMiddleware was given a wrong "
        "argument (the server's log says which)"
    ),
}

#: The bound of a server that should exit: a hang check, far above its startup time.
BOUND = 60.0


def _argv(factory: str, lifespan: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        f"tests.adapters.misconfigured_asgi:{factory}",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--lifespan",
        lifespan,
    ]


def _env(mistake: str) -> dict[str, str]:
    """The server's environment: this checkout's sources first, and the mistake to make."""
    path = os.pathsep.join(p for p in (str(REPO / "src"), str(REPO)) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "MISCONFIGURED": mistake}


def _listens(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _start(factory: str, lifespan: str, mistake: str, log: Path) -> tuple[int | None, str]:
    """Start uvicorn on the app; (its exit status, its output) once it exits, or (None, its
    output) when it listens instead (stopped then). A server that does neither within
    `BOUND` seconds fails the test: a hang check, not a timing."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            _argv(factory, lifespan, port),
            cwd=REPO,
            env=_env(mistake),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + BOUND
            while process.poll() is None and not _listens(port):
                if time.monotonic() > deadline:
                    raise AssertionError(f"uvicorn neither listens nor exits: {log.read_text()}")
                time.sleep(0.05)
            status = process.poll()
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
    return status, log.read_text(errors="replace")


@pytest.mark.parametrize("lifespan", ["auto", "on"])
@pytest.mark.parametrize("factory", LAZY + WRAPPED)
def test_a_wrong_argument_stops_the_server_naming_it(
    tmp_path: Path, factory: str, lifespan: str
) -> None:
    status, said = _start(factory, lifespan, "path_prefix", tmp_path / "uvicorn.log")
    assert status not in (None, 0), f"uvicorn started: {said}"
    assert SAID["path_prefix"] in said, said


@pytest.mark.parametrize("factory", ["starlette_middleware", "fastapi_add_middleware"])
def test_a_keyword_the_middleware_does_not_take_stops_the_server_naming_it(
    tmp_path: Path, factory: str
) -> None:
    status, said = _start(factory, "auto", "unknown", tmp_path / "uvicorn.log")
    assert status not in (None, 0), f"uvicorn started: {said}"
    assert SAID["unknown"] in said, said
    assert "GuardedMiddleware" not in said, said


@pytest.mark.parametrize(
    ("factory", "mistake"),
    [(factory, "path_prefix") for factory in LAZY] + [("fastapi_middleware", "unknown")],
)
def test_without_lifespan_every_request_is_a_503_and_the_cause_is_logged_once(
    tmp_path: Path, factory: str, mistake: str
) -> None:
    port = free_port()
    log = tmp_path / "uvicorn.log"
    argv = _argv(factory, "off", port)
    with process_server(argv, port, env={"MISCONFIGURED": mistake}, log=log):
        base = f"http://127.0.0.1:{port}"
        for path in ("/public", "/a2a/anything", "/public"):
            answer = httpx.get(base + path, timeout=30)
            assert answer.status_code == 503, (answer.status_code, answer.text[:300])
            assert answer.json() == UNAVAILABLE
        socket_url = f"ws://127.0.0.1:{port}/ws"
        with (
            websockets.sync.client.connect(socket_url, open_timeout=30) as ws,
            pytest.raises(ConnectionClosedError) as closed,
        ):
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1011
        assert httpx.get(base + "/public", timeout=30).status_code == 503
    said = log.read_text(errors="replace")
    assert said.count(SAID[mistake]) == 1, said
    assert "500 Internal Server Error" not in said
    assert "Traceback" not in said


def test_starlettes_test_client_refuses_to_start_the_app() -> None:
    verifier = IdentityVerifier(audience=AUDIENCE, registry=AgentRegistry([]))
    middleware = Middleware(PersonalAgentMiddleware, verifier=verifier, path_prefix="a2a")
    app = Starlette(middleware=[middleware])
    with pytest.raises(ConfigError) as caught, TestClient(app):
        pass
    assert str(caught.value) == SAID["path_prefix"]


def test_wrapping_the_app_directly_raises_at_once() -> None:
    verifier = IdentityVerifier(audience=AUDIENCE, registry=AgentRegistry([]))
    with pytest.raises(ConfigError) as caught:
        PersonalAgentMiddleware(Starlette(), verifier, path_prefix="a2a")
    assert str(caught.value) == SAID["path_prefix"]


def test_a_keyword_it_does_not_take_names_the_class_written() -> None:
    verifier = IdentityVerifier(audience=AUDIENCE, registry=AgentRegistry([]))
    with pytest.raises(TypeError) as caught:
        PersonalAgentMiddleware(Starlette(), verifier, prefix="/a2a/")  # type: ignore[call-arg]
    assert str(caught.value) == SAID["unknown"]
    provider = Provider(
        base_url="https://provider.example",
        verifier=verifier,
        store=open_store("memory://"),
        brands=(),
    )
    try:
        with pytest.raises(TypeError) as caught:
            A2AProviderApp(provider, mount="/a2a")  # type: ignore[call-arg]
    finally:
        provider.close()
    assert str(caught.value) == "A2AProviderApp() got an unexpected keyword argument 'mount'"
    with pytest.raises(TypeError) as caught:
        PersonalAgentMiddleware(Starlette())  # type: ignore[call-arg]
    assert str(caught.value) == (
        "PersonalAgentMiddleware() missing 1 required positional argument: 'verifier'"
    )
