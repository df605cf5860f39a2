"""What the client tests run against: pactmw's own Provider on uvicorn, plus small helpers.

* `run_provider(...)`: a Provider (an identity-only Brand and a delegated one) behind
  `A2AProviderApp` on a real socket; the personal agent's keys are fetched over HTTP from the
  signer's own `serve_jwks`, so the whole trust path is exercised.
* `StaticServer`: a tiny stdlib server answering fixed routes to GET and POST (hand-written
  cards, redirects, a misbehaving Provider's answers).
* `RawServer`: answers every request with the same raw bytes (malformed HTTP on purpose).
* `DroppingProxy`: a TCP proxy that forwards a request, lets the Provider answer, and then
  cuts the client off without a byte of the answer: a network failure after delivery.
* `Person`: the user in a browser, driving the consent page with `urllib` and a cookie.
* `FakeTime`: a clock and a sleep that only advance when the client sleeps.
"""

from __future__ import annotations

import contextlib
import html
import http.server
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from email.message import Message
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode, urlsplit

from attrs import define, field

from pactmw.adapters import wsgi as wsgi_adapter
from pactmw.adapters.asgi import A2AProviderApp
from pactmw.client import AgentSigner, DelegationScheme, Scope
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import generate_private_jwk
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider, RateLimit, Reply
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.tools import ToolRegistry
from pactmw.store import open_store
from tests.support.net import free_port
from tests.support.parties import AUDIENCE
from tests.support.servers import uvicorn_server, werkzeug_server

SCOPES = {"orders:read": "Look up your orders", "orders:cancel": "Cancel an order"}
CANCEL_ARGS = {"order": "A-1001"}


# -- the Provider -------------------------------------------------------------------------------


@define
class Provided:
    """A running Provider: its base URL, the bot's call log and the signed-in-user table."""

    base: str
    provider: Provider
    calls: list[str]
    users: dict[str, SignedInUser]

    def interface(self, brand: str) -> str:
        return f"{self.base}/a2a/{brand}"

    def card_url(self, brand: str) -> str:
        return f"{self.interface(brand)}/.well-known/agent-card.json"

    def ran(self, text: str) -> int:
        """How many times the bot ran a turn with this text."""
        return sum(1 for call in list(self.calls) if call == text)


def make_bot(calls: list[str]) -> Callable[[Any], Any]:
    def bot(turn: Any) -> Any:
        calls.append(turn.text)
        if turn.text.startswith("boom"):
            raise RuntimeError("the bot fell over")
        if turn.text.startswith("goodbye"):
            return Reply(text="bye", close=True)
        if "cancel" in turn.text:
            return turn.tools.cancel_order(**CANCEL_ARGS)
        if "orders" in turn.text:
            return "Your orders: " + ", ".join(turn.tools.list_orders())
        return f"turn {len(turn.history) + 1}: {turn.text}"

    return bot


def make_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(scope="orders:read")
    def list_orders(account: str) -> list[str]:
        return ["A-1001", "A-1002"]

    @tools.tool(scope="orders:cancel", write=True)
    def cancel_order(account: str, order: str) -> str:
        return f"cancelled {order} for {account}"

    return tools


@contextlib.contextmanager
def run_provider(
    signer: AgentSigner,
    jwks_url: str,
    *,
    rate_limit: RateLimit | None = None,
    clock: Callable[[], float] = time.time,
    store: str = "memory://",
    wsgi: bool = False,
) -> Iterator[Provided]:
    """The Provider described above, on a fresh store at `store` (a store URL), which keeps
    the agents' runtime switches too, as in a Provider built from settings; served by
    uvicorn, or with `wsgi` by Werkzeug (the Provider's blocking driver)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    calls: list[str] = []
    state = open_store(store)
    registry = AgentRegistry(
        [RegisteredAgent(issuer=signer.issuer, name="Test PA", jwks_uri=jwks_url)],
        overrides=state,
        runtime=state,
    )
    verifier = IdentityVerifier(
        audience=AUDIENCE,
        registry=registry,
        keys=JwksCache(FetchPolicy(allow_http_on_loopback=True)),
    )
    bot = make_bot(calls)
    delegation = DelegationConfig(
        scopes=SCOPES, login_url="https://shop.example/login", tools=make_tools(), interval=1
    )
    provider = Provider(
        base_url=base,
        verifier=verifier,
        store=state,
        brands=[
            Brand(id="plain", name="Plain Shop", handler=bot),
            Brand(id="acme", name="Acme Shop", handler=bot, delegation=delegation),
        ],
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        rate_limit=rate_limit,
        consent_rate_limit=RateLimit(per_agent=100_000),
        clock=clock,
    )
    users = {"alice": SignedInUser(account="acct-alice", label="alice@example.com")}

    def current_user(connection: Any) -> SignedInUser | None:
        return users.get(connection.cookies.get("sid", ""))

    def wsgi_user(environ: Any) -> SignedInUser | None:
        sid = SimpleCookie(environ.get("HTTP_COOKIE", "")).get("sid")
        return users.get(sid.value if sid is not None else "")

    try:
        if wsgi:
            app = wsgi_adapter.A2AProviderApp(provider, current_user=wsgi_user)
            with werkzeug_server(app, port=port):
                yield Provided(base, provider, calls, users)
        else:
            with uvicorn_server(A2AProviderApp(provider, current_user=current_user), port=port):
                yield Provided(base, provider, calls, users)
    finally:
        provider.close()


# -- a tiny static server -----------------------------------------------------------------------


@define
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(factory=dict)


class _StaticHandler(http.server.BaseHTTPRequestHandler):
    server: _StaticHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        # Read the request body first: closing with it unread would reset the connection.
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        self.server.hits.append(path)
        route = self.server.routes.get(path, Route(404, b"not found"))
        self.send_response(route.status)
        for name, value in route.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        self.wfile.write(route.body)


class _StaticHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Route]
    hits: list[str]


class StaticServer:
    """Fixed answers per path on 127.0.0.1, to GET and POST alike; `json`, `redirect` and
    `route` set them."""

    def __init__(self) -> None:
        self._server = _StaticHTTPServer(("127.0.0.1", 0), _StaticHandler)
        self._server.routes = {}
        self._server.hits = []
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def hits(self) -> list[str]:
        return list(self._server.hits)

    def url(self, path: str) -> str:
        return self.base + path

    def route(self, path: str, route: Route) -> str:
        self._server.routes[path] = route
        return self.url(path)

    def json(self, path: str, document: Any, status: int = 200, **headers: str) -> str:
        body = json.dumps(document).encode()
        return self.route(
            path, Route(status, body, {"Content-Type": "application/json", **headers})
        )

    def redirect(self, path: str, location: str, status: int = 302) -> str:
        return self.route(path, Route(status, b"", {"Location": location}))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# -- a server that answers with raw bytes -------------------------------------------------------


class RawServer:
    """Answers each connection on 127.0.0.1, one at a time, with the same raw bytes once the
    request has arrived, then closes it: for answers no HTTP server library would write."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            with connection, contextlib.suppress(OSError):
                connection.settimeout(5)
                received = b""
                # The whole request (head and Content-Length body): closing with bytes unread
                # would reset the connection before the client read the answer.
                while b"\r\n\r\n" not in received and (data := connection.recv(65536)):
                    received += data
                head, _, body = received.partition(b"\r\n\r\n")
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                while length and len(body) < int(length.group(1)):
                    if not (data := connection.recv(65536)):
                        break
                    body += data
                connection.sendall(self.answer)

    def close(self) -> None:
        # shutdown wakes the thread blocked in accept (close alone does not, on Linux).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)


# -- a proxy that loses answers -----------------------------------------------------------------


class DroppingProxy:
    """Forwards every connection to `upstream`; the first `drop` connections are cut off once
    the upstream has answered in full, so the request ran but its answer never arrives."""

    def __init__(self, upstream: str, drop: int = 1) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname is not None
        assert parts.port is not None
        self._upstream = (parts.hostname, parts.port)
        self.to_drop = drop
        self.dropped = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closing = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            self.connections += 1
            drop = self.dropped < self.to_drop
            if drop:
                self.dropped += 1
        upstream = socket.create_connection(self._upstream, timeout=10)

        def pump() -> None:
            with contextlib.suppress(OSError):
                while data := client.recv(65536):
                    upstream.sendall(data)

        threading.Thread(target=pump, daemon=True).start()
        answer = bytearray()
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):  # the client asked for Connection: close
                answer += data
        upstream.close()
        with contextlib.suppress(OSError):
            if not drop:
                client.sendall(bytes(answer))
            client.shutdown(socket.SHUT_RDWR)
        client.close()

    def close(self) -> None:
        self._closing = True
        self._listener.close()


# -- the person in a browser --------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Person:
    """A signed-in user (`sid` cookie) who opens the consent link and decides, via urllib."""

    def __init__(self, sid: str = "alice") -> None:
        self.sid = sid
        self._opener = urllib.request.build_opener(_NoRedirect)

    def _open(self, request: urllib.request.Request) -> tuple[int, Message, str]:
        request.add_header("Cookie", f"sid={self.sid}")
        try:
            with self._opener.open(request, timeout=10) as response:
                return response.status, response.headers, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, exc.read().decode()

    def decide(
        self, verification_uri_complete: str, *, allow: bool = True, scopes: list[str] | None = None
    ) -> str:
        """Open the consent page, tick `scopes` (default: all offered) and press Allow/Deny.

        Returns the `Location` of the result page.
        """
        status, _, page = self._open(urllib.request.Request(verification_uri_complete))
        assert status == 200, (status, page)
        action = re.search(r'<form method="post" action="([^"]+)"', page)
        session = re.search(r'<input type="hidden" name="session" value="([^"]+)"', page)
        assert action is not None, page
        assert session is not None, page
        offered = re.findall(r'name="scope" value="([^"]+)"', page)
        form = [("session", html.unescape(session.group(1)))]
        form.append(("decision", "allow" if allow else "deny"))
        form.extend(("scope", scope) for scope in (offered if scopes is None else scopes))
        request = urllib.request.Request(
            html.unescape(action.group(1)),
            data=urlencode(form).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            method="POST",
        )
        status, headers, body = self._open(request)
        assert status == 303, (status, body)
        return str(headers["Location"])


# -- time that passes only when asked -----------------------------------------------------------


class FakeTime:
    """`clock()` and `sleep(s)`/`asleep(s)` for clients: sleeping advances the clock at once.

    `on_sleep` (optional) runs after each sleep with the seconds slept, for tests that make
    something happen "while the client waits".
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []
        self.on_sleep: Callable[[float], None] | None = None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


# -- a misbehaving authorization server: the scheme naming it, a device authorization it gives


def static_scheme(static: StaticServer) -> DelegationScheme:
    return DelegationScheme(
        name="userDelegation",
        identity_scheme="platformJwt",
        device_authorization_url=static.url("/oauth/device_authorization"),
        token_url=static.url("/oauth/token"),
        refresh_url=static.url("/oauth/token"),
        metadata_url=None,
        scopes=(Scope("orders:read", "Read your orders"),),
    )


DEVICE_AUTHORIZATION = {
    "device_code": "dc-1",
    "user_code": "ABCD-EFGH",
    "verification_uri": "https://shop.example/device",
    "verification_uri_complete": "https://shop.example/device?user_code=ABCD-EFGH",
    "expires_in": 600,
    "interval": 5,
}


# -- Agent Cards as a Provider serves them (the card parser's tests, the hostile Provider's)


def base_card(url: str = "https://provider.example/a2a/acme") -> dict[str, Any]:
    return {
        "name": "Acme",
        "description": "",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ],
        "version": "0.1.0",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}],
    }


def delegated_card() -> dict[str, Any]:
    card = base_card()
    oauth = "https://provider.example/a2a/acme/oauth"
    card["securitySchemes"] = {
        "platformJwt": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
        "userDelegation": {
            "oauth2SecurityScheme": {
                "flows": {
                    "deviceCode": {
                        "deviceAuthorizationUrl": oauth + "/device_authorization",
                        "tokenUrl": oauth + "/token",
                        "scopes": {"b:write": "Write B", "a:read": "Read A"},
                    }
                },
                "oauth2MetadataUrl": oauth + "/.well-known/oauth-authorization-server",
            }
        },
    }
    card["securityRequirements"] = [
        {"schemes": {"platformJwt": {"list": []}}},
        {"schemes": {"userDelegation": {"list": []}, "platformJwt": {"list": []}}},
    ]
    return card
