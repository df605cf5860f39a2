"""The `pactmw` command as a user runs it: real processes, real files, real ports.

Both launchers are exercised: `python -m pactmw` and the `pactmw` console script of the venv.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from tests.support.agent import identity_token, user_message
from tests.support.cli import PYTHON_M, assert_one_line_error, run
from tests.support.folders import unwritable_folder
from tests.support.hidden import env_without
from tests.support.jwks_server import JwksServer
from tests.support.net import free_port
from tests.support.parties import ISSUER
from tests.support.servers import REPO, process_server

#: This checkout's pactmw first (not the one installed: another checkout's, in a worktree),
#: then the repository, for `examples.` and `tests.`.
CHECKOUT_PATH = os.pathsep.join((str(REPO / "src"), str(REPO)))
SCRIPT = Path(sys.executable).parent / "pactmw"


def launchers() -> list[Any]:
    # The console script is part of the installed package (make installs it): a missing one
    # is a failure, not a reason to skip.
    console = pytest.param((str(SCRIPT),), id="console-script")
    return [pytest.param(PYTHON_M, id="python-m"), console]


def token(key: PrivateJWK, *, sub: str, audience: str, issuer: str = ISSUER) -> str:
    return identity_token(key, issuer, audience, sub=sub, fresh_jti=True)


def send(
    interface: str, text: str, bearer: str | None, context_id: str | None = None
) -> httpx.Response:
    message = user_message(text, context_id=context_id)
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
    assert "grants" in result.stdout


@pytest.mark.parametrize("launcher", launchers())
@pytest.mark.parametrize("command", ["serve", "demo", "grants", "grants list", "grants revoke"])
def test_subcommand_help(launcher: tuple[str, ...], command: str) -> None:
    result = run([*launcher, *command.split(), "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: pactmw {command}")


def test_grants_help_documents_options_and_exit_statuses() -> None:
    listing = run([*PYTHON_M, "grants", "list", "--help"]).stdout
    for option in ("--config", "--brand", "--account", "--all", "--json"):
        assert option in listing
    revoke = run([*PYTHON_M, "grants", "revoke", "--help"]).stdout
    assert "--config FILE (GRANT_ID | --account A [--brand B])" in revoke
    assert "agent.grant_revoked" in revoke
    assert "1 when nothing was" in " ".join(revoke.split())  # as wrapped for the terminal


def test_grants_without_action_is_a_usage_error() -> None:
    result = run([*PYTHON_M, "grants"])
    assert result.returncode == 2
    assert result.stderr.startswith("usage: pactmw grants")


def test_serve_help_documents_paths_and_options() -> None:
    text = run([*PYTHON_M, "serve", "--help"]).stdout
    for option in ("--config", "--host", "--port", "--log-level"):
        assert option in text
    assert "relative to the current directory" in text


def test_serve_help_says_where_its_example_configuration_is() -> None:
    # examples/ ships in the source distribution, not in the wheel: "see examples/pactmw.toml"
    # alone sent someone who pip-installed pactmw to a file they do not have.
    text = " ".join(run([*PYTHON_M, "serve", "--help"]).stdout.split())
    assert "examples/pactmw.toml in the source distribution" in text
    assert "documentation's Configuration and CLI pages" in text


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
    pytest.param(
        GOOD.replace('http://127.0.0.1:8000"', 'http://[::1"', 1) + BRAND,
        "base_url is not a valid http(s) URL: 'http://[::1'",
        id="base-url-unclosed-bracket",
    ),
    pytest.param(
        GOOD.replace('8000"', '80000"', 1) + BRAND,
        "base_url is not a valid http(s) URL: 'http://127.0.0.1:80000'",
        id="base-url-port",
    ),
    pytest.param(GOOD, "nothing to serve", id="no-brands"),
]


POPPY_LOGIN_ELSEWHERE = """\
base_url = "https://shop.example"
audience = "https://shop.example/a2a"

[brands.shop]
handler = "examples.bots:order_bot"

[brands.shop.delegation]
login = "brand"
login_url = "https://login.elsewhere.example/signin"
brand_issuer = "https://login.elsewhere.example"
brand_jwks_uri = "https://login.elsewhere.example/jwks.json"
scopes = { "orders:read" = "Read your orders" }

[brands.shop.poppy]
domain = "shop.example"
agents = "any"
"""


def test_serve_names_a_poppy_sign_in_setting_not_the_store(tmp_path: Path) -> None:
    # Found by the Poppy trial: this ValueError of the Provider's assembly was reported as
    # "pactmw serve: error: store: brands.shop.delegation.login_url ...", as if the store
    # could not be opened.
    (tmp_path / "pactmw.toml").write_text(POPPY_LOGIN_ELSEWHERE)
    result = run(
        [*PYTHON_M, "serve", "--config", "pactmw.toml", "--port", str(free_port())],
        cwd=tmp_path,
        env={"PYTHONPATH": CHECKOUT_PATH},
        timeout=20,
    )
    expected = "brands.shop.delegation.login_url must be on"
    assert_one_line_error(result, expected)
    assert result.stderr.startswith("pactmw serve: error: " + expected), result.stderr


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
        env={"PYTHONPATH": CHECKOUT_PATH},
        timeout=20,
    )
    assert_one_line_error(result, expected)
    assert result.stderr.startswith("pactmw serve: error: ")


def test_console_script_config_error(tmp_path: Path) -> None:
    result = run([str(SCRIPT), "serve", "--config", "missing.toml"], cwd=tmp_path, timeout=20)
    assert_one_line_error(result, "missing.toml")


@pytest.mark.parametrize(
    ("command", "hidden", "needs"),
    [
        pytest.param("serve", ["uvicorn"], "uvicorn, which is", id="serve-uvicorn"),
        pytest.param("serve", ["starlette"], "starlette, which is", id="serve-starlette"),
        pytest.param(
            "demo", ["uvicorn", "starlette"], "uvicorn and starlette, which are", id="demo"
        ),
    ],
)
def test_serve_and_demo_without_the_serve_extra_say_how_to_install_it(
    tmp_path: Path, command: str, hidden: list[str], needs: str
) -> None:
    config = tmp_path / "pactmw.toml"
    config.write_text(GOOD + BRAND)
    arguments = ["--config", str(config)] if command == "serve" else []
    result = run(
        [*PYTHON_M, command, *arguments],
        cwd=tmp_path,
        env=env_without(tmp_path / "shim", hidden),
        timeout=20,
    )
    expected = f'pactmw {command} needs {needs} not installed: pip install "pactmw[serve]"'
    assert result.returncode == 2
    assert result.stderr == expected + "\n"
    assert result.stdout == ""


def test_serve_on_a_busy_port_names_it_and_the_option(tmp_path: Path) -> None:
    (tmp_path / "pactmw.toml").write_text(GOOD + 'store = "memory://"\n' + BRAND)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(
            [*PYTHON_M, "serve", "--config", "pactmw.toml", "--port", str(port)],
            cwd=tmp_path,
            env={"PYTHONPATH": CHECKOUT_PATH},
            timeout=20,
        )
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"pactmw serve: error: cannot listen on 127.0.0.1:{port}: "
        "address already in use (--port chooses another)\n"
    )
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        # TEST-NET-1 (RFC 5737): an address no interface of this machine has.
        pytest.param(
            "192.0.2.1",
            "192.0.2.1:{port}: no interface of this machine has this address",
            id="not-local",
        ),
        pytest.param("no-such-host.invalid", "no-such-host.invalid: unknown host", id="unknown"),
    ],
)
def test_serve_on_an_address_it_cannot_listen_on_names_it_and_the_option(
    tmp_path: Path, host: str, problem: str
) -> None:
    (tmp_path / "pactmw.toml").write_text(GOOD + 'store = "memory://"\n' + BRAND)
    port = free_port()
    result = run(
        [*PYTHON_M, "serve", "--config", "pactmw.toml", "--host", host, "--port", str(port)],
        cwd=tmp_path,
        env={"PYTHONPATH": CHECKOUT_PATH},
        timeout=20,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"pactmw serve: error: cannot listen on {problem.format(port=port)} "
        "(--host chooses another)\n"
    )
    assert result.stdout == ""


@contextlib.contextmanager
def serving_on_port_0(folder: Path) -> Iterator[tuple[Path, int]]:
    """`pactmw serve --config pactmw.toml --port 0` in `folder`, until it listens: its log
    (stdout and stderr) and the port the system gave; stopped at the end."""
    log = folder / "serve.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*PYTHON_M, "serve", "--config", "pactmw.toml", "--port", "0"],
            cwd=folder,
            env={**os.environ, "PYTHONPATH": CHECKOUT_PATH},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while not (found := re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read_text())):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield log, int(found[1])
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_serve_on_port_0_says_the_port_it_was_given(tmp_path: Path) -> None:
    """`--port 0` asks the system for a free port: the log and the base_url check name that
    port, not 0 (a base_url naming 8000 is reported as differing from the given port)."""
    (tmp_path / "pactmw.toml").write_text(GOOD + 'store = "memory://"\n' + BRAND)
    with serving_on_port_0(tmp_path) as (log, port):
        assert port != 0
        card = httpx.get(f"http://127.0.0.1:{port}/a2a/acme/.well-known/agent-card.json")
        assert card.status_code == 200
    text = log.read_text()
    assert f"names port 8000 but this server listens on {port}:" in text, text
    assert "listens on 0" not in text


def test_serve_says_listening_only_once_it_listens(tmp_path: Path) -> None:
    """The sockets are bound first but listen only once uvicorn has run the app's startup:
    the `listening on` line comes after it, so whoever waits for the line is not refused
    (it came first once, and a connection made on seeing it was refused)."""
    (tmp_path / "pactmw.toml").write_text(GOOD + 'store = "memory://"\n' + BRAND)
    with serving_on_port_0(tmp_path) as (log, port):
        text = log.read_text()
        assert text.index("Application startup complete") < text.index("listening on"), text
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_serve_says_once_that_same_app_consent_cannot_work_under_it(tmp_path: Path) -> None:
    """A Brand whose consent pages ask the host app who is signed in (`login = "same-app"`,
    the default) cannot sign anybody in under `pactmw serve`, which serves no app of the
    operator's: one warning at start, in serve's words (not A2AProviderApp's current_user)."""
    key = tmp_path / "provider.jwk"
    key.write_text(json.dumps(generate_private_jwk("ES256").to_dict()))
    delegation = (
        '\n[brands.acme.delegation]\nlogin_url = "/login"\n'
        '[brands.acme.delegation.scopes]\n"orders:read" = "Read your orders"\n'
    )
    (tmp_path / "pactmw.toml").write_text(
        GOOD + f'store = "memory://"\nsigning_keys = ["{key}"]\n' + BRAND + delegation
    )
    with serving_on_port_0(tmp_path) as (log, _):
        pass
    warnings = [line for line in log.read_text().splitlines() if "same-app" in line]
    assert len(warnings) == 1, log.read_text()
    assert "brands.acme.delegation.login" in warnings[0]
    assert (
        'is "same-app" (the default), but pactmw serve serves no app of yours to say who is '
        "signed in: the consent pages cannot tell who is signed in" in warnings[0]
    )
    assert (
        "Mount the Provider in your app instead (a2a_routes(provider, current_user=...)), "
        'or login = "brand"' in warnings[0]
    )
    assert "A2AProviderApp" not in warnings[0]


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
    """Serve `document` at /.well-known/jwks.json on `port`."""
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

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
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
    # The example's agent publishes its keys on port 9000; the copy points at a free port
    # instead, so that a busy 9000 on the test machine neither skips nor fails this test.
    config = tmp_path / "examples" / "pactmw.toml"
    example_jwks = "http://127.0.0.1:9000/.well-known/jwks.json"
    assert config.read_text().count(example_jwks) == 1
    jwks_port = free_port()
    config.write_text(
        config.read_text().replace(example_jwks, example_jwks.replace("9000", str(jwks_port)))
    )
    key = generate_private_jwk("ES256")
    port = free_port()  # the example says 8000; --port moves the listener, not base_url
    argv = [*PYTHON_M, "serve", "--config", "examples/pactmw.toml", "--port", str(port)]
    log = tmp_path / "serve.log"
    with (
        jwks_on_port(jwks_port, public_key_set([key]).to_dict()),
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
    # How fast the demo runs is measured in docs/development.md, not asserted: a timed
    # assertion fails on a loaded machine without anything being wrong.
    result = run([*launcher, "demo"], timeout=60)
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
    # The Delegated part, in the order of the story.
    position = 0
    for marker in (
        "== PACT Delegated",
        "card: security scheme 'userDelegation'",
        "orders:cancel  Cancel an order that has not shipped",
        "→ step-up",
        'PA → Acme: "Show me my orders, please."',
        "TASK_STATE_AUTH_REQUIRED",
        'pact.missingScopes ["orders:read"]',
        "pact.verificationUriComplete http://127.0.0.1:",
        "Device authorization",
        "400 authorization_pending",
        "'Sign in to Acme'",
        "never an open redirect",
        "wrong password → 401",
        "hidden assertion",
        "the consent page:",
        "signed in as jane@example.com",
        "[x] Look up your orders and their status  (orders:read)",
        "[x] Cancel an order that has not shipped  (orders:cancel)",
        "it is single-use",
        "Jane unticks",
        "→ 303",
        "Connected: 'You allowed Demo personal agent to act for you at Acme Support.'",
        "can now do this for you at Acme Support until",
        "    - Look up your orders and their status",
        "scope 'orders:read': what Jane approved",
        'Acme → PA: "Your orders: A-1001',
        "receipt verified: ES256",
        "signed claims == returned claims",
        'scopesUsed  ["orders:read"]',
        'actions     [{"tool": "list_orders"}]',
        'PA → Acme: "Please cancel order A-1002."',
        'pact.missingScopes ["orders:cancel"]',
        "grant_type=refresh_token → 200",
        "the old one is spent",
        "$ pactmw grants list --config pactmw.toml",
        "$ pactmw grants revoke --config pactmw.toml a2agrant_",
        "agent.grant_revoked",
        "→ 401, no body",
        'WWW-Authenticate: Bearer realm="a2a", error="invalid_token"',
        "400 invalid_grant",
        "shut down cleanly",
    ):
        found = out.find(marker, position)
        assert found >= 0, f"{marker!r} missing after position {position}:\n{out[position:]}"
        position = found + len(marker)
    # The grant the PA got is the one listed and revoked.
    grant_id = re.search(r"grant_id (a2agrant_\w+)", out)
    assert grant_id is not None
    assert f"| revoked {grant_id.group(1)} (brand acme, account acct-jane" in out
    assert out.rstrip().splitlines()[-1].startswith("demo complete")
    assert "Traceback" not in result.stderr
    workdir = re.search(r"working directory (\S+)", out)
    assert workdir is not None
    assert not Path(workdir.group(1)).exists()  # cleaned up without --keep


def test_demo_keep_leaves_the_working_directory() -> None:
    result = run([*PYTHON_M, "demo", "--keep"], timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    kept = re.search(r"kept (\S+)", result.stdout)
    assert kept is not None
    workdir = Path(kept.group(1))
    try:
        assert (workdir / "pactmw.toml").is_file()
        assert (workdir / ".pactmw" / "pactmw.db").is_file()  # the default store, relative
        # The development signing key of the delegation tokens, under data_dir.
        assert list((workdir / ".pactmw" / "keys").glob("*.jwk"))
        assert "[brands.acme.delegation]" in (workdir / "pactmw.toml").read_text()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_demo_failure_is_reported(tmp_path: Path) -> None:
    """When `pactmw serve` cannot start, the demo says so and exits non-zero."""
    shim = tmp_path / "shim"
    shim.mkdir()
    # A uvicorn that imports (so the demo starts) but cannot serve (so `pactmw serve` fails).
    (shim / "uvicorn.py").write_text("# a uvicorn without Server or Config\n")
    result = run([*PYTHON_M, "demo"], env={"PYTHONPATH": str(shim)})
    assert result.returncode == 1
    assert "demo FAILED at step 3" in result.stdout
    assert "has no attribute 'Server'" in result.stdout  # the server's own error, shown
    assert "demo complete" not in result.stdout


def test_demo_with_a_uvicorn_that_does_not_import_names_the_serve_extra(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "uvicorn.py").write_text("raise ImportError('uvicorn is broken')\n")
    result = run([*PYTHON_M, "demo"], env={"PYTHONPATH": str(shim)})
    assert result.returncode == 2
    assert result.stderr == (
        'pactmw demo needs uvicorn, which is not installed: pip install "pactmw[serve]"\n'
    )


# -- grants --------------------------------------------------------------------------------

# An f-string: a plain one held `issuer = "{ISSUER}"` as written, an issuer no token matches.
DELEGATED_CONFIG = f"""\
base_url = "http://127.0.0.1:8000"
audience = "http://127.0.0.1:8000/a2a"

[[agents]]
issuer = "{ISSUER}"
jwks_uri = "https://pa.example/.well-known/jwks.json"

[brands.acme]
handler = "pactmw.demo:demo_bot"

[brands.acme.delegation]
login = "brand"
login_url = "https://acme.example/login"
brand_issuer = "https://acme.example"
brand_jwks_uri = "https://acme.example/.well-known/jwks.json"
tools = "pactmw.demo:demo_tools"

[brands.acme.delegation.scopes]
"orders:read" = "Look up your orders"
"orders:cancel" = "Cancel an order"

[brands.globex]
handler = "pactmw.demo:demo_bot"

[brands.globex.delegation]
login_url = "/login"
scopes = {{ "bookings:read" = "See your bookings" }}
"""
DAY = 24 * 3600.0


class Grants:
    """A configuration in `tmp_path` and its default sqlite store, holding grants made with
    the store API: two live at acme, one live at globex, one revoked, one expired."""

    def __init__(self, directory: Path) -> None:
        from pactmw.store import SqliteStore

        self.directory = directory
        (directory / "pactmw.toml").write_text(DELEGATED_CONFIG)
        self.db = directory / ".pactmw" / "pactmw.db"  # the default store, relative
        self.db.parent.mkdir()
        now = time.time()
        store = SqliteStore(self.db)
        try:

            def grant(brand: str, account: str, scopes: tuple[str, ...], **times: float) -> str:
                made = store.upsert_grant(
                    grant_id=f"a2agrant_{uuid.uuid4().hex}",
                    brand_id=brand,
                    account=account,
                    client_id=ISSUER,
                    pa_sub=f"sub-{account}",
                    scopes=scopes,
                    now=times.get("now", now),
                    expires_at=times.get("expires_at", now + 30 * DAY),
                )
                return made.grant_id

            self.expired = grant(
                "acme", "carol", ("orders:read",), now=now - 9 * DAY, expires_at=now - DAY
            )
            self.revoked = grant("acme", "dave", ("orders:read",), now=now - 8 * DAY)
            assert store.revoke_grant(self.revoked, now=now - 7 * DAY)
            self.globex = grant("globex", "jane", ("bookings:read",), now=now - 2)
            self.bob = grant("acme", "bob", ("orders:read",), now=now - 1)
            self.jane = grant("acme", "jane", ("orders:cancel", "orders:read"))
        finally:
            store.close()

    def run(self, *arguments: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return run([*PYTHON_M, "grants", *arguments], cwd=self.directory, timeout=timeout)

    def stored(self, grant_id: str) -> Any:
        from pactmw.store import SqliteStore

        store = SqliteStore(self.db)
        try:
            return store.get_grant(grant_id)
        finally:
            store.close()


@pytest.fixture
def grants(tmp_path: Path) -> Grants:
    return Grants(tmp_path)


def table_rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    assert lines[0].split() == ["GRANT", "BRAND", "ACCOUNT", "AGENT", "SCOPES", "EXPIRES", "STATUS"]
    return [re.split(r"\s{2,}", line.strip()) for line in lines[1:]]


def test_grants_list_shows_live_grants_newest_first(grants: Grants) -> None:
    result = grants.run("list", "--config", "pactmw.toml")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = table_rows(result.stdout)
    assert [row[0] for row in rows] == [grants.jane, grants.bob, grants.globex]
    jane = rows[0]
    assert jane[1:5] == ["acme", "jane", ISSUER, "orders:cancel orders:read"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", jane[5])
    assert jane[6] == "live"


def test_grants_list_all_and_filters(grants: Grants) -> None:
    everything = table_rows(grants.run("list", "--config", "pactmw.toml", "--all").stdout)
    status = {row[0]: row[-1] for row in everything}
    assert status == {
        grants.jane: "live",
        grants.bob: "live",
        grants.globex: "live",
        grants.revoked: "revoked",
        grants.expired: "expired",
    }
    acme_jane = grants.run(
        "list", "--config", "pactmw.toml", "--brand", "acme", "--account", "jane"
    )
    assert [row[0] for row in table_rows(acme_jane.stdout)] == [grants.jane]
    none = grants.run("list", "--config", "pactmw.toml", "--account", "nobody")
    assert none.returncode == 0
    assert none.stdout.startswith("no live grants")


def test_grants_list_json(grants: Grants) -> None:
    result = grants.run("list", "--config", "pactmw.toml", "--all", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [entry["grant_id"] for entry in listed][:3] == [grants.jane, grants.bob, grants.globex]
    jane = listed[0]
    assert jane["brand_id"] == "acme"
    assert jane["account"] == "jane"
    assert jane["client_id"] == ISSUER
    assert jane["pa_sub"] == "sub-jane"
    assert jane["scopes"] == ["orders:cancel", "orders:read"]
    assert jane["status"] == "live"
    assert jane["revoked_at"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", jane["expires_at"])
    revoked = next(entry for entry in listed if entry["grant_id"] == grants.revoked)
    assert revoked["status"] == "revoked"
    assert revoked["revoked_at"] is not None
    empty = grants.run("list", "--config", "pactmw.toml", "--brand", "initech", "--json")
    assert json.loads(empty.stdout) == []


def test_grants_revoke_one_grant(grants: Grants) -> None:
    result = grants.run("revoke", "--config", "pactmw.toml", grants.jane)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"revoked {grants.jane} (brand acme, account jane, agent {ISSUER})\n"
    # The Provider's revocation API ran: its audit event, on stderr.
    assert "pactmw.audit: agent.grant_revoked brand=acme" in result.stderr
    assert f"grant={grants.jane}" in result.stderr
    assert grants.stored(grants.jane).revoked_at is not None
    assert grants.stored(grants.bob).revoked_at is None
    live = grants.run("list", "--config", "pactmw.toml", "--json")
    assert grants.jane not in {entry["grant_id"] for entry in json.loads(live.stdout)}
    # Nothing was signed, so no Provider signing key was loaded or created.
    assert not (grants.directory / ".pactmw" / "keys").exists()

    again = grants.run("revoke", "--config", "pactmw.toml", grants.jane)
    assert again.returncode == 1
    assert again.stdout == ""
    assert "already revoked" in again.stderr
    assert "agent.grant_revoked" not in again.stderr


def test_grants_revoke_unknown_or_expired_grant_exits_1(grants: Grants) -> None:
    unknown = grants.run("revoke", "--config", "pactmw.toml", "a2agrant_nope")
    assert unknown.returncode == 1
    assert unknown.stdout == ""
    assert unknown.stderr == (
        "pactmw grants revoke: error: nothing revoked: a2agrant_nope: no such grant\n"
    )
    expired = grants.run("revoke", "--config", "pactmw.toml", grants.expired)
    assert expired.returncode == 1
    assert "expired at" in expired.stderr


def test_grants_revoke_an_account(grants: Grants) -> None:
    result = grants.run("revoke", "--config", "pactmw.toml", "--account", "jane", "--brand", "acme")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"revoked {grants.jane}\n"
    assert result.stderr.count("agent.grant_revoked") == 1
    assert grants.stored(grants.globex).revoked_at is None  # another Brand: untouched

    everywhere = grants.run("revoke", "--config", "pactmw.toml", "--account", "jane")
    assert everywhere.returncode == 0, everywhere.stderr
    assert everywhere.stdout == f"revoked {grants.globex}\n"

    nothing = grants.run("revoke", "--config", "pactmw.toml", "--account", "jane")
    assert nothing.returncode == 1
    assert nothing.stderr.splitlines() == [
        "pactmw grants revoke: error: nothing revoked: account jane has no live grant"
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param([], "give either a GRANT_ID or --account A", id="neither"),
        pytest.param(["a2agrant_x", "--account", "jane"], "either", id="both"),
        pytest.param(["a2agrant_x", "--brand", "acme"], "--brand goes with --account", id="brand"),
    ],
)
def test_grants_revoke_usage_errors(grants: Grants, arguments: list[str], expected: str) -> None:
    result = grants.run("revoke", "--config", "pactmw.toml", *arguments)
    assert_one_line_error(result, expected)
    assert result.stderr.startswith("pactmw grants revoke: error: ")
    assert grants.stored(grants.jane).revoked_at is None


def test_grants_missing_config_option_is_a_usage_error(grants: Grants) -> None:
    result = grants.run("list")
    assert result.returncode == 2
    assert "the following arguments are required: --config" in result.stderr


GRANTS_CONFIG_ERRORS = [
    pytest.param(None, "cannot read", id="missing-file"),
    pytest.param("base_url = [1\n", "is not valid TOML", id="bad-toml"),
    pytest.param("bogus = 1\n" + DELEGATED_CONFIG, "unknown configuration key bogus", id="key"),
    pytest.param('store = "memory://"\n' + DELEGATED_CONFIG, "memory://", id="memory-store"),
    pytest.param('store = "mysql://x"\n' + DELEGATED_CONFIG, "store:", id="store-url"),
    pytest.param(
        'store = "sqlite:///elsewhere/pactmw.db"\n' + DELEGATED_CONFIG,
        "store: no database at",
        id="no-database",
    ),
    pytest.param(
        DELEGATED_CONFIG.replace("pactmw.demo:demo_tools", "pactmw.demo:no_such_tools"),
        "cannot be imported",
        id="tools",
    ),
]


@pytest.mark.parametrize("action", ["list", "revoke"])
@pytest.mark.parametrize(("toml", "expected"), GRANTS_CONFIG_ERRORS)
def test_grants_config_error_is_one_line(
    grants: Grants, action: str, toml: str | None, expected: str
) -> None:
    config = grants.directory / "pactmw.toml"
    if toml is None:
        config.unlink()
    else:
        config.write_text(toml)
    extra = [grants.jane] if action == "revoke" else []
    result = grants.run(action, "--config", "pactmw.toml", *extra)
    assert_one_line_error(result, expected)
    assert result.stderr.startswith(f"pactmw grants {action}: error: ")
    assert grants.stored(grants.jane).revoked_at is None
    assert not (grants.directory / "elsewhere").exists()  # no empty database was created


def test_grants_revoke_needs_a_delegated_brand(grants: Grants) -> None:
    (grants.directory / "pactmw.toml").write_text(
        GOOD + BRAND.replace("examples.bots:order_bot", "pactmw.demo:demo_bot")
    )
    listing = grants.run("list", "--config", "pactmw.toml")
    assert listing.returncode == 0, listing.stderr  # the store is still readable
    result = grants.run("revoke", "--config", "pactmw.toml", grants.jane)
    assert_one_line_error(result, "no [brands.ID.delegation] table")


def test_grants_console_script(grants: Grants) -> None:
    """The console script reads the same relative store from the current directory."""
    result = run(
        [str(SCRIPT), "grants", "list", "--config", "pactmw.toml", "--json"], cwd=grants.directory
    )
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == 3


# -- the demo's development Brand login ----------------------------------------------------


def test_brand_login_is_never_an_open_redirect() -> None:
    from pactmw.brand_login import BrandUser, DevelopmentBrandLogin

    consent = "http://127.0.0.1:8000/a2a/acme/oauth/consent"
    user = BrandUser("jane", "pw", account="acct-jane", email="jane@example.com")
    with DevelopmentBrandLogin(consent_url=consent, users=[user], brand_name="Acme") as login:
        assert login.user_code_in(consent) == ""
        assert login.user_code_in(consent + "?user_code=BCDF-GHJK") == "BCDF-GHJK"
        for other in (
            "https://evil.example/a2a/acme/oauth/consent?user_code=BCDF-GHJK",
            consent + ".evil.example",
            consent + "/../../../elsewhere",
            consent.replace("127.0.0.1:8000", "127.0.0.1:8000@evil.example"),
            consent + "?user_code=BCDF-GHJK&next=https://evil.example",
            consent + "?user_code=A&user_code=B",
            consent + "?user_code=<script>",
            consent + "#user_code=BCDF-GHJK",
            "/a2a/acme/oauth/consent",
            "",
        ):
            assert login.user_code_in(other) is None, other
            page = httpx.get(login.login_url, params={"return_to": other})
            assert page.status_code == 400, other
            posted = httpx.post(
                login.login_url,
                data={"return_to": other, "username": "jane", "password": "pw"},
            )
            assert posted.status_code == 400, other
            assert "assertion" not in posted.text

        form = httpx.get(login.login_url, params={"return_to": consent})
        assert form.status_code == 200
        assert 'name="user_code"' in form.text  # no code in return_to: the person types it
        assert form.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in form.headers["content-security-policy"]
        wrong = httpx.post(
            login.login_url, data={"return_to": consent, "username": "jane", "password": "no"}
        )
        assert wrong.status_code == 401
        assert "assertion" not in wrong.text
        signed_in = httpx.post(
            login.login_url,
            data={
                "return_to": consent,
                "username": "jane",
                "password": "pw",
                "user_code": "bcdf-ghjk",
            },
        )
        assert signed_in.status_code == 200
        assert f'<form method="post" action="{consent}">' in signed_in.text
        token = re.search(r'name="assertion" value="([^"]+)"', signed_in.text)
        assert token is not None
        jwks = httpx.get(login.jwks_uri).json()
        assert [key["kid"] for key in jwks["keys"]] == [login.key.kid]
        assert "d" not in jwks["keys"][0]
        payload = token.group(1).split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert claims["iss"] == login.issuer
        assert claims["aud"] == consent
        assert claims["sub"] == "acct-jane"
        assert claims["user_code"] == "bcdf-ghjk"


# -- the personal agent's side: keygen, token, card ------------------------------------------

NEW_COMMANDS = ["keygen", "token", "card", "send", "check"]


@pytest.mark.parametrize("launcher", launchers())
@pytest.mark.parametrize("command", NEW_COMMANDS)
def test_personal_agent_subcommand_help(launcher: tuple[str, ...], command: str) -> None:
    result = run([*launcher, command, "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: pactmw {command}")
    root = run([*launcher, "--help"])
    assert command in root.stdout


def test_check_help_documents_the_output_and_exit_statuses() -> None:
    text = run([*PYTHON_M, "check", "--help"]).stdout
    for option in ("--issuer", "--key", "--audience", "--other-brand", "--delegated", "--json",
                   "--timeout", "N passed, M failed", "disabled-pa"):  # fmt: skip
        assert option in " ".join(text.split()), option


def keygen(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return run([*PYTHON_M, "keygen", *arguments], cwd=directory)


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_keygen_and_token_verify_with_the_public_jwks(tmp_path: Path, alg: str) -> None:
    import jwt  # PyJWT: an independent verifier

    made = keygen(tmp_path, "--alg", alg, "--kid", "agent-1",
                  "--out", "keys/agent.jwk", "--jwks", "public/jwks.json", "--parents")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "kid agent-1" in made.stdout
    assert "(mode 0600)" in made.stdout
    key_file, jwks_file = tmp_path / "keys" / "agent.jwk", tmp_path / "public" / "jwks.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(jwks_file.stat().st_mode) == 0o644
    private = json.loads(key_file.read_text())
    assert private["kid"] == "agent-1"
    assert private["alg"] == alg
    assert "d" in private
    jwks = json.loads(jwks_file.read_text())
    assert [key["kid"] for key in jwks["keys"]] == ["agent-1"]
    assert not {"d", "p", "q", "dp", "dq", "qi"} & set(jwks["keys"][0])
    assert jwks["keys"][0]["use"] == "sig"

    signed = run([*PYTHON_M, "token", "--key", str(key_file), "--issuer", ISSUER,
                  "--sub", "user-42", "--audience", "urn:provider:aud", "--ttl", "60"])  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    assert signed.stderr == ""
    compact = signed.stdout.strip()
    assert signed.stdout == compact + "\n"
    assert jwt.get_unverified_header(compact) == {"alg": alg, "typ": "JWT", "kid": "agent-1"}
    public = jwt.PyJWKSet.from_dict(jwks)["agent-1"]
    claims = jwt.decode(
        compact, public.key, algorithms=[alg], audience="urn:provider:aud", issuer=ISSUER
    )
    assert claims["sub"] == "user-42"
    assert claims["exp"] - claims["iat"] == 60
    assert abs(claims["iat"] - time.time()) < 30
    assert str(uuid.UUID(claims["jti"])) == claims["jti"]
    # Another key's JWKS does not verify it.
    other = keygen(tmp_path, "--alg", alg, "--out", "other.jwk", "--jwks", "other.json")
    assert other.returncode == 0, other.stderr
    other_key = jwt.PyJWKSet.from_dict(json.loads((tmp_path / "other.json").read_text())).keys[0]
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(compact, other_key.key, algorithms=[alg], audience="urn:provider:aud")


def test_keygen_without_jwks_prints_it_and_default_kid_is_the_thumbprint(tmp_path: Path) -> None:
    from pactmw.core.jwk import import_public_jwk

    made = keygen(tmp_path, "--out", "agent.jwk")
    assert made.returncode == 0, made.stderr
    jwks = json.loads(made.stdout)
    (key,) = jwks["keys"]
    assert key["alg"] == "ES256"
    assert key["kid"] == import_public_jwk(key).thumbprint
    assert "written to agent.jwk (mode 0600)" in made.stderr
    assert stat.S_IMODE((tmp_path / "agent.jwk").stat().st_mode) == 0o600


def test_keygen_never_replaces_a_key_unless_forced(tmp_path: Path) -> None:
    assert keygen(tmp_path, "--out", "agent.jwk", "--jwks", "jwks.json").returncode == 0
    before = (tmp_path / "agent.jwk").read_text()
    again = keygen(tmp_path, "--out", "agent.jwk", "--jwks", "other.json")
    assert_one_line_error(again, "agent.jwk exists (--force replaces it)")
    assert (tmp_path / "agent.jwk").read_text() == before
    assert not (tmp_path / "other.json").exists()
    (tmp_path / "agent.jwk").chmod(0o644)
    forced = keygen(tmp_path, "--out", "agent.jwk", "--jwks", "jwks.json", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "agent.jwk").read_text() != before
    assert stat.S_IMODE((tmp_path / "agent.jwk").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.fixture
def unwritable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder in which no file can be created, by this user (root included)."""
    with unwritable_folder(tmp_path_factory.mktemp("read-only")) as folder:
        yield folder


def leftovers(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def test_keygen_writes_both_files_or_neither(tmp_path: Path, unwritable: Path) -> None:
    # The JWKS cannot be written: the private key must not be left behind, so a retry works.
    jwks = str(unwritable / "jwks.json")
    failed = keygen(tmp_path, "--out", "agent.jwk", "--jwks", jwks)
    assert failed.returncode == 2
    assert failed.stderr == f"pactmw keygen: error: cannot write {jwks}: Permission denied\n"
    assert leftovers(tmp_path) == []
    retried = keygen(tmp_path, "--out", "agent.jwk", "--jwks", "jwks.json")
    assert retried.returncode == 0, retried.stderr


def test_keygen_does_not_create_missing_folders_unless_asked(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    failed = keygen(tmp_path, "--out", str(missing / "pa.jwk"))
    assert failed.returncode == 2
    assert failed.stderr == (
        f"pactmw keygen: error: {missing}: no such directory (--parents creates it)\n"
    )
    # The JWKS's folder is checked before the private key is written, too.
    failed = keygen(tmp_path, "--out", "pa.jwk", "--jwks", "public/jwks.json")
    assert failed.stderr == (
        "pactmw keygen: error: public: no such directory (--parents creates it)\n"
    )
    assert leftovers(tmp_path) == []
    made = keygen(tmp_path, "--out", str(missing / "pa.jwk"), "--parents")
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE((missing / "pa.jwk").stat().st_mode) == 0o600


def test_keygen_removes_the_folders_it_created_when_writing_fails(
    tmp_path: Path, unwritable: Path
) -> None:
    jwks = str(unwritable / "jwks.json")
    failed = keygen(tmp_path, "--out", "new/keys/pa.jwk", "--jwks", jwks, "--parents")
    assert failed.stderr == f"pactmw keygen: error: cannot write {jwks}: Permission denied\n"
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param(["--out", "file/pa.jwk"], "file: not a directory", id="folder-is-a-file"),
        pytest.param(["--out", "folder"], "folder is a directory", id="out-is-a-folder"),
        pytest.param(["--out", "pa.jwk", "--jwks", "folder"], "folder is a directory", id="jwks"),
        # An empty shell variable: not the current folder, nor "no --jwks" (stdout).
        pytest.param(["--out", ""], "--out must not be empty", id="out-empty"),
        pytest.param(
            ["--out", "pa.jwk", "--jwks", ""], "--jwks must not be empty", id="jwks-empty"
        ),
    ],
)
def test_keygen_refuses_paths_it_cannot_use(
    tmp_path: Path, arguments: list[str], expected: str
) -> None:
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    failed = keygen(tmp_path, *arguments)
    assert failed.stderr == f"pactmw keygen: error: {expected}\n"
    assert leftovers(tmp_path) == ["file", "folder"]


@pytest.mark.parametrize(
    ("command", "empty"),
    [
        pytest.param("token", "--issuer", id="token-issuer"),
        pytest.param("token", "--sub", id="token-sub"),
        pytest.param("token", "--audience", id="token-audience"),
        pytest.param("token", "--key", id="token-key"),
        pytest.param("check", "--issuer", id="check-issuer"),
        pytest.param("check", "--audience", id="check-audience"),
        pytest.param("check", "--other-brand", id="check-other-brand"),
    ],
)
def test_an_empty_option_is_named(tmp_path: Path, command: str, empty: str) -> None:
    """An empty shell variable (`--issuer "$ISS"`) is refused by its flag, as keygen does,
    not blamed on the key file nor taken for "no other Brand"."""
    key = tmp_path / "agent.jwk"
    key.write_text(json.dumps(generate_private_jwk("ES256").to_dict()))
    options = {"--key": str(key), "--issuer": ISSUER, "--audience": "aud"}
    options.update({"--sub": "u"} if command == "token" else {"--other-brand": "https://b.example"})
    options[empty] = ""
    url = [] if command == "token" else ["http://127.0.0.1:9"]  # never reached
    argv = [command, *url, *(part for pair in options.items() for part in pair)]
    result = run([*PYTHON_M, *argv], cwd=tmp_path)
    assert_one_line_error(result, f"pactmw {command}: error: {empty} must not be empty")


def test_keygen_force_replaces_files_only(tmp_path: Path) -> None:
    """--force replaces a key file; a named pipe (or a device, a socket) at that path is not
    one: the rename would put a regular file in its place (as root, even over /dev/null)."""
    os.mkfifo(tmp_path / "pipe")
    for arguments in (["--out", "pipe"], ["--out", "pa.jwk", "--jwks", "pipe"]):
        failed = keygen(tmp_path, *arguments, "--force")
        assert failed.returncode == 2, failed.stderr
        assert failed.stderr == (
            "pactmw keygen: error: pipe is not a regular file (--force replaces files only)\n"
        )
        assert leftovers(tmp_path) == ["pipe"]
        assert stat.S_ISFIFO((tmp_path / "pipe").stat().st_mode)


@pytest.mark.parametrize("command", ["serve", "agents list", "grants list", "cleanup"])
def test_an_empty_config_option_is_named(tmp_path: Path, command: str) -> None:
    result = run([*PYTHON_M, *command.split(), "--config", ""], cwd=tmp_path)
    assert_one_line_error(result, f"pactmw {command}: error: --config must not be empty")


@pytest.mark.parametrize("existing", [True, False], ids=["forced", "new-files"])
def test_a_failed_rename_puts_back_the_files_already_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    from pactmw.cli import _common

    first, second = tmp_path / "a.jwk", tmp_path / "b.json"
    if existing:
        first.write_text("old a")
        second.write_text("old b")
    real_replace, renames = os.replace, []

    def second_rename_fails(source: Any, target: Any) -> None:
        renames.append(target)
        if len(renames) == 2:
            raise PermissionError(13, "Permission denied")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", second_rename_fails)
    files = [_common.OutputFile(str(first), "new a", 0o600),
             _common.OutputFile(str(second), "new b", 0o644)]  # fmt: skip
    with pytest.raises(_common.CommandError, match=r"^cannot write .*b\.json: Permission denied$"):
        _common.write_all(files, force=True, parents=False)
    if existing:
        assert (first.read_text(), second.read_text()) == ("old a", "old b")
        assert leftovers(tmp_path) == ["a.jwk", "b.json"]
    else:
        assert leftovers(tmp_path) == []


def test_keygen_eddsa_key_cannot_sign_pact_tokens(tmp_path: Path) -> None:
    made = keygen(tmp_path, "--alg", "EdDSA", "--out", "ed.jwk", "--jwks", "ed.json")
    assert made.returncode == 0, made.stderr
    assert "cannot sign them" in made.stderr
    assert json.loads((tmp_path / "ed.json").read_text())["keys"][0]["crv"] == "Ed25519"
    refused = run([*PYTHON_M, "token", "--key", str(tmp_path / "ed.jwk"), "--issuer", ISSUER,
                   "--sub", "u", "--audience", "a"])  # fmt: skip
    assert_one_line_error(refused, "must be ES256 or RS256")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param(["--ttl", "301"], "ttl must be an integer from 1 to 300", id="ttl"),
        pytest.param(["--ttl", "0"], "ttl must be an integer from 1 to 300", id="ttl-0"),
        # Named by its flag (refuse_empty), as every option given as "" is.
        pytest.param(["--audience", ""], "--audience must not be empty", id="audience"),
    ],
)
def test_token_usage_errors(tmp_path: Path, arguments: list[str], expected: str) -> None:
    assert keygen(tmp_path, "--out", "agent.jwk").returncode == 0
    base = {"--key": str(tmp_path / "agent.jwk"), "--issuer": ISSUER, "--sub": "u",
            "--audience": "aud"}  # fmt: skip
    for option, value in zip(arguments[::2], arguments[1::2], strict=True):
        base[option] = value
    result = run([*PYTHON_M, "token", *(x for pair in base.items() for x in pair)])
    assert_one_line_error(result, expected)


def test_token_with_a_missing_key_file(tmp_path: Path) -> None:
    result = run([*PYTHON_M, "token", "--key", str(tmp_path / "nope.jwk"), "--issuer", ISSUER,
                  "--sub", "u", "--audience", "a"])  # fmt: skip
    assert_one_line_error(result, "cannot read")


@pytest.mark.parametrize("command", ["token", "send", "check"])
def test_the_public_jwks_given_as_the_key_is_named(tmp_path: Path, command: str) -> None:
    """keygen wrote both files; --key got the one to publish. Its error says so, rather than
    that the document lacks a `kty`."""
    assert keygen(tmp_path, "--out", "agent.jwk", "--jwks", "jwks.json").returncode == 0
    argv = {
        "token": ["token", "--sub", "u"],
        "send": ["send", "http://127.0.0.1:9", "Hello", "--sub", "u"],
        "check": ["check", "http://127.0.0.1:9"],
    }[command]
    options = ["--key", "jwks.json", "--issuer", ISSUER, "--audience", "a"]
    result = run([*PYTHON_M, *argv, *options], cwd=tmp_path)
    assert_one_line_error(
        result,
        f"pactmw {command}: error: jwks.json: a JWKS (the public keys to publish), not a "
        "private JWK",
    )


DELEGATED_CARD_CONFIG = """\
base_url = "http://127.0.0.1:{port}"
audience = "urn:aud"
store = "memory://"
data_dir = "{data}"

[[agents]]
issuer = "https://pa.example"
jwks_uri = "https://pa.example/.well-known/jwks.json"

[brands.acme]
name = "Acme Support"
description = "Orders and returns."
handler = "pactmw.demo:demo_bot"

[brands.acme.delegation]
login_url = "/login"
scopes = {{ "orders:read" = "Look up your orders", "orders:cancel" = "Cancel an order" }}

[brands.globex]
name = "Globex Help"
handler = "pactmw.demo:demo_bot"
"""


@pytest.fixture
def card_provider(tmp_path: Path) -> Iterator[str]:
    """Our Provider in this process: acme offers delegation, globex is Identity only."""
    from pactmw.adapters.asgi import A2AProviderApp
    from pactmw.provider import Provider, ProviderSettings, load_toml
    from tests.support.servers import uvicorn_server

    port = free_port()
    config = tmp_path / "pactmw.toml"
    config.write_text(DELEGATED_CARD_CONFIG.format(port=port, data=tmp_path / "data"))
    provider = Provider.from_settings(ProviderSettings.from_mapping(load_toml(str(config))))
    try:
        with uvicorn_server(A2AProviderApp(provider), port=port) as base_url:
            yield base_url
    finally:
        provider.close()


def test_card_from_a_brand_domain_that_redirects(card_provider: str) -> None:
    from tests.support.jwks_server import Mode

    card = f"{card_provider}/a2a/acme/.well-known/agent-card.json"
    with JwksServer() as brand_site:
        brand_site.redirect_location = card
        brand_site.mode = Mode.REDIRECT
        result = run([*PYTHON_M, "card", brand_site.base_url])
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        "Acme Support",
        "  Orders and returns.",
        f"card:        {card}",
        f"interface:   {card_provider}/a2a/acme",
        "identity:    platformJwt (Bearer JWT)",
        "delegation:  userDelegation (OAuth device code), scopes:",
        "  orders:read    Look up your orders",
        "  orders:cancel  Cancel an order",
    ]


def test_card_json_and_identity_only_brand(card_provider: str) -> None:
    card = f"{card_provider}/a2a/globex/.well-known/agent-card.json"
    result = run([*PYTHON_M, "card", card, "--json"])
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary == {
        "name": "Globex Help",
        "description": "",
        "card_url": card,
        "interface_url": f"{card_provider}/a2a/globex",
        "identity_scheme": "platformJwt",
        "delegation": None,
        "skills": [],
    }
    text = run([*PYTHON_M, "card", card])
    assert "delegation:  none (PACT Identity only)" in text.stdout
    delegated = json.loads(
        run([*PYTHON_M, "card", card.replace("globex", "acme"), "--json"]).stdout
    )["delegation"]
    assert delegated["scheme"] == "userDelegation"
    assert delegated["metadata_url"] == (
        f"{card_provider}/a2a/acme/oauth/.well-known/oauth-authorization-server"
    )
    assert [s["id"] for s in delegated["scopes"]] == ["orders:read", "orders:cancel"]


def test_card_errors(card_provider: str) -> None:
    missing = run([*PYTHON_M, "card", f"{card_provider}/a2a/nope/.well-known/agent-card.json"])
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert missing.stderr.startswith("pactmw card: error: ")
    assert "HTTP 404" in missing.stderr
    assert len(missing.stderr.splitlines()) == 1
    clear = run([*PYTHON_M, "card", "http://shop.example"])
    assert_one_line_error(clear, "plain http is allowed only to loopback hosts")
    # A Provider's own root is no Brand's domain: the 404 says where its cards are.
    root = run([*PYTHON_M, "card", card_provider])
    assert root.returncode == 1
    assert len(root.stderr.splitlines()) == 1, root.stderr
    assert "HTTP 404" in root.stderr
    assert "a Provider serves each Brand's card at /a2a/{brand}/.well-known/" in root.stderr
    assert "/a2a/{brand}/" not in missing.stderr  # a card URL's 404 is the Brand's absence


BEARER = {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}


def card_document(
    interface: str, schemes: dict[str, Any], requirements: list[dict[str, Any]]
) -> dict[str, Any]:
    """An Agent Card with one HTTP+JSON 1.0 interface and the given security."""
    return {
        "name": "Acme",
        "description": "",
        "version": "1",
        "supportedInterfaces": [
            {"url": interface, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
        "securitySchemes": schemes,
        "securityRequirements": requirements,
    }


def test_an_https_card_naming_a_plain_http_interface_is_refused() -> None:
    """The interface would take the agent's token over plain http, though the card came over
    https: one error line naming both, not a summary that prints it as the interface."""
    with JwksServer(tls=True) as served, JwksServer() as plain:
        interface = plain.url_for("/a2a/acme")
        served.set_json(
            "/card.json",
            card_document(
                interface,
                {"platformJwt": BEARER},
                [{"schemes": {"platformJwt": {"list": []}}}],
            ),
        )
        card = served.url_for("/card.json")
        result = run([*PYTHON_M, "card", card], env={"SSL_CERT_FILE": served.ca_file})
        assert plain.total_hits == 0
    assert result.returncode == 1, result.stdout
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"pactmw card: error: agent card at {card}: plain http interface {interface} refused "
        "(the card came over https)"
    ]


def test_check_delegated_sends_no_token_to_plain_http_endpoints_of_an_https_card(
    tmp_path: Path,
) -> None:
    """`pactmw check --delegated` posts the agent's token to the card's device authorization
    endpoint itself: an https card naming it over plain http fails the scheme check, naming
    the endpoint, and nothing reaches it (as `DeviceCodeClient` refuses it)."""
    key = tmp_path / "agent.jwk"
    key.write_text(json.dumps(generate_private_jwk("ES256").to_dict()))
    with JwksServer(tls=True) as served, JwksServer() as plain:
        device = plain.url_for("/oauth/device_authorization")
        flow = {
            "deviceAuthorizationUrl": device,
            "tokenUrl": served.url_for("/oauth/token"),
            "scopes": {"orders:read": "Read your orders"},
        }
        served.set_json(
            "/card.json",
            card_document(
                served.url_for("/a2a/acme"),
                {
                    "platformJwt": BEARER,
                    "userDelegation": {
                        "oauth2SecurityScheme": {
                            "flows": {"deviceCode": flow},
                            "oauth2MetadataUrl": served.url_for("/oauth/metadata"),
                        }
                    },
                },
                [
                    {"schemes": {"platformJwt": {"list": []}}},
                    {"schemes": {"platformJwt": {"list": []}, "userDelegation": {"list": []}}},
                ],
            ),
        )
        # Metadata that agrees with the card, so that the checks go on to post to the device
        # endpoint (as they did before the rule).
        served.set_json(
            "/oauth/metadata",
            {
                "issuer": served.url_for("/oauth"),
                "device_authorization_endpoint": device,
                "token_endpoint": served.url_for("/oauth/token"),
                "jwks_uri": served.url_for("/oauth/jwks.json"),
            },
        )
        served.set_json(
            "/oauth/jwks.json", public_key_set([generate_private_jwk("ES256")]).to_dict()
        )
        card = served.url_for("/card.json")
        argv = ["check", "--issuer", ISSUER, "--key", str(key), "--audience", "aud"]
        result = run([*PYTHON_M, *argv, "--delegated", card], env={"SSL_CERT_FILE": served.ca_file})
        assert plain.total_hits == 0
    # The scheme check fails on it, so no later check posts the token there (the server
    # would have answered such a POST 501).
    scheme_line = next(
        line for line in result.stdout.splitlines() if "delegated: card scheme" in line
    )
    assert scheme_line.startswith("FAIL"), result.stdout
    assert (
        f"agent card at {card}: plain http device authorization endpoint {device} refused"
        in scheme_line
    )
    assert "device authorization refusals" not in result.stdout
    assert result.returncode == 1


@pytest.mark.parametrize("url", ["http://[::1", "https://[shop.example]"])
def test_a_malformed_url_is_a_usage_error(tmp_path: Path, url: str) -> None:
    """A bracketed host that is no IPv6 address: urlsplit raises, and each command that takes
    a card URL says so in one line, as for any other bad URL."""
    key = tmp_path / "agent.jwk"
    key.write_text(json.dumps(generate_private_jwk("ES256").to_dict()))
    check = ["check", "--issuer", ISSUER, "--key", str(key), "--audience", "aud"]
    for argv, what in (
        (["card", url], "URL"),
        ([*check, url], "URL"),
        ([*check, "https://shop.example", "--other-brand", url], "--other-brand"),
    ):
        result = run([*PYTHON_M, *argv], cwd=tmp_path)
        assert_one_line_error(result, f"pactmw {argv[0]}: error: {what}: not a valid URL: ")
