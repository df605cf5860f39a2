"""`pactmw demo`: a personal agent talks to a real `pactmw serve`, on 127.0.0.1 only.

The story has two parts. PACT Identity: the personal agent signs a JWT per request and holds
a conversation with Acme's bot. PACT Delegated: the bot needs the user's Acme account, so the
personal agent gets a delegation token through the device flow; the person signs in at
Acme's own login (`pactmw.brand_login.DevelopmentBrandLogin`, in a thread of this process),
approves some scopes on the Provider's consent page, and every delegated reply carries a
receipt the personal agent verifies; finally the operator revokes the grant with
`pactmw grants revoke`.

The personal agent's and the person's sides use the standard library alone (urllib,
http.server, a cookie jar), so the demo runs from an installed package with no dev
dependencies but uvicorn, which `pactmw serve` needs. The Brand's bot is `demo_bot` below,
imported by the server as `pactmw.demo:demo_bot`, with its account actions in `demo_tools`.
"""

from __future__ import annotations

import html
import http.cookiejar
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
from collections.abc import Mapping, Sequence
from email.message import Message
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, NamedTuple, TextIO
from urllib.parse import urlencode

import pactmw
from pactmw.brand_login import BrandUser, DevelopmentBrandLogin, consent_url_for
from pactmw.core.errors import JoseError, MalformedInput
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jose import parse_compact, sign_compact, verify_signature
from pactmw.core.jwk import KeySet, PrivateJWK, generate_private_jwk, parse_jwks
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    BrokerKeys,
    ConsentPresenter,
    ParafeError,
    ReceiptVerifier,
    activation_headers,
    agent_did,
    consent_ref,
    parse_card_extension,
)
from pactmw.provider.brand import Turn
from pactmw.provider.tools import ToolRegistry

ISSUER = "https://pa.example"
BRAND_ID = "acme"
JWKS_PATH = "/.well-known/jwks.json"
#: When set (by the demo, for the server process), `demo_bot` appends one line per run here,
#: so the demo can show that a retried message did not run the bot again.
BOT_LOG_ENV = "PACTMW_DEMO_BOT_LOG"
START_TIMEOUT = 20.0
REQUEST_TIMEOUT = 10.0
#: The Delegated part: Acme's scopes (card order) and the person who signs in at Acme.
SCOPES: Mapping[str, str] = MappingProxyType(
    {
        "orders:read": "Look up your orders and their status",
        "orders:cancel": "Cancel an order that has not shipped",
    }
)
DEMO_USER = BrandUser(
    username="jane",
    password="demo-password",  # noqa: S106 - the demo's printed, throwaway password
    account="acct-jane",
    email="jane@example.com",
)
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
RECEIPT_TYP = "pact-receipt+jws"
ACCESS_TOKEN_TYP = "at+jwt"  # noqa: S105 - a JOSE typ, not a secret
DELEGATION_ALGS = frozenset({"ES256", "RS256"})


# -- the Brand's bot -------------------------------------------------------------------------

ORDERS: Mapping[str, tuple[str, str, str]] = MappingProxyType(
    {
        "A-1001": ("walnut desk lamp", "shipped", "Thursday"),
        "A-1002": ("linen throw", "being packed", "next Monday"),
    }
)
_ORDER_NUMBER = re.compile(r"\b([A-Z]-\d{4})\b", re.IGNORECASE)


#: Which orders each Acme account has (what the account tools see).
ACCOUNT_ORDERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {DEMO_USER.account: ("A-1001", "A-1002")}
)


def _order_in(text: str) -> str | None:
    found = _ORDER_NUMBER.search(text)
    return found.group(1).upper() if found else None


#: Acme's account actions (PACT Delegated): each needs a scope the user approved, and every
#: call that runs is recorded in the signed receipt of the reply.
demo_tools = ToolRegistry()


@demo_tools.tool(scope="orders:read")
def list_orders(account: str) -> list[str]:
    """The order numbers of an Acme account."""
    return list(ACCOUNT_ORDERS.get(account, ()))


@demo_tools.tool(scope="orders:cancel", write=True)
def cancel_order(account: str, order: str) -> str:
    """Cancel an order of the account (a write action: its arguments are hashed in receipts)."""
    if order not in ACCOUNT_ORDERS.get(account, ()):
        return f"I can't find order {order} on your account."
    return f"Order {order} is cancelled; the refund posts in 3-5 days."


def _describe(number: str) -> str:
    item, status, _ = ORDERS.get(number, ("an item", "unknown", ""))
    return f"{number} ({item}, {status})"


def demo_bot(turn: Turn) -> str:
    """Acme's support bot: asks for an order number, then answers about that order.

    It remembers the order of the conversation through `turn.history`, which pactmw keeps.
    Questions about "my orders" and cancellations act on the user's Acme account through
    `turn.tools` (PACT Delegated): without the needed scope pactmw turns them into a step-up.
    """
    log = os.environ.get(BOT_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{turn.context_id} {turn.message_id}\n")
    lowered = turn.text.lower()
    if turn.parafe.enabled and "reorder" in lowered:
        return _reorder(turn)
    if "cancel" in lowered:
        target = _order_in(turn.text)
        if target is None:
            return "Which order should I cancel?"
        return str(turn.tools.cancel_order(order=target))
    if "my orders" in lowered:
        orders = turn.tools.list_orders()
        if not orders:
            return "I don't see any orders on your account."
        return "Your orders: " + "; ".join(_describe(number) for number in orders) + "."
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


def _reorder(turn: Turn) -> str:
    """A Parafé-scoped action: only with broker-issued consent for `create_order` (raises
    `ParafeRefused` otherwise, which pactmw answers with the Parafé error and a receipt)."""
    original = _order_in(turn.text) or "A-1001"
    turn.parafe.require("create_order", details={"reorder_of": original})
    number = f"R-{uuid.uuid4().int % 9000 + 1000}"
    turn.parafe.complete("create_order", business_ref=number)
    item = ORDERS.get(original, ("the same item", "", ""))[0]
    return f"Done: order {number} is a copy of {original} ({item}); it ships tomorrow."


# -- Parafé: a stand-in broker for the demo (stdlib only, 127.0.0.1) ------------------------

PARAFE_ACME = "prf_agent_acmedemo"
PARAFE_PA = "prf_agent_padem0"
PARAFE_SCOPE = "reorder"


def _parafe_did_document(agent_id: str, key: PrivateJWK) -> dict[str, Any]:
    did = agent_did(agent_id)
    return {
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": did,
        "verificationMethod": [
            {
                "id": f"{did}#keys-1",
                "type": "JsonWebKey2020",
                "controller": did,
                "publicKeyJwk": dict(key.public.members),
            }
        ],
        "authentication": [f"{did}#keys-1"],
        "assertionMethod": [f"{did}#keys-1"],
    }


class _DemoBroker:
    """A stand-in Parafé broker (demo only): its JWKS, agents' DID documents, and consent
    tokens it "issues" in this process, signed with its ES256 key as the broker signs them
    (the real handshake runs through api.parafe.ai)."""

    def __init__(self) -> None:
        self.key = generate_private_jwk("ES256")
        self.acme_key = generate_private_jwk("EdDSA")  # Acme's registered Parafé key
        self.pa_key = generate_private_jwk("EdDSA")  # the personal agent's
        documents = {
            f"/agents/{agent}/did.json": json.dumps(_parafe_did_document(agent, key)).encode()
            for agent, key in ((PARAFE_ACME, self.acme_key), (PARAFE_PA, self.pa_key))
        }
        documents[JWKS_PATH] = json.dumps(
            {"keys": [{**self.key.public.to_dict(), "use": "sig", "status": "active"}]}
        ).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = documents.get(self.path.split("?")[0])
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def config(self, workdir: Path) -> str:
        """The `[brands.acme.parafe]` table (Acme's receipt key written beside the config)."""
        (workdir / "acme-parafe.jwk").write_text(json.dumps(self.acme_key.to_dict()))
        return f"""
# Parafé (A2A extension v2): the bot's "reorder" needs broker-issued consent.
[brands.{BRAND_ID}.parafe]
agent_id = "{PARAFE_ACME}"
broker_url = "{self.url}"
allow_http_broker_on_loopback = true   # the demo's stand-in broker, on 127.0.0.1
signing_key = "acme-parafe.jwk"        # Acme's registered key: signs action receipts

[brands.{BRAND_ID}.parafe.scope_requirements.{PARAFE_SCOPE}]
permissions = ["create_order"]
minimum_authorization_modality = "autonomous"
"""

    def consent(self) -> ConsentPresenter:
        """A consent token for the personal agent to reorder at Acme, and its presenter."""
        now = int(time.time())
        session_id = "sess_" + uuid.uuid4().hex
        claims = {
            "ver": 2,
            "iss": "parafe-trust-broker",
            "sub": PARAFE_PA,
            "aud": agent_did(PARAFE_ACME),
            "iat": now,
            "exp": now + 300,
            "jti": str(uuid.uuid4()),
            "scope": PARAFE_SCOPE,
            "permissions": ["create_order"],
            "exclusions": ["issue_refund"],
            "excluded": ["issue_refund"],
            "session_id": session_id,
            "token_type": "consent",
            "authorization_modality": "autonomous",
            "initiator_agent_id": PARAFE_PA,
            "target_agent_id": PARAFE_ACME,
            "parent_token_id": None,
            "cnf": {"jkt": self.pa_key.public.thumbprint},
            "initiator_proof": "pop",
            "initiator_proof_at": now,
        }
        token = sign_compact(claims, self.key)
        return ConsentPresenter(token=token, session_id=session_id, key=self.pa_key)


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

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _http(
    method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
) -> _Answer:
    """One request; 4xx/5xx answers are returned, not raised."""
    # Never through a proxy: everything here is on 127.0.0.1 (urllib honours http_proxy).
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return _open(opener, method, url, body, headers)


def _open(
    opener: urllib.request.OpenerDirector,
    method: str,
    url: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> _Answer:
    # S310: the URLs are built here or read from our own servers' answers, on 127.0.0.1.
    request = urllib.request.Request(url, body, dict(headers or {}), method=method)  # noqa: S310
    try:
        with opener.open(request, timeout=REQUEST_TIMEOUT) as response:
            return _Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return _Answer(error.code, error.headers, error.read())
    except OSError as exc:
        raise DemoFailed(f"{method} {url} failed: {exc}") from exc


def _form_body(fields: Sequence[tuple[str, str]]) -> bytes:
    return urlencode(list(fields)).encode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Let redirects come back as answers, so the transcript can show each hop."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


class _Browser:
    """The person's browser: a cookie jar, forms posted as a browser posts them."""

    def __init__(self) -> None:
        self.cookies = http.cookiejar.CookieJar()
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPCookieProcessor(self.cookies),
            _NoRedirect(),
        )

    def get(self, url: str) -> _Answer:
        return _open(self._opener, "GET", url)

    def post(self, url: str, fields: Sequence[tuple[str, str]]) -> _Answer:
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return _open(self._opener, "POST", url, _form_body(fields), headers)


# -- reading HTML forms the way the reference suite does ------------------------------------

_TAG_ATTRIBUTE = r'\b{}="([^"]*)"'


def _attribute(tag: str, name: str) -> str | None:
    found = re.search(_TAG_ATTRIBUTE.format(re.escape(name)), tag)
    return html.unescape(found.group(1)) if found else None


def _first_form(page: str, what: str) -> tuple[str, str]:
    """The method and absolute action of the first `<form ... action="...">` of a page."""
    found = re.search(r"<form\b[^>]*>", page)
    _expect(found is not None, f"{what}: no form on the page")
    assert found is not None
    action = _attribute(found.group(0), "action")
    _expect(bool(action), f"{what}: the form has no action")
    return (_attribute(found.group(0), "method") or "get").lower(), str(action)


def _input_value(page: str, name: str) -> str | None:
    """The value of the first `<input ... name="NAME" value="...">`."""
    for tag in re.findall(r"<input\b[^>]*>", page):
        if _attribute(tag, "name") == name:
            return _attribute(tag, "value")
    return None


def _checkboxes(page: str, name: str) -> list[tuple[str, str, bool]]:
    """(value, label text, checked) of each `<input type="checkbox" name="NAME" ...>`."""
    boxes = []
    for tag, label in re.findall(r"(<input\b[^>]*>)([^<]*)", page):
        if _attribute(tag, "type") == "checkbox" and _attribute(tag, "name") == name:
            checked = re.search(r"\schecked\b", tag) is not None
            boxes.append((_attribute(tag, "value") or "", html.unescape(label).strip(), checked))
    return boxes


def _text_of(page: str, element: str) -> str:
    """The text of the first `<element>...</element>`, tags stripped."""
    found = re.search(rf"<{element}\b[^>]*>(.*?)</{element}>", page, re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip() if found else ""


def _verified_claims(token: str, keys: KeySet, typ: str, what: str) -> tuple[dict[str, Any], str]:
    """Verify a compact JWS of the Provider against its published keys; its claims and
    "ALG, kid KID"."""
    try:
        jws = parse_compact(token, allowed_algs=DELEGATION_ALGS)
        claims = jws.claims()
    except JoseError as exc:
        raise DemoFailed(f"{what}: not a compact JWS: {exc}") from exc
    _expect(jws.header.get("typ") == typ, f"{what}: typ is {jws.header.get('typ')!r}, not {typ}")
    for key in keys.candidates(jws.kid, jws.alg):
        try:
            verify_signature(jws, key)
        except JoseError:
            continue
        return claims, f"{jws.alg}, kid {jws.kid}"
    raise DemoFailed(f"{what}: the signature does not verify with the Provider's JWKS")


def _unverified_claims(token: str) -> dict[str, Any]:
    """The payload of a JWS the demo made itself, for display."""
    try:
        return parse_compact(token, allowed_algs=DELEGATION_ALGS).claims()
    except JoseError as exc:
        raise DemoFailed(f"not a compact JWS: {exc}") from exc


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

    def part(self, title: str) -> None:
        self.line()
        self.line(f"== {title} ==")

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
        delegation: str | None = None,
    ) -> tuple[_Answer, str]:
        """POST message:send (with `X-A2A-User-Delegation` when `delegation` is a token);
        returns the answer and the messageId used."""
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
        if delegation is not None:
            headers["X-A2A-User-Delegation"] = f"Bearer {delegation}"
        body = json.dumps({"message": message}).encode()
        return _http("POST", f"{interface}/message:send", body, headers), message_id

    def oauth(self, url: str, fields: Sequence[tuple[str, str]], *, token: str) -> _Answer:
        """POST a form to the Brand's authorization server, authenticated by a PACT JWT
        (`client_id` is this personal agent's issuer, spec §5.3)."""
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/x-www-form-urlencoded",
        }
        return _http("POST", url, _form_body([("client_id", ISSUER), *fields]), headers)


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


def _config(port: int, jwks_uri: str, login: DevelopmentBrandLogin) -> str:
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


class _Server(NamedTuple):
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path


def _child_env(**extra: str) -> dict[str, str]:
    """The environment of a `python -m pactmw` run in the temporary directory."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", **extra)
    # Make sure this very pactmw is importable there even when it was found through a
    # relative PYTHONPATH.
    package_root = str(Path(pactmw.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def _start_server(workdir: Path, config: Path, port: int, bot_log: Path) -> _Server:
    """`python -m pactmw serve` in `workdir`, until it accepts connections."""
    log = workdir / "serve.log"
    env = _child_env(**{BOT_LOG_ENV: str(bot_log)})
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
        self.login: DevelopmentBrandLogin | None = None
        self.parafe_broker: _DemoBroker | None = None
        self.browser = _Browser()
        self.last_poll = 0.0

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

        t.part("PACT Delegated: Acme's bot acts on Jane's Acme account (spec §5)")
        self.delegated(server.base_url, interface, sub, audience)

        t.step("Stop the Provider")
        status = _stop(server.process)
        _expect(status == 0, f"pactmw serve exited with {status}:\n{_tail(server.log)}")
        t.note("SIGTERM sent; pactmw serve shut down cleanly (exit status 0)")
        if self.login is not None:
            self.login.close()
            self.login = None
            t.note("Acme's login stopped")

    def start_server(self, jwks_uri: str) -> _Server:
        t = self.t
        port = _free_port()
        # Acme's own login page (brand-mode delegation) must exist before the config names it.
        login = self.login = DevelopmentBrandLogin(
            consent_url=consent_url_for(f"http://127.0.0.1:{port}", BRAND_ID),
            users=[DEMO_USER],
            brand_name="Acme",
        ).start()
        config = self.workdir / "pactmw.toml"
        broker = self.parafe_broker = _DemoBroker()
        config.write_text(
            _config(port, jwks_uri, login) + broker.config(self.workdir), encoding="utf-8"
        )
        t.note(f"config {config}")
        t.note(f"brand {BRAND_ID!r} (pactmw.demo:demo_bot), agent {ISSUER}")
        t.note("store: the embedded default, sqlite:///.pactmw/pactmw.db in that directory")
        t.note(f"Acme's own login (pactmw.brand_login, a thread here): {login.login_url}")
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

    # -- PACT Delegated ------------------------------------------------------------------------

    def delegated(self, base_url: str, interface: str, sub: str, audience: str) -> None:
        """The Delegated profile, one transcript step per method."""
        t = self.t
        t.step("Delegated authority on the card (§5.1) and the RFC 8414 metadata")
        auth = self.read_delegation(base_url, interface)

        t.step("An account question with the PACT JWT alone → step-up (§5.5)")
        context_id = self.step_up_without_token(interface, sub, audience)

        t.step("Device authorization (§5.3): the personal agent asks for Acme's scopes")
        device = self.device_authorization(auth, sub, audience)

        t.step("Jane signs in at Acme's own login (the personal agent only shows the link)")
        consent_url, assertion = self.sign_in(str(device["verification_uri_complete"]))

        t.step("The Provider's consent page: Jane unticks a scope and allows")
        self.consent(consent_url, assertion)

        t.step("The personal agent polls again and gets a delegation token")
        tokens = self.poll_token(auth, device, sub, audience, interface)
        grant_id = str(_unverified_claims(tokens["access_token"])["grant_id"])

        t.step("A delegated turn: the reply carries a signed receipt (§5.6)")
        self.delegated_turn(
            interface,
            "Show me my orders, please.",
            sub,
            audience,
            context_id,
            tokens["access_token"],
            auth,
            grant_id,
            show_receipt=True,
        )

        t.step("A turn that needs the unticked scope → step-up, the conversation stays open")
        self.step_up_with_token(interface, sub, audience, context_id, tokens["access_token"])

        # -- Parafé ---------------------------------------------------------------------------
        t.step("Parafé consent (A2A extension v2): a reorder only with broker-issued consent")
        self.parafe(base_url, interface, sub, audience)
        # -------------------------------------------------------------------------------------

        t.step("Refresh: a new access token, the refresh token rotated")
        tokens = self.refresh(auth, tokens, sub, audience, grant_id)
        self.delegated_turn(
            interface,
            "Show me my orders again.",
            sub,
            audience,
            context_id,
            tokens["access_token"],
            auth,
            grant_id,
            show_receipt=False,
        )

        t.step("The operator revokes the grant: pactmw grants")
        self.revoke(grant_id)

        t.step("After revocation: the delegation token and the refresh token are refused")
        self.after_revocation(interface, sub, audience, context_id, tokens, auth)

    def read_delegation(self, base_url: str, interface: str) -> _AuthServer:
        t = self.t
        card = _http("GET", f"{base_url}/a2a/{BRAND_ID}/.well-known/agent-card.json").json()
        schemes = card.get("securitySchemes", {})
        name, oauth2 = next(
            (
                (key, value["oauth2SecurityScheme"])
                for key, value in schemes.items()
                if isinstance(value, dict) and "oauth2SecurityScheme" in value
            ),
            ("", None),
        )
        _expect(isinstance(oauth2, dict), "card: no oauth2SecurityScheme (delegation)")
        assert isinstance(oauth2, dict)
        flow = oauth2["flows"]["deviceCode"]
        both = [set(r.get("schemes", {})) for r in card.get("securityRequirements", [])]
        identity_only = {card_scheme for card_scheme in schemes if card_scheme != name}
        _expect(
            identity_only in both and identity_only | {name} in both,
            f"card: expected the identity-only requirement and one naming both, got {both}",
        )
        t.note(f"card: security scheme {name!r}, OAuth 2.0 device-code flow; the scopes:")
        for scope, description in flow["scopes"].items():
            t.note(f"  {scope:<14} {description}")
        t.note("card: two securityRequirements: the PACT JWT alone, or with the delegation")
        metadata_url = str(oauth2["oauth2MetadataUrl"])
        metadata = _http("GET", metadata_url).json()
        _expect(
            metadata.get("device_authorization_endpoint") == flow["deviceAuthorizationUrl"]
            and metadata.get("token_endpoint") == flow["tokenUrl"],
            "metadata: the endpoints differ from the card's",
        )
        t.note(f"card: oauth2MetadataUrl {metadata_url}")
        t.note(f"GET it → issuer {metadata['issuer']}")
        t.note(f"  jwks_uri {metadata['jwks_uri']} (the keys of tokens and receipts)")
        return _AuthServer(
            device_url=str(flow["deviceAuthorizationUrl"]),
            token_url=str(flow["tokenUrl"]),
            metadata_url=metadata_url,
            issuer=str(metadata["issuer"]),
        )

    def step_up_without_token(self, interface: str, sub: str, audience: str) -> str:
        t, agent = self.t, self._agent()
        text = "Show me my orders, please."
        t.say("PA", "Acme", text)
        answer, _ = agent.send(interface, text, token=agent.token(sub, audience))
        step_up = _step_up(answer, "no delegation token")
        t.say("Acme", "PA", step_up.message)
        t.note(f"{answer.status} OK: a task in TASK_STATE_AUTH_REQUIRED, contextId")
        t.note(f"  {step_up.context_id} (a new conversation, it stays open)")
        t.note(f"pact.missingScopes {json.dumps(step_up.missing)}")
        t.note(f"pact.verificationUriComplete {step_up.link}")
        _expect(step_up.missing == ["orders:read"], f"step-up: missing {step_up.missing}")
        self._expect_login_link(step_up.link, "step-up link")
        return step_up.context_id

    def _expect_login_link(self, link: str, what: str) -> None:
        login = self._login()
        _expect(link.startswith(login.login_url + "?"), f"{what}: not Acme's login: {link}")

    def device_authorization(self, auth: _AuthServer, sub: str, audience: str) -> dict[str, Any]:
        t, agent = self.t, self._agent()
        scope = " ".join(SCOPES)
        answer = agent.oauth(auth.device_url, [("scope", scope)], token=agent.token(sub, audience))
        _expect(answer.status == 200, f"device authorization: {answer.status} {answer.body!r}")
        device: dict[str, Any] = answer.json()
        t.note(f"POST {auth.device_url}")
        t.note(f"  client_id={ISSUER}&scope={scope}")
        t.note("  Authorization: Bearer <PACT JWT> (the personal agent is the OAuth client)")
        t.note(
            f"→ {answer.status}: user_code {device['user_code']}, "
            f"expires_in {device['expires_in']} s, interval {device['interval']} s"
        )
        t.note(f"verification_uri_complete {device['verification_uri_complete']}")
        t.note("  (the personal agent shows this link to Jane; it never sees the login)")
        self._expect_login_link(str(device["verification_uri_complete"]), "device authorization")
        answer = self._poll(auth, str(device["device_code"]), sub, audience)
        error = answer.json().get("error")
        _expect(
            answer.status == 400 and error == "authorization_pending",
            f"first poll: expected 400 authorization_pending, got {answer.status} {error}",
        )
        t.note(f"first poll of {auth.token_url} → {answer.status} {error}")
        return device

    def _poll(self, auth: _AuthServer, device_code: str, sub: str, audience: str) -> _Answer:
        agent = self._agent()
        self.last_poll = time.monotonic()
        fields = [("grant_type", DEVICE_CODE_GRANT), ("device_code", device_code)]
        return agent.oauth(auth.token_url, fields, token=agent.token(sub, audience))

    def sign_in(self, link: str) -> tuple[str, str]:
        """Jane's browser: Acme's sign-in form, then the page that hands her to the consent
        page; returns its form's action and the assertion."""
        t, browser, login = self.t, self.browser, self._login()
        answer = browser.get(link)
        _expect(answer.status == 200, f"Acme's login: expected 200, got {answer.status}")
        page = answer.text()
        method, action = _first_form(page, "Acme's login")
        return_to = _input_value(page, "return_to")
        _expect(method == "post" and bool(return_to), "Acme's login: no sign-in form")
        assert return_to is not None
        t.note(f"GET {login.login_url}?return_to=… → 200, {_text_of(page, 'h1')!r}")
        t.note(f"  <form method=post action={action}>, hidden return_to")
        t.note(f"  {return_to}")
        elsewhere = "https://evil.example/consent?user_code=BCDF-GHJK"
        refused = browser.get(f"{login.login_url}?{urlencode({'return_to': elsewhere})}")
        _expect(refused.status == 400, f"open redirect: expected 400, got {refused.status}")
        t.note(f"(return_to={elsewhere} → {refused.status}:")
        t.note("  only the Provider's consent URL is accepted, never an open redirect)")
        fields = [("return_to", return_to), ("username", DEMO_USER.username)]
        wrong = browser.post(action, [*fields, ("password", "guess")])
        _expect(wrong.status == 401, f"wrong password: expected 401, got {wrong.status}")
        t.note(f"POST {action} with a wrong password → {wrong.status}, the form again")
        answer = browser.post(action, [*fields, ("password", DEMO_USER.password)])
        _expect(answer.status == 200, f"sign-in: expected 200, got {answer.status}")
        page = answer.text()
        method, consent_url = _first_form(page, "Acme's hand-off page")
        assertion = _input_value(page, "assertion")
        _expect(
            method == "post" and consent_url == login.consent_url and bool(assertion),
            f"hand-off page: expected a POST of an assertion to {login.consent_url}",
        )
        _expect("<script>" in page and "<button" in page, "hand-off page: no auto-submit")
        assert assertion is not None
        claims = _unverified_claims(assertion)
        t.note(f"POST {action} as {DEMO_USER.username} → 200, Acme's hand-off page:")
        t.note(f"  <form method=post action={consent_url}>")
        t.note("  with a hidden assertion: a single-use JWT Acme signs (keys at its JWKS)")
        t.note(
            f"  assertion: iss {claims['iss']}, sub {claims['sub']}, "
            f"user_code {claims['user_code']}, exp iat + {claims['exp'] - claims['iat']} s"
        )
        t.note("  a tiny inline script submits it (a Continue button does without script)")
        return consent_url, assertion

    def consent(self, consent_url: str, assertion: str) -> None:
        t, browser = self.t, self.browser
        answer = browser.post(consent_url, [("assertion", assertion)])
        page = answer.text()
        _expect(
            answer.status == 200,
            f"consent page: expected 200, got {answer.status} {_text_of(page, 'p')!r}",
        )
        boxes = _checkboxes(page, "scope")
        method, decision_url = _first_form(page, "consent page")
        session = _input_value(page, "session")
        _expect(method == "post" and bool(session), "consent page: no decision form")
        assert session is not None
        _expect(
            [box[0] for box in boxes] == list(SCOPES) and all(box[2] for box in boxes),
            f"consent page: expected every requested scope, ticked; got {boxes}",
        )
        t.note(f"POST {consent_url} (the assertion) → {answer.status}, the consent page:")
        t.note(f"  {_text_of(page, 'h1')!r}")
        t.note(f"  signed in as {_text_of(page, 'strong')}; the scopes shown:")
        for scope, label, checked in boxes:
            t.note(f"    [{'x' if checked else ' '}] {label}  ({scope})")
        again = browser.post(consent_url, [("assertion", assertion)])
        _expect(again.status == 400, f"assertion reuse: expected 400, got {again.status}")
        t.note(f"(the same assertion posted again → {again.status}: it is single-use)")
        keep = [box[0] for box in boxes if box[0] != "orders:cancel"]
        t.note(f"Jane unticks [ ] {SCOPES['orders:cancel']} and clicks Allow")
        fields = [("session", session), *(("scope", s) for s in keep), ("decision", "allow")]
        answer = browser.post(decision_url, fields)
        location = answer.headers.get("Location") or ""
        _expect(answer.status == 303 and bool(location), f"decision: got {answer.status}")
        t.note(f"POST {decision_url} → {answer.status}")
        t.note(f"  Location: {location}")
        answer = browser.get(location)
        _expect(answer.status == 200, f"result page: expected 200, got {answer.status}")
        t.note(f"  {_text_of(answer.text(), 'p')!r}")

    def poll_token(
        self, auth: _AuthServer, device: Mapping[str, Any], sub: str, audience: str, interface: str
    ) -> dict[str, Any]:
        t = self.t
        interval = float(device["interval"])
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            time.sleep(max(0.0, self.last_poll + interval - time.monotonic()))
            answer = self._poll(auth, str(device["device_code"]), sub, audience)
            error = answer.json().get("error")
            if answer.status == 200 or time.monotonic() > deadline:
                break
            if error == "slow_down":
                interval += 5  # RFC 8628 §3.5
            elif error != "authorization_pending":
                break
        _expect(answer.status == 200, f"token: expected 200, got {answer.status} {error}")
        tokens: dict[str, Any] = answer.json()
        t.note(
            f"after the {device['interval']} s interval: POST {auth.token_url} → {answer.status}"
        )
        t.note(f"  scope {tokens['scope']!r}: what Jane approved (asked: {' '.join(SCOPES)!r})")
        _expect(tokens["scope"] == "orders:read", f"token: scope {tokens['scope']!r}")
        claims = self._check_access_token(tokens["access_token"], auth, interface)
        t.note(
            f"  access_token: a JWT the Provider signs, {claims['exp'] - claims['iat']} s; "
            f"sub {claims['sub']}, client_id {claims['client_id']}"
        )
        t.note(f"    grant_id {claims['grant_id']}, scope {claims['scope']!r}")
        t.note(f"  refresh_token {str(tokens['refresh_token'])[:8]}… (rotated on each use)")
        return tokens

    def _check_access_token(self, token: str, auth: _AuthServer, interface: str) -> dict[str, Any]:
        claims, _ = _verified_claims(
            token, self._provider_keys(auth), ACCESS_TOKEN_TYP, "delegation token"
        )
        _expect(
            claims.get("iss") == auth.issuer
            and claims.get("aud") == interface
            and claims.get("client_id") == ISSUER
            and claims.get("sub") == DEMO_USER.account,
            f"delegation token: unexpected claims {claims}",
        )
        return claims

    def _provider_keys(self, auth: _AuthServer) -> KeySet:
        """RFC 8414 metadata → jwks_uri → the Provider's public keys, fetched as a personal
        agent does before verifying a receipt."""
        jwks_uri = str(_http("GET", auth.metadata_url).json()["jwks_uri"])
        try:
            return parse_jwks(_http("GET", jwks_uri).json())
        except MalformedInput as exc:
            raise DemoFailed(f"{jwks_uri}: not a JWKS: {exc}") from exc

    def delegated_turn(
        self,
        interface: str,
        text: str,
        sub: str,
        audience: str,
        context_id: str,
        access_token: str,
        auth: _AuthServer,
        grant_id: str,
        *,
        show_receipt: bool,
    ) -> None:
        t, agent = self.t, self._agent()
        t.say("PA", "Acme", text)
        if show_receipt:
            t.note("(Authorization: Bearer <PACT JWT>, X-A2A-User-Delegation: Bearer <token>)")
        answer, _ = agent.send(
            interface,
            text,
            token=agent.token(sub, audience),
            context_id=context_id,
            delegation=access_token,
        )
        reply, returned = _reply(answer, "delegated turn")
        t.say("Acme", "PA", reply)
        _expect(returned == context_id, "delegated turn: the contextId changed")
        _expect("A-1002" in reply, "delegated turn: the bot did not list Jane's orders")
        receipt = answer.json()["message"].get("metadata", {}).get("pact.receipt")
        _expect(
            isinstance(receipt, dict)
            and isinstance(receipt.get("jws"), str)
            and isinstance(receipt.get("claims"), dict),
            "delegated turn: no pact.receipt {jws, claims} in the reply's metadata",
        )
        jwks_uri = str(_http("GET", auth.metadata_url).json()["jwks_uri"])
        signed, how = _verified_claims(
            receipt["jws"], self._provider_keys(auth), RECEIPT_TYP, "receipt"
        )
        _expect(signed == receipt["claims"], "receipt: the signed claims differ from the returned")
        _expect(signed.get("pa") == ISSUER, f"receipt: pa {signed.get('pa')!r}")
        _expect(signed.get("brand") == interface, f"receipt: brand {signed.get('brand')!r}")
        _expect(signed.get("grantId") == grant_id, "receipt: another grant")
        _expect(signed.get("user") == DEMO_USER.account, "receipt: another user")
        _expect(signed.get("scopesUsed") == ["orders:read"], "receipt: scopesUsed")
        if not show_receipt:
            t.note(f"{answer.status} OK, same contextId; receipt verified (grant {grant_id})")
            return
        t.note(f"{answer.status} OK, same contextId; metadata pact.receipt {{jws, claims}}")
        t.note(f"receipt verified: {how}")
        t.note(f"  key from {jwks_uri} (the RFC 8414 metadata's jwks_uri);")
        t.note("  signed claims == returned claims; pa, brand, grantId and user as expected:")
        for key, value in signed.items():
            shown = value if isinstance(value, str) else json.dumps(value)
            t.note(f"    {key:<11} {shown}")

    def step_up_with_token(
        self, interface: str, sub: str, audience: str, context_id: str, access_token: str
    ) -> None:
        t, agent = self.t, self._agent()
        text = "Please cancel order A-1002."
        t.say("PA", "Acme", text)
        answer, _ = agent.send(
            interface,
            text,
            token=agent.token(sub, audience),
            context_id=context_id,
            delegation=access_token,
        )
        step_up = _step_up(answer, "the unticked scope")
        t.say("Acme", "PA", step_up.message)
        _expect(step_up.context_id == context_id, "step-up: the contextId changed")
        _expect(step_up.missing == ["orders:cancel"], f"step-up: missing {step_up.missing}")
        self._expect_login_link(step_up.link, "step-up link")
        t.note(f"{answer.status} OK: TASK_STATE_AUTH_REQUIRED, same contextId; nothing cancelled")
        t.note(f"pact.missingScopes {json.dumps(step_up.missing)}")
        t.note(f"pact.verificationUriComplete {step_up.link}")

    def parafe(self, base_url: str, interface: str, sub: str, audience: str) -> None:
        """One Parafé-verified action and its receipt, then the same proof replayed."""
        t, agent, broker = self.t, self._agent(), self.parafe_broker
        assert broker is not None
        card = _http("GET", f"{base_url}/a2a/{BRAND_ID}/.well-known/agent-card.json").json()
        entry = parse_card_extension(card)
        _expect(entry is not None, "card: no Parafé entry in capabilities.extensions")
        assert entry is not None
        t.note(f"card: extension {EXTENSION_URI}, required {str(entry.required).lower()}")
        t.note(f"  agent {entry.agent_id}; scope {PARAFE_SCOPE!r} permits create_order")
        presenter = broker.consent()
        t.note(f"the broker (a stand-in on {broker.url}) issued the PA a consent token:")
        t.note(f"  ES256, scope {PARAFE_SCOPE!r}, session {presenter.session_id[:13]}…, 300 s,")
        t.note("  bound to the PA's Ed25519 key (cnf.jkt); the PA adds a fresh proof per message")
        text = "Please reorder A-1001."
        message = presenter.attach(
            {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
        )
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {agent.token(sub, audience)}",
            **activation_headers(),
        }
        body = json.dumps({"message": message}).encode()
        t.say("PA", "Acme", text)
        t.note("(metadata: consent {token, session_id, proof}; header A2A-Extensions)")
        answer = _http("POST", f"{interface}/message:send", body, headers)
        reply, _ = _reply(answer, "Parafé turn")
        t.say("Acme", "PA", reply)
        data = answer.json()["message"].get("metadata", {}).get(EXTENSION_URI, {})
        receipts = data.get("action_receipts")
        _expect(
            isinstance(receipts, list) and len(receipts) == 1 and "error" not in data,
            f"Parafé turn: expected one action receipt, got {data}",
        )
        keys = BrokerKeys(broker.url, fetch_policy=FetchPolicy(allow_http_on_loopback=True))
        verifier = ReceiptVerifier(keys)
        try:
            receipt = verifier.verify_action_receipt(
                receipts[0], expected_session_id=presenter.session_id
            )
        except ParafeError as exc:
            raise DemoFailed(f"Parafé receipt: {exc.code} {exc.message}") from exc
        _expect(
            receipt.action == "create_order"
            and receipt.result == "success"
            and receipt.consent_ref == consent_ref(presenter.token)
            and receipt.business_ref is not None
            and str(receipt.business_ref) in reply,
            f"Parafé receipt: unexpected claims {dict(receipt.claims)}",
        )
        t.note(f"{answer.status} OK; A2A-Extensions: {answer.headers.get('A2A-Extensions')}")
        t.note("action receipt verified with Acme's DID document (fetched from the broker):")
        t.note(f"  kid {receipt.key_id}")
        ref = receipt.business_ref
        t.note(f"  action {receipt.action}, result {receipt.result}, business_ref {ref},")
        t.note("  consent_ref = SHA-256 of the consent token (the proof's ath)")
        t.say("PA", "Acme", text)
        t.note("(the very same message replayed: same proof, a new conversation)")
        again = _http("POST", f"{interface}/message:send", body, headers)
        _reply(again, "Parafé replay")
        data = again.json()["message"].get("metadata", {}).get(EXTENSION_URI, {})
        error = data.get("error", {})
        _expect(error.get("code") == "INVALID_PROOF", f"Parafé replay: got {data}")
        refusal = verifier.verify_action_receipt(data["action_receipts"][0])
        _expect(refusal.error == "proof_invalid", f"Parafé replay receipt: {refusal.error}")
        t.note(f"  → {error['code']}: {error['message']!r}")
        t.note(f"  refusal receipt verified: action {refusal.action}, error {refusal.error}")

    def refresh(
        self, auth: _AuthServer, tokens: Mapping[str, Any], sub: str, audience: str, grant_id: str
    ) -> dict[str, Any]:
        t, agent = self.t, self._agent()
        fields = [("grant_type", "refresh_token"), ("refresh_token", str(tokens["refresh_token"]))]
        answer = agent.oauth(auth.token_url, fields, token=agent.token(sub, audience))
        _expect(answer.status == 200, f"refresh: expected 200, got {answer.status} {answer.body!r}")
        fresh: dict[str, Any] = answer.json()
        claims = _unverified_claims(fresh["access_token"])
        _expect(
            fresh["refresh_token"] != tokens["refresh_token"]
            and fresh["access_token"] != tokens["access_token"],
            "refresh: the tokens were not renewed",
        )
        _expect(claims.get("grant_id") == grant_id, "refresh: another grant")
        _expect(fresh["scope"] == tokens["scope"], f"refresh: scope {fresh['scope']!r}")
        t.note(f"POST {auth.token_url} grant_type=refresh_token → {answer.status}")
        t.note(f"  a new access token: same grant, scope {fresh['scope']!r}")
        t.note(
            f"  and a new refresh token {str(fresh['refresh_token'])[:8]}…; the old one is spent"
        )
        t.note("  (presented again, it would revoke the whole grant: reuse detection)")
        return fresh

    def revoke(self, grant_id: str) -> None:
        t = self.t
        listing = self._pactmw("grants", "list", "--config", "pactmw.toml")
        _expect(listing.returncode == 0, f"grants list exited with {listing.returncode}")
        _expect(grant_id in listing.stdout, "grants list: the grant is not listed")
        revoked = self._pactmw("grants", "revoke", "--config", "pactmw.toml", grant_id)
        _expect(revoked.returncode == 0, f"grants revoke exited with {revoked.returncode}")
        _expect(
            "agent.grant_revoked" in revoked.stderr, "grants revoke: no agent.grant_revoked event"
        )
        t.note("(the grant is revoked in the store the running server shares)")

    def _pactmw(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """Run `python -m pactmw ARGUMENTS` in the working directory; show it and its output."""
        t = self.t
        t.note("$ pactmw " + " ".join(arguments))
        argv = [sys.executable, "-m", "pactmw", *arguments]
        try:
            result = subprocess.run(  # noqa: S603 - our own interpreter and arguments
                argv,
                cwd=self.workdir,
                env=_child_env(),
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

    def after_revocation(
        self,
        interface: str,
        sub: str,
        audience: str,
        context_id: str,
        tokens: Mapping[str, Any],
        auth: _AuthServer,
    ) -> None:
        t, agent = self.t, self._agent()
        text = "Show me my orders, please."
        t.say("PA", "Acme", text)
        answer, _ = agent.send(
            interface,
            text,
            token=agent.token(sub, audience),
            context_id=context_id,
            delegation=str(tokens["access_token"]),
        )
        challenge = answer.headers.get("WWW-Authenticate")
        _expect(
            answer.status == 401
            and challenge == 'Bearer realm="a2a", error="invalid_token"'
            and not answer.body,
            f"revoked grant: expected 401 invalid_token, got {answer.status} {challenge!r}",
        )
        t.note(f"the same (unexpired) delegation token → {answer.status}, no body,")
        t.note(f"  WWW-Authenticate: {challenge}")
        fields = [("grant_type", "refresh_token"), ("refresh_token", str(tokens["refresh_token"]))]
        answer = agent.oauth(auth.token_url, fields, token=agent.token(sub, audience))
        error = answer.json().get("error")
        _expect(
            answer.status == 400 and error == "invalid_grant",
            f"refresh after revocation: expected 400 invalid_grant, got {answer.status} {error}",
        )
        t.note(f"the refresh token → {answer.status} {error}; Jane would have to consent again")

    def _agent(self) -> _PersonalAgent:
        assert self.agent is not None
        return self.agent

    def _login(self) -> DevelopmentBrandLogin:
        assert self.login is not None
        return self.login

    def close(self) -> None:
        if self.server is not None:
            _stop(self.server.process)
        if self.agent is not None:
            self.agent.close()
        if self.login is not None:
            self.login.close()
        if self.parafe_broker is not None:
            self.parafe_broker.close()


class _AuthServer(NamedTuple):
    """The Brand's authorization server, as the personal agent found it on the card."""

    device_url: str
    token_url: str
    metadata_url: str
    issuer: str


class _StepUp(NamedTuple):
    context_id: str
    message: str
    missing: list[str]
    link: str


def _step_up(answer: _Answer, what: str) -> _StepUp:
    """The `TASK_STATE_AUTH_REQUIRED` task of a 200 message:send answer (spec §5.5)."""
    _expect(answer.status == 200, f"{what}: expected 200, got {answer.status} {answer.body!r}")
    task = answer.json().get("task")
    _expect(isinstance(task, dict), f"{what}: expected a step-up task, got {answer.body[:300]!r}")
    status = task.get("status", {})
    _expect(
        status.get("state") == "TASK_STATE_AUTH_REQUIRED",
        f"{what}: task state {status.get('state')!r}",
    )
    metadata = task.get("metadata", {})
    missing, link = metadata.get("pact.missingScopes"), metadata.get("pact.verificationUriComplete")
    _expect(
        isinstance(missing, list) and isinstance(link, str),
        f"{what}: the task lacks pact.missingScopes or pact.verificationUriComplete",
    )
    parts = status.get("message", {}).get("parts", [])
    message = "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str))
    return _StepUp(str(task.get("contextId")), message, [str(m) for m in missing], str(link))


def run_demo(*, keep: bool = False, out: TextIO | None = None) -> int:
    """Run the demo, printing its transcript to `out` (stdout); 0 when every step passed."""
    t = _Transcript(out or sys.stdout)
    workdir = Path(tempfile.mkdtemp(prefix="pactmw-demo-"))
    started = time.monotonic()
    t.line("pactmw demo: a personal agent (PA) talks to Acme's support bot through pactmw")
    t.line("(PACT 1.0 Identity, then Delegated, over A2A HTTP+JSON; everything on 127.0.0.1)")
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
