"""`pactmw demo`: a personal agent talks to a real `pactmw serve`, on 127.0.0.1 only.

The personal agent's side uses the standard library alone (urllib, http.server), so the demo
runs from an installed package with no dev dependencies but uvicorn, which `pactmw serve`
needs. The Brand's bot is `demo_bot` below, imported by the server as `pactmw.demo:demo_bot`.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from email.message import Message
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, TextIO

import pactmw
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.provider.brand import Turn

ISSUER = "https://pa.example"
BRAND_ID = "acme"
JWKS_PATH = "/.well-known/jwks.json"
#: When set (by the demo, for the server process), `demo_bot` appends one line per run here,
#: so the demo can show that a retried message did not run the bot again.
BOT_LOG_ENV = "PACTMW_DEMO_BOT_LOG"
START_TIMEOUT = 20.0
REQUEST_TIMEOUT = 10.0


# -- the Brand's bot -------------------------------------------------------------------------

ORDERS: Mapping[str, tuple[str, str, str]] = MappingProxyType(
    {
        "A-1001": ("walnut desk lamp", "shipped", "Thursday"),
        "A-1002": ("linen throw", "being packed", "next Monday"),
    }
)
_ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{4})\b", re.IGNORECASE)


def _order_in(text: str) -> str | None:
    found = _ORDER_NUMBER.search(text)
    return found.group(1).upper() if found else None


def demo_bot(turn: Turn) -> str:
    """Acme's support bot: asks for an order number, then answers about that order.

    It remembers the order of the conversation through `turn.history`, which pactmw keeps.
    """
    log = os.environ.get(BOT_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{turn.context_id} {turn.message_id}\n")
    number = _order_in(turn.text)
    mentioned = number is not None
    for earlier in reversed(turn.history):
        if number is not None:
            break
        number = _order_in(earlier.text)
    if number is None:
        return "Happy to help! What's your order number? It looks like A-1001."
    order = ORDERS.get(number)
    if order is None:
        return f"I can't find order {number}. Could you check the number?"
    item, status, eta = order
    if mentioned:
        return f"Order {number} ({item}) is {status}."
    if "arriv" in turn.text.lower() or "when" in turn.text.lower():
        return f"Order {number} should arrive {eta}."
    return f"Anything else about order {number}? It is {status}."


# -- the demo ------------------------------------------------------------------------------


class DemoFailed(Exception):
    """A step did not behave as PACT 1.0 says; the message says what was expected."""


class _Answer(NamedTuple):
    status: int
    headers: Message
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise DemoFailed(f"expected a JSON body, got {self.body[:200]!r}") from exc


def _http(
    method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
) -> _Answer:
    """One request; 4xx/5xx answers are returned, not raised."""
    # Never through a proxy: everything here is on 127.0.0.1 (urllib honours http_proxy).
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    # S310: the URLs are built here, http on 127.0.0.1.
    request = urllib.request.Request(url, body, dict(headers or {}), method=method)  # noqa: S310
    try:
        with opener.open(request, timeout=REQUEST_TIMEOUT) as response:
            return _Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return _Answer(error.code, error.headers, error.read())
    except OSError as exc:
        raise DemoFailed(f"{method} {url} failed: {exc}") from exc


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Transcript:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.steps = 0

    def step(self, title: str) -> None:
        self.steps += 1
        self.line()
        self.line(f"[{self.steps}] {title}")

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        self.line(f"    {text}")

    def say(self, speaker: str, listener: str, text: str) -> None:
        self.line(f"    {speaker} → {listener}: {json.dumps(text, ensure_ascii=False)}")


class _PersonalAgent:
    """The personal agent's side: its key, its JWKS server and its A2A calls."""

    def __init__(self, key: PrivateJWK) -> None:
        self.key = key
        document = json.dumps({"keys": [key.public.to_dict()]}).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = self.path.split("?")[0] == JWKS_PATH
                body = document if found else b"not found"
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json" if found else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.jwks_uri = f"http://127.0.0.1:{self.server.server_address[1]}{JWKS_PATH}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def token(self, sub: str, audience: str) -> str:
        """A PACT personal-agent JWT: ES256, typ JWT, kid, exp = iat + 120 s."""
        iat = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": sub,
            "aud": audience,
            "iat": iat,
            "exp": iat + 120,
            "jti": str(uuid.uuid4()),
        }
        return sign_compact(claims, self.key, typ="JWT")

    def send(
        self,
        interface: str,
        text: str,
        *,
        token: str | None,
        context_id: str | None = None,
        message_id: str | None = None,
    ) -> tuple[_Answer, str]:
        """POST message:send; returns the answer and the messageId used."""
        message_id = message_id or str(uuid.uuid4())
        message: dict[str, Any] = {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        if context_id is not None:
            message["contextId"] = context_id
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        body = json.dumps({"message": message}).encode()
        return _http("POST", f"{interface}/message:send", body, headers), message_id


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise DemoFailed(message)


def _reply(answer: _Answer, what: str) -> tuple[str, str]:
    """The text and contextId of a 200 message:send answer."""
    _expect(
        answer.status == 200,
        f"{what}: expected 200, got {answer.status} {answer.body[:300]!r}",
    )
    message = answer.json().get("message")
    _expect(isinstance(message, dict), f"{what}: no message in {answer.body[:300]!r}")
    _expect(message.get("role") == "ROLE_AGENT", f"{what}: reply role is not ROLE_AGENT")
    texts = [p["text"] for p in message.get("parts", []) if isinstance(p.get("text"), str)]
    context_id = message.get("contextId")
    _expect(bool(texts) and isinstance(context_id, str), f"{what}: reply lacks text or contextId")
    return "\n".join(texts), context_id


def _error_reason(answer: _Answer) -> tuple[str, str]:
    error = answer.json().get("error", {})
    details = error.get("details") or [{}]
    return str(details[0].get("reason")), str(error.get("message"))


def _config(port: int, jwks_uri: str) -> str:
    base = f"http://127.0.0.1:{port}"
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
"""


class _Server(NamedTuple):
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path


def _start_server(workdir: Path, config: Path, port: int, bot_log: Path) -> _Server:
    """`python -m pactmw serve` in `workdir`, until it accepts connections."""
    log = workdir / "serve.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{BOT_LOG_ENV: str(bot_log)})
    # The server runs in the temporary directory: make sure this very pactmw is importable
    # there even when it was found through a relative PYTHONPATH.
    package_root = str(Path(pactmw.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
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
                f"pactmw serve exited with {process.returncode} before listening:\n" + _tail(log)
            )
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return _Server(process, f"http://127.0.0.1:{port}", log)
        time.sleep(0.05)
    _stop(process)
    raise DemoFailed(f"pactmw serve did not listen within {START_TIMEOUT:.0f} s:\n" + _tail(log))


def _stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return process.returncode


def _tail(log: Path, lines: int = 20) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join("    | " + line for line in text.splitlines()[-lines:])


def _bot_runs(bot_log: Path, message_id: str) -> int:
    try:
        lines = bot_log.read_text().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if line.endswith(" " + message_id))


class _Demo:
    """The story, one method per step; `close` stops whatever was started."""

    def __init__(self, t: _Transcript, workdir: Path) -> None:
        self.t = t
        self.workdir = workdir
        self.bot_log = workdir / "bot-runs.log"
        self.agent: _PersonalAgent | None = None
        self.server: _Server | None = None

    def run(self) -> None:
        t = self.t
        t.step("The personal agent's signing key")
        key = generate_private_jwk("ES256")
        t.note(f"ES256 (P-256) key generated, kid {key.kid}")

        t.step("The personal agent publishes its public key")
        agent = self.agent = _PersonalAgent(key)
        t.note(f"JWKS at {agent.jwks_uri} (1 key, no private members)")

        t.step("Acme's Provider: pactmw serve")
        server = self.start_server(agent.jwks_uri)
        audience = f"{server.base_url}/a2a"

        t.step("The Agent Card (no authentication)")
        interface = self.read_card(server.base_url)

        t.step("A conversation; every request carries a JWT the personal agent signs")
        sub = "user-" + uuid.uuid4().hex[:8]
        t.note(f"JWT header: alg ES256, typ JWT, kid {key.kid}")
        t.note(f"JWT claims: iss {ISSUER}, sub {sub}, aud {audience},")
        t.note("            iat now, exp iat + 120 s, a fresh jti per request")
        turns = ("Hi! Where is my order?", "It's A-1001.", "When will it arrive?")
        context_id, message_id, first_body = self.converse(interface, sub, audience, turns)

        t.step("Retry: the last message again, same messageId (as after a lost response)")
        self.retry(interface, sub, audience, turns[-1], context_id, message_id, first_body)

        t.step("Refusals")
        self.refusals(interface, sub, audience, context_id)

        t.step("Stop the Provider")
        status = _stop(server.process)
        _expect(status == 0, f"pactmw serve exited with {status}:\n{_tail(server.log)}")
        t.note("SIGTERM sent; pactmw serve shut down cleanly (exit status 0)")

    def start_server(self, jwks_uri: str) -> _Server:
        t = self.t
        port = _free_port()
        config = self.workdir / "pactmw.toml"
        config.write_text(_config(port, jwks_uri), encoding="utf-8")
        t.note(f"config {config}")
        t.note(f"brand {BRAND_ID!r} (pactmw.demo:demo_bot), agent {ISSUER}")
        t.note("store: the embedded default, sqlite:///.pactmw/pactmw.db in that directory")
        t.note(f"$ python -m pactmw serve --config {config.name} --port {port}")
        server = self.server = _start_server(self.workdir, config, port, self.bot_log)
        t.note(f"listening on {server.base_url} (pid {server.process.pid})")
        return server

    def read_card(self, base_url: str) -> str:
        """Fetch and check the card; return the HTTP+JSON 1.0 interface URL."""
        t = self.t
        card_url = f"{base_url}/a2a/{BRAND_ID}/.well-known/agent-card.json"
        answer = _http("GET", card_url)
        _expect(answer.status == 200, f"card: expected 200, got {answer.status}")
        card = answer.json()
        # Personal agents pick the interface by binding and version, not by position.
        interface = next(
            (
                i.get("url")
                for i in card.get("supportedInterfaces", [])
                if i.get("protocolBinding") == "HTTP+JSON" and i.get("protocolVersion") == "1.0"
            ),
            None,
        )
        if not isinstance(interface, str):
            raise DemoFailed("card: no HTTP+JSON 1.0 interface")
        scheme = next(iter(card["securityRequirements"][0]["schemes"]))
        bearer = card["securitySchemes"][scheme].get("httpAuthSecurityScheme", {})
        _expect(
            bearer.get("scheme") == "Bearer" and bearer.get("bearerFormat") == "JWT",
            f"card: security scheme {scheme!r} is not a Bearer JWT",
        )
        t.note(f"GET {card_url} → {answer.status}")
        t.note(f"card: name {card.get('name')!r}")
        t.note(f"card: interface {interface} (HTTP+JSON 1.0)")
        t.note(f"card: identity scheme {scheme!r} (Bearer, JWT)")
        return interface

    def converse(
        self, interface: str, sub: str, audience: str, turns: tuple[str, ...]
    ) -> tuple[str, str, bytes]:
        """Send `turns` in one conversation; return its contextId, the last messageId and
        the last reply's bytes."""
        t, agent = self.t, self._agent()
        context_id: str | None = None
        message_id, body, reply = "", b"", ""
        for number, text in enumerate(turns, start=1):
            t.say("PA", "Acme", text)
            answer, message_id = agent.send(
                interface, text, token=agent.token(sub, audience), context_id=context_id
            )
            reply, returned = _reply(answer, f"turn {number}")
            t.say("Acme", "PA", reply)
            if context_id is None:
                t.note(f"{answer.status} OK, new contextId {returned}")
            else:
                _expect(
                    returned == context_id,
                    f"turn {number}: contextId changed from {context_id} to {returned}",
                )
                t.note(f"{answer.status} OK, same contextId")
            context_id, body = returned, answer.body
        _expect(context_id is not None, "no turns were sent")
        _expect("arrive" in reply, "the last turn: the bot did not remember the order")
        return str(context_id), message_id, body

    def retry(
        self,
        interface: str,
        sub: str,
        audience: str,
        text: str,
        context_id: str,
        message_id: str,
        first_body: bytes,
    ) -> None:
        t, agent = self.t, self._agent()
        runs_before = _bot_runs(self.bot_log, message_id)
        t.say("PA", "Acme", text)
        t.note(f"(messageId {message_id}, sent before)")
        answer, _ = agent.send(
            interface,
            text,
            token=agent.token(sub, audience),
            context_id=context_id,
            message_id=message_id,
        )
        reply, _ = _reply(answer, "retry")
        t.say("Acme", "PA", reply)
        _expect(answer.body == first_body, "retry: the reply differs from the first one")
        runs_after = _bot_runs(self.bot_log, message_id)
        _expect(runs_before == runs_after == 1, f"retry: the bot ran {runs_after} times")
        t.note(f"{answer.status} OK, reply byte-identical to the first ({len(first_body)} bytes)")
        t.note(f"bot runs for this messageId: {runs_after} (the retry did not run the bot again)")

    def refusals(self, interface: str, sub: str, audience: str, context_id: str) -> None:
        t, agent = self.t, self._agent()
        answer, _ = agent.send(interface, "Hello?", token=None)
        challenge = answer.headers.get("WWW-Authenticate")
        _expect(
            answer.status == 401 and challenge == 'Bearer realm="a2a"' and not answer.body,
            f"no token: expected 401 with a challenge, got {answer.status} {challenge!r}",
        )
        t.note(f"no Authorization header → {answer.status}, WWW-Authenticate: {challenge}")
        other = "user-" + uuid.uuid4().hex[:8]
        answer, _ = agent.send(
            interface,
            "What did they order?",
            token=agent.token(other, audience),
            context_id=context_id,
        )
        _expect(answer.status == 400, f"foreign contextId: expected 400, got {answer.status}")
        reason, message = _error_reason(answer)
        _expect(
            reason == "INVALID_PARAMS" and message == "Unknown contextId",
            f"foreign contextId: expected INVALID_PARAMS 'Unknown contextId', got {reason}",
        )
        t.note(f"another user ({other}) sends the contextId of {sub}")
        t.note(f"  → {answer.status} {reason} {message!r} (as for a context that does not exist)")

    def _agent(self) -> _PersonalAgent:
        assert self.agent is not None
        return self.agent

    def close(self) -> None:
        if self.server is not None:
            _stop(self.server.process)
        if self.agent is not None:
            self.agent.close()


def run_demo(*, keep: bool = False, out: TextIO | None = None) -> int:
    """Run the demo, printing its transcript to `out` (stdout); 0 when every step passed."""
    t = _Transcript(out or sys.stdout)
    workdir = Path(tempfile.mkdtemp(prefix="pactmw-demo-"))
    started = time.monotonic()
    t.line("pactmw demo: a personal agent (PA) talks to Acme's support bot through pactmw")
    t.line("(PACT 1.0 Identity over A2A HTTP+JSON, everything on 127.0.0.1)")
    t.note(f"working directory {workdir}")
    demo = _Demo(t, workdir)
    failure: str | None = None
    try:
        demo.run()
    except DemoFailed as exc:
        failure = str(exc)
    except Exception as exc:  # a broken answer the checks did not foresee: still one message
        failure = f"unexpected {type(exc).__name__}: {exc}"
    finally:
        demo.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    t.line()
    if failure is not None:
        t.line(f"demo FAILED at step {t.steps}: {failure}")
    else:
        t.line(f"demo complete in {time.monotonic() - started:.1f} s")
    if keep:
        t.line(f"kept {workdir} (config, sqlite store, server log)")
    return 0 if failure is None else 1
