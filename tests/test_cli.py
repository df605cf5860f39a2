"""The `pactmw` command as a user runs it: real processes, real files, real ports.

Both launchers are exercised: `python -m pactmw` and the `pactmw` console script of the venv.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from tests.jwks_server import JwksServer
from tests.servers import REPO, free_port, process_server

SCRIPT = Path(sys.executable).parent / "pactmw"
PYTHON_M = (sys.executable, "-m", "pactmw")
ISSUER = "https://pa.example"


def launchers() -> list[Any]:
    console = pytest.param(
        (str(SCRIPT),),
        id="console-script",
        marks=pytest.mark.skipif(not SCRIPT.exists(), reason="no pactmw console script"),
    )
    return [pytest.param(PYTHON_M, id="python-m"), console]


def run(
    argv: Sequence[str],
    *,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def token(key: PrivateJWK, *, sub: str, audience: str, issuer: str = ISSUER) -> str:
    iat = int(time.time())
    claims = {
        "iss": issuer,
        "sub": sub,
        "aud": audience,
        "iat": iat,
        "exp": iat + 120,
        "jti": str(uuid.uuid4()),
    }
    return sign_compact(claims, key, typ="JWT")


def send(
    interface: str, text: str, bearer: str | None, context_id: str | None = None
) -> httpx.Response:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    headers = {"A2A-Version": "1.0"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return httpx.post(f"{interface}/message:send", json={"message": message}, headers=headers)


def reply_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/a2a+json"
    parts = response.json()["message"]["parts"]
    return "\n".join(part["text"] for part in parts)


# -- help --------------------------------------------------------------------------------


@pytest.mark.parametrize("launcher", launchers())
def test_root_help_lists_the_subcommands(launcher: tuple[str, ...]) -> None:
    result = run([*launcher, "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: pactmw")
    assert "serve" in result.stdout
    assert "demo" in result.stdout


@pytest.mark.parametrize("launcher", launchers())
@pytest.mark.parametrize("command", ["serve", "demo"])
def test_subcommand_help(launcher: tuple[str, ...], command: str) -> None:
    result = run([*launcher, command, "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: pactmw {command}")


def test_serve_help_documents_paths_and_options() -> None:
    text = run([*PYTHON_M, "serve", "--help"]).stdout
    for option in ("--config", "--host", "--port", "--log-level"):
        assert option in text
    assert "relative to the current directory" in text


def test_no_subcommand_is_a_usage_error() -> None:
    result = run(PYTHON_M)
    assert result.returncode == 2
    assert "usage: pactmw" in result.stderr


def test_version() -> None:
    result = run([*PYTHON_M, "--version"])
    assert result.returncode == 0
    assert re.fullmatch(r"pactmw \d+\.\d+\.\d+\S*\n", result.stdout)


# -- serve: configuration errors ---------------------------------------------------------

GOOD = """\
base_url = "http://127.0.0.1:8000"
audience = "http://127.0.0.1:8000/a2a"
"""
BRAND = """
[brands.acme]
handler = "examples.bots:order_bot"
"""


def assert_one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]


CONFIG_ERRORS = [
    pytest.param(None, "cannot read", id="missing-file"),
    pytest.param("base_url = [1\n", "is not valid TOML", id="bad-toml"),
    pytest.param(GOOD + "bogus = 1\n" + BRAND, "unknown configuration key bogus", id="unknown"),
    pytest.param(
        GOOD + BRAND.replace("order_bot", "no_such_bot"), "cannot be imported", id="handler"
    ),
    pytest.param(GOOD + 'store = "mysql://x"\n' + BRAND, "store:", id="store-url"),
    pytest.param(
        GOOD + 'store = "sqlite:///pactmw.toml/x.db"\n' + BRAND, "store:", id="store-path"
    ),
    pytest.param(GOOD.replace("audience", "# audience") + BRAND, "audience", id="no-audience"),
    pytest.param(GOOD, "nothing to serve", id="no-brands"),
]


@pytest.mark.parametrize(("toml", "expected"), CONFIG_ERRORS)
def test_serve_config_error_is_one_line(tmp_path: Path, toml: str | None, expected: str) -> None:
    config = tmp_path / "pactmw.toml"
    if toml is not None:
        config.write_text(toml)
    # In tmp_path (relative store paths land there) with the repository importable, so
    # `examples.bots` imports and only the intended key is wrong. A short timeout: a config
    # that is wrongly accepted starts a server that would never exit.
    result = run(
        [*PYTHON_M, "serve", "--config", "pactmw.toml", "--port", str(free_port())],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO)},
        timeout=20,
    )
    assert_one_line_error(result, expected)
    assert result.stderr.startswith("pactmw serve: error: ")


@pytest.mark.skipif(not SCRIPT.exists(), reason="no pactmw console script")
def test_console_script_config_error(tmp_path: Path) -> None:
    result = run([str(SCRIPT), "serve", "--config", "missing.toml"], cwd=tmp_path, timeout=20)
    assert_one_line_error(result, "missing.toml")


def test_serve_without_uvicorn_says_how_to_install_it(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "uvicorn.py").write_text("raise ImportError('uvicorn is not installed')\n")
    config = tmp_path / "pactmw.toml"
    config.write_text(GOOD + BRAND)
    result = run(
        [*PYTHON_M, "serve", "--config", str(config)],
        cwd=tmp_path,
        env={"PYTHONPATH": os.pathsep.join((str(shim), str(REPO)))},
        timeout=20,
    )
    assert_one_line_error(result, "pactmw serve needs uvicorn: pip install 'pactmw[serve]'")
    assert result.stderr == "pactmw serve needs uvicorn: pip install 'pactmw[serve]'\n"


def test_serve_on_a_busy_port_fails_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "pactmw.toml").write_text(GOOD + 'store = "memory://"\n' + BRAND)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(
            [*PYTHON_M, "serve", "--config", "pactmw.toml", "--port", str(port)],
            cwd=tmp_path,
            env={"PYTHONPATH": str(REPO)},
            timeout=20,
        )
    assert result.returncode == 1, result.stderr
    assert "address already in use" in result.stderr
    assert "Traceback" not in result.stderr


# -- serve: a real server ------------------------------------------------------------------

SHOP_BOT = """\
from pactmw.provider import Turn


def handler(turn: Turn) -> str:
    return f"turn {len(turn.history) + 1} for {turn.caller.sub}: {turn.text}"
"""


def write_config(path: Path, *, port: int, jwks_uri: str, store: str, handler: str) -> None:
    path.write_text(
        f"""\
base_url = "http://127.0.0.1:{port}"
audience = "http://127.0.0.1:{port}/a2a"
store = "{store}"
allow_http_jwks_on_loopback = true

[[agents]]
issuer = "{ISSUER}"
jwks_uri = "{jwks_uri}"

[brands.shop]
name = "Shop Support"
handler = "{handler}"
"""
    )


@pytest.mark.skipif(not SCRIPT.exists(), reason="no pactmw console script")
def test_console_script_serves_card_and_signed_messages(tmp_path: Path) -> None:
    """The console script imports a handler from the current directory (not on sys.path
    otherwise) and puts a relative sqlite store under it."""
    key = generate_private_jwk("ES256", kid="pa-1")
    (tmp_path / "shopbot.py").write_text(SHOP_BOT)
    port = free_port()
    with JwksServer(public_key_set([key])) as jwks:
        write_config(
            tmp_path / "pactmw.toml",
            port=port,
            jwks_uri=jwks.url,
            store="sqlite:///state/pactmw.db",
            handler="shopbot:handler",
        )
        argv = [str(SCRIPT), "serve", "--config", "pactmw.toml", "--port", str(port)]
        log = tmp_path / "serve.log"
        with process_server(argv, port, cwd=tmp_path, log=log) as process:
            base = f"http://127.0.0.1:{port}"
            card = httpx.get(f"{base}/a2a/shop/.well-known/agent-card.json")
            assert card.status_code == 200
            assert card.json()["name"] == "Shop Support"
            interface = card.json()["supportedInterfaces"][0]["url"]
            assert interface == f"{base}/a2a/shop"

            audience = f"{base}/a2a"
            first = send(interface, "hello", token(key, sub="u-1", audience=audience))
            assert reply_text(first) == "turn 1 for u-1: hello"
            context_id = first.json()["message"]["contextId"]
            second = send(interface, "again", token(key, sub="u-1", audience=audience), context_id)
            assert reply_text(second) == "turn 2 for u-1: again"

            refused = send(interface, "hello", None)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
            wrong_aud = send(interface, "hello", token(key, sub="u-1", audience="other"))
            assert wrong_aud.status_code == 401
        # SIGTERM: uvicorn shuts down gracefully and serve exits 0 after closing the store.
        assert process.returncode == 0, log.read_text()
    assert (tmp_path / "state" / "pactmw.db").is_file()
    output = log.read_text()
    assert f"store: sqlite {tmp_path / 'state' / 'pactmw.db'}" in output
    assert "Traceback" not in output


@contextlib.contextmanager
def jwks_on_port(port: int, document: dict[str, Any]) -> Iterator[None]:
    """Serve `document` at /.well-known/jwks.json on a fixed port (the example's 9000)."""
    body = json.dumps(document).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError:
        pytest.skip(f"port {port} (the example's JWKS port) is in use")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_example_config_works_as_written(tmp_path: Path) -> None:
    """`pactmw serve --config examples/pactmw.toml`, from a copy of the repository's
    examples (so the relative sqlite store lands in tmp_path, not in the checkout)."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=ignore)
    key = generate_private_jwk("ES256")
    port = free_port()  # the example says 8000; --port moves the listener, not base_url
    argv = [*PYTHON_M, "serve", "--config", "examples/pactmw.toml", "--port", str(port)]
    log = tmp_path / "serve.log"
    with (
        jwks_on_port(9000, public_key_set([key]).to_dict()),
        process_server(argv, port, cwd=tmp_path, log=log),
    ):
        base = f"http://127.0.0.1:{port}"
        card = httpx.get(f"{base}/a2a/acme/.well-known/agent-card.json").json()
        assert card["supportedInterfaces"][0]["url"] == "http://127.0.0.1:8000/a2a/acme"
        assert list(card["securitySchemes"]) == ["platformJwt"]
        interface = f"{base}/a2a/acme"
        bearer = token(key, sub="u-1", audience="http://127.0.0.1:8000/a2a")
        first = send(interface, "Where is my order?", bearer)
        assert "order number" in reply_text(first)
        context_id = first.json()["message"]["contextId"]
        second = send(interface, "It is A-1001", bearer, context_id)
        assert "A-1001" in reply_text(second)
        assert "shipped" in reply_text(second)
    assert (tmp_path / ".pactmw" / "pactmw.db").is_file()
    assert "names port 8000 but this server listens on" in log.read_text()


# -- demo --------------------------------------------------------------------------------


def test_demo_tells_the_whole_story() -> None:
    launcher = (str(SCRIPT),) if SCRIPT.exists() else PYTHON_M
    started = time.monotonic()
    result = run([*launcher, "demo"], timeout=60)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for marker in (
        "The Agent Card",
        "card: name 'Acme Support'",
        "card: identity scheme 'platformJwt'",
        'PA → Acme: "It\'s A-1001."',
        'Acme → PA: "Order A-1001 should arrive Thursday."',
        "same contextId",
        "byte-identical",
        "the retry did not run the bot again",
        '401, WWW-Authenticate: Bearer realm="a2a"',
        "400 INVALID_PARAMS 'Unknown contextId'",
        "shut down cleanly",
    ):
        assert marker in out, marker
    assert out.rstrip().splitlines()[-1].startswith("demo complete")
    assert "Traceback" not in result.stderr
    workdir = re.search(r"working directory (\S+)", out)
    assert workdir is not None
    assert not Path(workdir.group(1)).exists()  # cleaned up without --keep
    assert elapsed < 30


def test_demo_keep_leaves_the_working_directory() -> None:
    result = run([*PYTHON_M, "demo", "--keep"], timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    kept = re.search(r"kept (\S+)", result.stdout)
    assert kept is not None
    workdir = Path(kept.group(1))
    try:
        assert (workdir / "pactmw.toml").is_file()
        assert (workdir / ".pactmw" / "pactmw.db").is_file()  # the default store, relative
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_demo_failure_is_reported(tmp_path: Path) -> None:
    """When `pactmw serve` cannot start, the demo says so and exits non-zero."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "uvicorn.py").write_text("raise ImportError('uvicorn is not installed')\n")
    result = run([*PYTHON_M, "demo"], env={"PYTHONPATH": str(shim)})
    assert result.returncode == 1
    assert "demo FAILED at step 3" in result.stdout
    assert "pactmw serve needs uvicorn" in result.stdout
    assert "demo complete" not in result.stdout
