"""Helpers for the Delegated-profile tests: a real server, a personal agent, a browser.

`serve(...)` runs a `Provider` with delegated Brands behind `A2AProviderApp` on uvicorn (a
real socket on 127.0.0.1) and yields an `Env` whose methods speak HTTP to it the way a
personal agent (PACT JWT + form posts) and a person in a browser (a `sid` cookie the test
controls, resolved by a tiny signed-in-user table) would. Receipts and tokens are checked
with PyJWT against the JWKS fetched over HTTP, not with pactmw's own verifier.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated import AuditEvent, SignedInUser
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.tools import ToolRegistry
from pactmw.store import open_store
from pactmw.store.base import Store
from tests.support.agent import identity_token, user_message
from tests.support.net import free_port, loopback_client
from tests.support.parties import AGENT_NAME, AUDIENCE, ISSUER
from tests.support.servers import uvicorn_server

OTHER_ISSUER = "https://other-pa.example"
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
#: A login URL that already has a query, so the `&` joiner is exercised too.
LOGIN_URL = "https://shop.example/account/login?from=pact"
SCOPES = {"orders:read": "Look up your orders", "orders:cancel": "Cancel an order"}
CANCEL_ARGS = {"order": "A-1001", "reason": "Zoë changed her mind"}
PAGE_SECURITY = {"x-frame-options": "DENY", "cache-control": "no-store"}
#: The reference sends `no-referrer`; pactmw may send `same-origin` instead, because under
#: `no-referrer` browsers send `Origin: null` on the consent form's POST (Fetch spec), which
#: the decision's Origin check refuses. Either way the URL (it holds the user code) never
#: reaches another origin, which is the property that matters.
REFERRER_POLICIES = ("no-referrer", "same-origin")
USER_CODE = re.compile(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}")

PA_KEYS: dict[str, PrivateJWK] = {
    ISSUER: generate_private_jwk("ES256", kid="pa-1"),
    OTHER_ISSUER: generate_private_jwk("ES256", kid="other-1"),
}


def b64url_json(segment: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def page_text(html: str) -> str:
    """What a person reads on a page: its text without markup, style or title, whitespace
    folded, entities decoded. A name's `<bdi>` is no gap on screen: it goes without one."""
    body = re.sub(r"<(style|title)>.*?</\1>", " ", html, flags=re.S)
    body = re.sub(r"</?bdi>", "", body)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", body)).split())


def allow_on_the_consent_page(
    browser: httpx.Client, consent_html: str, scope: str, origin: str
) -> None:
    """Allow `scope` on the consent page `consent_html` as the signed-in person does: its
    form's action and session, posted from the site's `origin`."""
    form = re.search(
        r'action="([^"]+)"><input type="hidden" name="session" value="([^"]+)"', consent_html
    )
    assert form, consent_html
    decision = {"session": form[2], "scope": scope, "decision": "allow"}
    browser.post(form[1], data=decision, headers={"Origin": origin})


def without_outcome(location: str) -> str:
    """A result-page URL without its signed `outcome` (the part a test cannot predict)."""
    base, _, query = location.partition("?")
    kept = [part for part in query.split("&") if not part.startswith("outcome=")]
    return f"{base}?{'&'.join(kept)}" if kept else base


def jws_header(token: str) -> dict[str, Any]:
    header: dict[str, Any] = b64url_json(token.split(".")[0])
    return header


def jws_claims(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = b64url_json(token.split(".")[1])
    return claims


def independent_hash(arguments: Mapping[str, Any]) -> str:
    """`argsHash` computed here, as JavaScript's JSON.stringify would feed SHA-256."""
    compact = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(compact.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verify_with_jwks(token: str, jwks: Mapping[str, Any]) -> bytes:
    """Verify a compact JWS with PyJWT against a fetched JWKS; return the signed payload."""
    kid = jws_header(token)["kid"]
    keys = [key for key in jwt.PyJWKSet.from_dict(dict(jwks)).keys if key.key_id == kid]
    assert len(keys) == 1, f"kid {kid!r} not (uniquely) in the JWKS"
    payload: bytes = jwt.api_jws.PyJWS().decode(token, keys[0].key, algorithms=["ES256", "RS256"])
    return payload


def assert_page_headers(response: httpx.Response) -> None:
    """The anti-framing, no-cache and no-referrer headers every consent page carries."""
    for name, value in PAGE_SECURITY.items():
        assert response.headers.get(name) == value, (name, response.headers.get(name))
    assert response.headers.get("referrer-policy") in REFERRER_POLICIES, response.headers
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["content-type"].startswith("text/html")


def first_form(html: str) -> str:
    match = re.search(r"<form\b[^>]*>", html)
    assert match is not None, html
    return match.group(0)


def form_action(html: str) -> str:
    match = re.fullmatch(r'<form method="post" action="([^"]+)">', first_form(html))
    assert match is not None, first_form(html)
    return match.group(1)


def hidden(html: str, name: str) -> str:
    match = re.search(rf'<input type="hidden" name="{name}" value="([^"]+)">', html)
    assert match is not None, f"no hidden {name} in {html}"
    return match.group(1)


# -- the Brand's bot and its account actions ------------------------------------------------------


def make_tools(calls: list[tuple[str, str, dict[str, Any]]]) -> ToolRegistry:
    """`list_orders` (read, `orders:read`) and `cancel_order` (write, `orders:cancel`)."""
    tools = ToolRegistry()

    @tools.tool(scope="orders:read")
    def list_orders(account: str) -> list[str]:
        calls.append(("list_orders", account, {}))
        return ["A-1001", "A-1002"]

    @tools.tool(scope="orders:cancel", write=True)
    def cancel_order(account: str, **arguments: Any) -> str:
        calls.append(("cancel_order", account, arguments))
        return f"cancelled {arguments['order']}"

    return tools


def bot(turn: Any) -> str:
    if "cancel" in turn.text:
        orders = turn.tools.list_orders()
        cancelled: str = turn.tools.cancel_order(**CANCEL_ARGS)
        return cancelled + f" (of {len(orders)})"
    if "orders" in turn.text:
        return "Your orders: " + ", ".join(turn.tools.list_orders())
    who = turn.delegation.account if turn.delegation is not None else "stranger"
    return f"hi {who}"


def delegated_brand(
    brand_id: str,
    name: str,
    calls: list[tuple[str, str, dict[str, Any]]],
    **config: Any,
) -> Brand:
    settings: dict[str, Any] = {
        "scopes": SCOPES,
        "login_url": LOGIN_URL,
        "tools": make_tools(calls),
        "interval": 1,
    }
    settings.update(config)
    return Brand(id=brand_id, name=name, handler=bot, delegation=DelegationConfig(**settings))


# -- the server and its clients -------------------------------------------------------------------


class Env:
    """A running Provider and the personal agent / browser that talk to it over HTTP."""

    def __init__(
        self,
        base: str,
        provider: Provider,
        users: dict[str, SignedInUser],
        audit: list[AuditEvent],
    ) -> None:
        self.base = base
        self.provider = provider
        self.users = users
        self.audit = audit
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        #: The port this server listens on (its `base` may name another, public, address).
        self.port = 0
        self.http = loopback_client(timeout=30)

    def new_user(self, name: str = "user") -> str:
        """Sign in a fresh person (a unique account); return their `sid` cookie value."""
        key = f"{name}-{uuid.uuid4().hex[:8]}"
        self.users[key] = SignedInUser(account=f"acct-{key}", label=f"{key}@example.com")
        return key

    def account(self, user: str) -> str:
        return self.users[user].account

    def events(self, name: str, **where: Any) -> list[AuditEvent]:
        return [
            event
            for event in list(self.audit)
            if event.name == name and all(getattr(event, k) == v for k, v in where.items())
        ]

    def close(self) -> None:
        self.http.close()

    # -- URLs -----------------------------------------------------------------------------------

    def interface(self, brand: str) -> str:
        return f"{self.base}/a2a/{brand}"

    def oauth(self, brand: str, path: str) -> str:
        return f"{self.interface(brand)}/oauth/{path}"

    # -- the personal agent ---------------------------------------------------------------------

    def pa(self, sub: str = "u1", issuer: str = ISSUER) -> dict[str, str]:
        return {
            "authorization": "Bearer " + identity_token(PA_KEYS[issuer], issuer, AUDIENCE, sub=sub)
        }

    def device_authorization(
        self,
        brand: str,
        scope: str = "orders:read orders:cancel",
        *,
        sub: str = "u1",
        issuer: str = ISSUER,
        client_id: str | None = None,
    ) -> httpx.Response:
        form = {"client_id": client_id or issuer, "scope": scope}
        return self.http.post(
            self.oauth(brand, "device_authorization"), data=form, headers=self.pa(sub, issuer)
        )

    def token(
        self, brand: str, form: Mapping[str, str], *, sub: str = "u1", issuer: str = ISSUER
    ) -> httpx.Response:
        data = {"client_id": issuer, **form}
        return self.http.post(self.oauth(brand, "token"), data=data, headers=self.pa(sub, issuer))

    def poll(
        self, brand: str, device_code: str, *, sub: str = "u1", issuer: str = ISSUER
    ) -> httpx.Response:
        form = {"grant_type": DEVICE_CODE_GRANT, "device_code": device_code}
        return self.token(brand, form, sub=sub, issuer=issuer)

    def refresh(
        self, brand: str, refresh_token: str, *, sub: str = "u1", issuer: str = ISSUER
    ) -> httpx.Response:
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        return self.token(brand, form, sub=sub, issuer=issuer)

    def send(
        self,
        brand: str,
        text: str,
        *,
        token: str | None = None,
        context_id: str | None = None,
        message_id: str | None = None,
        sub: str = "u1",
        issuer: str = ISSUER,
    ) -> httpx.Response:
        message = user_message(text, message_id=message_id, context_id=context_id)
        headers = self.pa(sub, issuer)
        if token is not None:
            headers["x-a2a-user-delegation"] = "Bearer " + token
        return self.http.post(
            f"{self.interface(brand)}/message:send", json={"message": message}, headers=headers
        )

    # -- the person in a browser ----------------------------------------------------------------

    @staticmethod
    def cookie(user: str | None) -> dict[str, str]:
        return {"cookie": f"sid={user}"} if user else {}

    def get(self, url: str, *, user: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = {**self.cookie(user), **kwargs.pop("headers", {})}
        return self.http.get(url, headers=headers, **kwargs)

    def post(self, url: str, *, user: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = {**self.cookie(user), **kwargs.pop("headers", {})}
        return self.http.post(url, headers=headers, **kwargs)

    def consent_page(self, complete_url: str, user: str | None) -> httpx.Response:
        return self.get(complete_url, user=user)

    def decide(
        self,
        action: str,
        session: str,
        scopes: Sequence[str],
        *,
        decision: str = "allow",
        user: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        form = [("session", session), ("decision", decision)]
        form.extend(("scope", scope) for scope in scopes)
        return self.post(
            action,
            user=user,
            content=urlencode(form).encode(),
            headers={"content-type": "application/x-www-form-urlencoded", **(headers or {})},
        )

    def open_consent(
        self, brand: str, scope: str, *, user: str = "alice", sub: str = "u1", issuer: str = ISSUER
    ) -> tuple[dict[str, Any], str, str]:
        """Start a device authorization and open its consent page signed in as `user`.

        Returns (device authorization document, decision URL, session token).
        """
        started = self.device_authorization(brand, scope, sub=sub, issuer=issuer)
        assert started.status_code == 200, started.text
        document = started.json()
        page = self.consent_page(document["verification_uri_complete"], user)
        assert page.status_code == 200, page.text
        return document, form_action(page.text), hidden(page.text, "session")

    def connect(
        self,
        brand: str,
        scope: str = "orders:read orders:cancel",
        *,
        granted: Sequence[str] | None = None,
        user: str = "alice",
        sub: str = "u1",
        issuer: str = ISSUER,
    ) -> dict[str, Any]:
        """The whole device flow: approve `granted` (default: all requested) and poll once.

        Returns the token response with `grant_id` and `claims` of the access token added.
        """
        document, action, session = self.open_consent(
            brand, scope, user=user, sub=sub, issuer=issuer
        )
        decided = self.decide(action, session, granted or scope.split(), user=user)
        assert decided.status_code == 303, decided.text
        polled = self.poll(brand, document["device_code"], sub=sub, issuer=issuer)
        assert polled.status_code == 200, polled.text
        tokens: dict[str, Any] = polled.json()
        tokens["claims"] = jws_claims(tokens["access_token"])
        tokens["grant_id"] = tokens["claims"]["grant_id"]
        return tokens


def default_users() -> dict[str, SignedInUser]:
    return {
        "alice": SignedInUser(account="acct-alice", label="alice@example.com"),
        "bob": SignedInUser(account="acct-bob", label="bob@example.com"),
    }


@contextlib.contextmanager
def serve(
    store_url: str | Store,
    brands: Callable[[], Sequence[Brand]] | Sequence[Brand],
    *,
    calls: list[tuple[str, str, dict[str, Any]]] | None = None,
    keys: SigningKeys | None = None,
    consent_rate_limit: RateLimit | None = None,
    device_rate_limit: RateLimit | None = None,
    token_rate_limit: RateLimit | None = None,
    shared_rate_limits: bool | None = None,
    clock: Callable[[], float] = time.time,
    base_url: str | None = None,
    port: int | None = None,
    audit_hook: Callable[[AuditEvent], None] | None = None,
) -> Iterator[Env]:
    """Run a Provider on uvicorn; its `base_url` is the server's own URL unless given.

    `store_url` may also be an open `Store` (for tests that wrap one).
    """
    port = port or free_port()
    base = base_url or f"http://127.0.0.1:{port}"
    registry = AgentRegistry(
        [
            RegisteredAgent(
                issuer=issuer, name=AGENT_NAME if issuer == ISSUER else "", jwks=public_key_set([k])
            )
            for issuer, k in PA_KEYS.items()
        ]
    )
    verifier = IdentityVerifier(
        audience=AUDIENCE,
        registry=registry,
        keys=JwksCache(FetchPolicy(allow_http_on_loopback=True)),
    )
    events: list[AuditEvent] = []
    lock = threading.Lock()

    def record(event: AuditEvent) -> None:
        with lock:
            events.append(event)
        if audit_hook is not None:
            audit_hook(event)

    provider = Provider(
        base_url=base,
        verifier=verifier,
        store=open_store(store_url) if isinstance(store_url, str) else store_url,
        brands=brands() if callable(brands) else brands,
        signing_keys=keys or SigningKeys((generate_private_jwk("ES256"),)),
        audit=record,
        consent_rate_limit=consent_rate_limit or RateLimit(per_agent=100_000),
        device_rate_limit=device_rate_limit,
        token_rate_limit=token_rate_limit,
        shared_rate_limits=shared_rate_limits,
        clock=clock,
    )
    users = default_users()

    def current_user(connection: Any) -> SignedInUser | None:
        return users.get(connection.cookies.get("sid", ""))

    app = A2AProviderApp(provider, current_user=current_user)
    env = Env(base, provider, users, events)
    env.port = port
    if calls is not None:
        env.calls = calls
    try:
        with uvicorn_server(app, port=port):
            yield env
    finally:
        env.close()
        provider.close()


@contextlib.contextmanager
def serve_acme_and_globex(directory: Path, acme_name: str = "Acme Shop") -> Iterator[Env]:
    """Two delegating Brands, `acme` (named `acme_name`) and `globex`, whose tools log to one
    `env.calls`, served on a sqlite store in `directory`."""
    calls: list[tuple[str, str, dict[str, Any]]] = []
    brands = [delegated_brand("acme", acme_name, calls), delegated_brand("globex", "Globex", calls)]
    with serve(f"sqlite:///{directory}/pactmw.db", brands, calls=calls) as running:
        yield running


def new_sub() -> str:
    """A fresh personal-agent user, so grants of different tests never merge."""
    return f"pa-user-{uuid.uuid4().hex[:8]}"


def assert_oauth_error(response: httpx.Response, error: str, status: int = 400) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["error"] == error, body
    assert isinstance(body["error_description"], str)


def task_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/a2a+json"
    body = response.json()
    assert list(body) == ["task"], body
    task: dict[str, Any] = body["task"]
    assert task["id"].startswith("t-")
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    message = task["status"]["message"]
    assert message["role"] == "ROLE_AGENT"
    assert message["contextId"] == task["contextId"]
    assert message["parts"][0]["text"]
    return task


def message_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/a2a+json"
    message: dict[str, Any] = response.json()["message"]
    assert message["role"] == "ROLE_AGENT"
    return message


def assert_error_page(answer: httpx.Response, status: int) -> None:
    assert answer.status_code == status, (answer.status_code, answer.text)
    assert_page_headers(answer)
    assert "location" not in answer.headers
    assert 'name="session"' not in answer.text


ANSWERED = "You had already answered this request. Your first answer stands."


def assert_answered(answer: httpx.Response, heading: str) -> None:
    """Refused (400, no form), the answer the person gave first shown again: not an error
    page saying the code was used after an approval that worked."""
    assert_error_page(answer, 400)
    assert f"<h1>{heading}</h1>" in answer.text
    assert ANSWERED in answer.text
