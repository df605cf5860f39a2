"""The Provider's side of the demo as processes: the configuration `pactmw serve` reads, the
server started and stopped in the working directory, and `pactmw` commands run there."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pactmw
from pactmw.brand_login import DevelopmentBrandLogin
from pactmw.demo._common import BOT_LOG_ENV, BRAND_ID, ISSUER, SCOPES, START_TIMEOUT, DemoFailed
from pactmw.demo._transcript import Transcript


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def config_toml(port: int, jwks_uri: str, login: DevelopmentBrandLogin) -> str:
    base = f"http://127.0.0.1:{port}"
    scopes = "\n".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in SCOPES.items())
    delegation = "\n".join(
        f"{key} = {json.dumps(value)}" for key, value in login.delegation_settings().items()
    )
    return f"""\
# Written by `pactmw demo` for `pactmw serve`.
base_url = "{base}"
audience = "{base}/a2a"
identity_scheme = "platformJwt"
# No `store` key: the embedded default, sqlite:///.pactmw/pactmw.db, relative to the
# directory pactmw serve runs in (this one).
# The personal agent's JWKS is served over plain http on 127.0.0.1 in this demo.
allow_http_jwks_on_loopback = true

[[agents]]
issuer = "{ISSUER}"
name = "Demo personal agent"
jwks_uri = "{jwks_uri}"

[brands.{BRAND_ID}]
name = "Acme Support"
description = "Order status for Acme customers."
handler = "pactmw.demo:demo_bot"

[[brands.{BRAND_ID}.skills]]
id = "orders"
name = "Orders"
description = "Where is my order, and when will it arrive."
tags = ["orders"]

# PACT Delegated: Acme's bot may act on the user's Acme account within the scopes they
# approve. The person signs in at Acme's own login (brand mode), which the demo runs.
# No signing_keys: a development key is generated once under .pactmw/keys/.
[brands.{BRAND_ID}.delegation]
{delegation}
interval = 1
tools = "pactmw.demo:demo_tools"

[brands.{BRAND_ID}.delegation.scopes]
{scopes}
"""


class Server(NamedTuple):
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a `python -m pactmw` run in the temporary directory."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", **extra)
    # Make sure this very pactmw is importable there even when it was found through a
    # relative PYTHONPATH.
    package_root = str(Path(pactmw.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def start_server(workdir: Path, config: Path, port: int, bot_log: Path) -> Server:
    """`python -m pactmw serve` in `workdir`, until it accepts connections."""
    log = workdir / "serve.log"
    env = child_env(**{BOT_LOG_ENV: str(bot_log)})
    argv = [
        sys.executable,
        "-m",
        "pactmw",
        "serve",
        "--config",
        config.name,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            argv, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DemoFailed(
                f"pactmw serve exited with {process.returncode} before listening:\n" + tail(log)
            )
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return Server(process, f"http://127.0.0.1:{port}", log)
        time.sleep(0.05)
    stop(process)
    raise DemoFailed(f"pactmw serve did not listen within {START_TIMEOUT:.0f} s:\n" + tail(log))


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return process.returncode


def tail(log: Path, lines: int = 20) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join("    | " + line for line in text.splitlines()[-lines:])


def bot_runs(bot_log: Path, message_id: str) -> int:
    try:
        lines = bot_log.read_text().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if line.endswith(" " + message_id))


def run_pactmw(t: Transcript, workdir: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m pactmw ARGUMENTS` in `workdir`; show it and its output."""
    t.note("$ pactmw " + " ".join(arguments))
    argv = [sys.executable, "-m", "pactmw", *arguments]
    try:
        result = subprocess.run(  # noqa: S603 - our own interpreter and arguments
            argv,
            cwd=workdir,
            env=child_env(),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=START_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise DemoFailed(f"pactmw {' '.join(arguments)} did not finish in time") from exc
    for line in result.stdout.splitlines():
        t.note("| " + line)
    for line in result.stderr.splitlines():
        t.note("| (stderr) " + line)
    if result.returncode != 0:
        t.note(f"exit status {result.returncode}")
    return result


__all__ = [
    "Server",
    "bot_runs",
    "child_env",
    "config_toml",
    "free_port",
    "run_pactmw",
    "start_server",
    "stop",
    "tail",
]
