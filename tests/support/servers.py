"""Real servers on 127.0.0.1 for tests: uvicorn and Werkzeug in threads, anything in a process.

Every helper binds a free port, waits (bounded) until the server accepts connections and
stops it on exit, so tests talk real HTTP to real servers. `serve_argv` and `django_argv` are
the command lines of `pactmw serve` and of the Django test site (`django_server` runs it);
`wait_until_ok` waits until a URL answers 200.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from werkzeug.serving import make_server

from tests.support.net import free_port, wait_for_port

REPO = Path(__file__).resolve().parents[2]
DJANGO_PROJECT = REPO / "tests" / "adapters" / "django_project"

__all__ = [
    "DJANGO_PROJECT",
    "REPO",
    "django_argv",
    "django_server",
    "process_server",
    "serve_argv",
    "uvicorn_server",
    "wait_until_ok",
    "werkzeug_server",
]


@contextlib.contextmanager
def uvicorn_server(app: Any, port: int | None = None, **options: Any) -> Iterator[str]:
    """Run an ASGI app on uvicorn in a thread; yield its base URL.

    `options` go to `uvicorn.Config` as they are (e.g. `h11_max_incomplete_event_size`).
    """
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def werkzeug_server(app: Any, port: int | None = None) -> Iterator[str]:
    """Run a WSGI app on Werkzeug's threaded server in a thread; yield its base URL."""
    server = make_server("127.0.0.1", port or free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@contextlib.contextmanager
def process_server(
    argv: Sequence[str],
    port: int,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    log: Path | None = None,
    timeout: float = 60.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server command in its own process until it listens on `port`; yield the process.

    Output goes to `log` (a file), so a failing test can show what the server said.
    """
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    # The checkout's own `src` first: a server runs the code under test, not whichever
    # pactmw the interpreter has installed (an editable install of another checkout).
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "src"), str(REPO), full_env.get("PYTHONPATH", "")) if p
    )
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        list(argv), cwd=cwd, env=full_env, stdout=out, stderr=subprocess.STDOUT
    )
    try:
        try:
            wait_for_port(port, timeout, process)
        except Exception:
            if log is not None:
                sys.stderr.write(Path(log).read_text(errors="replace")[-4000:])
            raise
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if log is not None:
            out.close()  # type: ignore[union-attr]


def wait_until_ok(url: str, timeout: float = 60.0) -> None:
    """Wait until a GET of `url` answers 200 (Django and Flask build a Provider lazily, so
    listening is not yet serving); fail after `timeout` seconds with the last answer."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=5)
            if response.status_code == 200:
                return
            last = response.status_code
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout} s: {last!r}")


def serve_argv(config: Path, port: int) -> list[str]:
    """`pactmw serve` of `config` on 127.0.0.1:`port`, with this interpreter."""
    return [
        sys.executable,
        "-m",
        "pactmw",
        "serve",
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def django_argv(port: int, *, asgi: bool) -> list[str]:
    """The command that serves the Django test site on `port`: `runserver` (WSGI) or uvicorn
    (ASGI); run it with `process_server` and `DJANGO_PROJECT` on PYTHONPATH."""
    if not asgi:
        return [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"]
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "pactmw_testsite.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--lifespan",
        "off",
        "--log-level",
        "warning",
    ]


@contextlib.contextmanager
def django_server(
    config: Mapping[str, Any],
    *,
    asgi: bool,
    settings: str,
    workdir: Path,
    name: str,
    extra_env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> Iterator[str]:
    """Serve the Django test site with `settings` (a module of pactmw_testsite) and `config`
    (written to `workdir/NAME.json` for the site to read); yield its base URL. `extra_env`
    adds environment variables a settings module reads; `port` is the one to listen on (a
    free one when None), for a `config` whose `base_url` must name it.

    The server's output goes to `workdir/NAME.log`.
    """
    config_file = workdir / f"{name}.json"
    config_file.write_text(json.dumps(config))
    env = {
        "DJANGO_SETTINGS_MODULE": settings,
        "PYTHONPATH": str(DJANGO_PROJECT),
        "PACTMW_TEST_CONFIG": str(config_file),
        **(extra_env or {}),
    }
    port = port or free_port()
    with process_server(django_argv(port, asgi=asgi), port, env=env, log=workdir / f"{name}.log"):
        yield f"http://127.0.0.1:{port}"
