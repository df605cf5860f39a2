"""What the conformance tests share: the test personal agent, the targets, wire assertions.

The assertions spell out what the public PACT Identity suite (`e2e/pact.test.ts`) checks:
exact statuses, `Content-Type: application/a2a+json` with no charset, the AIP-193 envelope
with exactly one ErrorInfo detail, and the exact reply shape.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pactmw.core.encoding import b64url_encode
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK
from tests.support.a2a import ERROR_DOMAIN, ERROR_INFO, REASONS
from tests.support.net import unread_body_post

A2A_CONTENT_TYPE = "application/a2a+json"
CHALLENGE = 'Bearer realm="a2a"'
AUDIENCE = "urn:pactmw:conformance:provider"
BRANDS = ("acme", "globex")
UNKNOWN_BRAND = "no-such-brand"
# The rate-limited Providers' window: a day, so that a test's requests share one.
LIMITED_WINDOW = 86400

BRAND_TABLES: dict[str, dict[str, Any]] = {
    "acme": {
        "name": "Acme Support",
        "description": "Orders and returns for Acme.",
        "skills": [
            {
                "id": "orders",
                "name": "Orders",
                "description": "Order status and changes.",
                "tags": ["orders", "returns"],
                "examples": ["Where is my order?"],
            }
        ],
    },
    "globex": {"name": "Globex Help", "description": ""},
}


# -- the test personal agent ----------------------------------------------------------------


@dataclass(frozen=True)
class TestPA:
    """The personal agent the suite signs as (`PA_ISSUER`, `PA_PRIVATE_JWK`, `PA_AUDIENCE`)."""

    __test__ = False  # not a test class, despite the name

    issuer: str
    key: PrivateJWK
    jwks_uri: str
    audience: str = AUDIENCE

    @property
    def disabled_issuer(self) -> str:
        return f"{self.issuer}/disabled-pa"

    @property
    def second_issuer(self) -> str:
        """Another registered, enabled personal agent (same keys): a different (PA, sub)."""
        return f"{self.issuer}/second-pa"

    def claims(self, sub: str = "user-1", *, ttl: int = 120, **overrides: Any) -> dict[str, Any]:
        """The reference signer's claims (no `jti`, like the suite's tokens); overrides win."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": sub,
            "aud": self.audience,
            "iat": now,
            "exp": now + ttl,
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not _DROP}

    def token(
        self,
        sub: str = "user-1",
        *,
        ttl: int = 120,
        key: PrivateJWK | None = None,
        typ: str | None = "JWT",
        **overrides: Any,
    ) -> str:
        """An ES256 JWT with header `{alg, typ: JWT, kid}`; `drop("claim")` removes a claim."""
        return sign_compact(self.claims(sub, ttl=ttl, **overrides), key or self.key, typ=typ)

    def auth(self, sub: str = "user-1", **kwargs: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(sub, **kwargs)}"}


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


_DROP: Any = _Drop()


def drop() -> Any:
    """A claim value that removes the claim: `pa.token(sub=..., exp=drop())`."""
    return _DROP


def hs256_token(claims: dict[str, Any], secret: bytes, kid: str | None = None) -> str:
    """An HS256 JWT, made by hand (pactmw does not sign HMAC)."""
    header: dict[str, Any] = {"alg": "HS256", "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing_input = (
        b64url_encode(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + b64url_encode(json.dumps(claims, separators=(",", ":")).encode())
    )
    signature = hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{b64url_encode(signature)}"


def unsigned_token(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    """A compact JWS with any header (for `alg: none` and other refusals)."""
    return (
        ".".join(
            b64url_encode(json.dumps(part, separators=(",", ":")).encode())
            for part in (header, claims)
        )
        + "."
        + b64url_encode(signature)
    )


# -- targets ----------------------------------------------------------------------------------


@dataclass
class Target:
    """A running Provider: its framework, base URL and the bot's runs file."""

    name: str
    base_url: str
    runs_file: Path
    config_file: Path
    log_file: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def interface(self, brand: str = "acme") -> str:
        return f"{self.base_url}/a2a/{brand}"

    def card_url(self, brand: str = "acme") -> str:
        return f"{self.interface(brand)}/.well-known/agent-card.json"

    def runs(self, message_id: str, context_id: str | None = None) -> int:
        """How many times the bot ran for `message_id` (in `context_id`, when given)."""
        if not self.runs_file.exists():
            return 0
        wanted = repr(message_id)
        count = 0
        for line in self.runs_file.read_text(encoding="utf-8").splitlines():
            ctx, mid, _brand = line.split("\t")
            if mid == wanted and (context_id is None or ctx == context_id):
                count += 1
        return count

    def log_tail(self) -> str:
        if self.log_file is None or not self.log_file.exists():
            return ""
        return self.log_file.read_text(errors="replace")[-3000:]


# -- the wire ----------------------------------------------------------------------------------


def new_id() -> str:
    return str(uuid.uuid4())


def user_message(
    text: str = "hello",
    *,
    message_id: str | None = None,
    context_id: str | None = None,
    media_type: bool = True,
) -> dict[str, Any]:
    """A `SendMessageRequest` body as the reference client builds it."""
    part: dict[str, Any] = {"text": text}
    if media_type:
        part["mediaType"] = "text/plain"
    message: dict[str, Any] = {
        "messageId": message_id or new_id(),
        "role": "ROLE_USER",
        "parts": [part],
    }
    if context_id is not None:
        message["contextId"] = context_id
    return {"message": message}


@dataclass
class Wire:
    """Sends requests to one target as the test personal agent."""

    http: httpx.Client
    target: Target
    pa: TestPA

    def send(
        self,
        text: str = "hello",
        *,
        brand: str = "acme",
        sub: str = "user-1",
        message_id: str | None = None,
        context_id: str | None = None,
        body: Any = None,
        content: bytes | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        path: str = "message:send",
        unread: bool = False,
    ) -> httpx.Response:
        """POST `message:send` with `A2A-Version: 1.0`, JSON and a fresh token by default;
        `unread`: a body the server may answer before reading, sent on a connection of its
        own (`unread_body_post`)."""
        if content is None:
            if body is None:
                body = user_message(text, message_id=message_id, context_id=context_id)
            content = json.dumps(body).encode()
        sent = {
            "A2A-Version": "1.0",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token or self.pa.token(sub)}",
        }
        sent.update(headers or {})
        sent = {k: v for k, v in sent.items() if v is not None}
        url = f"{self.target.interface(brand)}/{path}"
        if unread:
            return unread_body_post(self.http, url, content=content, headers=sent)
        return self.http.post(url, content=content, headers=sent)

    def call(
        self,
        method: str,
        rest: str,
        *,
        brand: str = "acme",
        sub: str = "user-1",
        auth: bool = True,
        **kwargs: Any,
    ) -> httpx.Response:
        """Any request below the interface URL, with a token unless `auth=False`."""
        headers = dict(kwargs.pop("headers", {}) or {})
        if auth:
            headers.setdefault("Authorization", f"Bearer {self.pa.token(sub)}")
        url = f"{self.target.interface(brand)}/{rest}" if rest else self.target.interface(brand)
        return self.http.request(method, url, headers=headers, **kwargs)


# -- assertions ------------------------------------------------------------------------------


def describe(response: httpx.Response) -> str:
    return (
        f"{response.request.method} {response.request.url} -> {response.status_code} "
        f"{dict(response.headers)!r} {response.content[:500]!r}"
    )


def assert_a2a_content_type(response: httpx.Response) -> None:
    values = response.headers.get_list("content-type")
    assert values == [A2A_CONTENT_TYPE], describe(response)


def assert_no_a2a_body(response: httpx.Response, status: int | tuple[int, ...]) -> None:
    """A bare status: no A2A content type and (the safe choice) an empty body."""
    statuses = status if isinstance(status, tuple) else (status,)
    assert response.status_code in statuses, describe(response)
    content_type = response.headers.get("content-type", "")
    assert "application/a2a+json" not in content_type, describe(response)


def assert_empty(response: httpx.Response, status: int) -> None:
    """A bare status with an empty body (the Provider's own refusals)."""
    assert_no_a2a_body(response, status)
    assert response.content == b"", describe(response)


def assert_challenge(response: httpx.Response) -> None:
    """The PACT 401: exactly `WWW-Authenticate: Bearer realm="a2a"`, no A2A body."""
    assert_empty(response, 401)
    assert response.headers.get_list("www-authenticate") == [CHALLENGE], describe(response)


def assert_a2a_error(response: httpx.Response, reason: str, message: str | None) -> dict[str, Any]:
    """The AIP-193 envelope with exactly one ErrorInfo detail, as `A2AErrorResponseSchema`."""
    status, rpc_status = REASONS[reason]
    assert response.status_code == status, describe(response)
    assert_a2a_content_type(response)
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}, describe(response)
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "status", "message", "details"}, describe(response)
    assert error["code"] == status, describe(response)
    assert type(error["code"]) is int, describe(response)
    assert error["status"] == rpc_status, describe(response)
    assert isinstance(error["message"], str), describe(response)
    if message is not None:
        assert error["message"] == message, describe(response)
    assert error["details"] == [{"@type": ERROR_INFO, "reason": reason, "domain": ERROR_DOMAIN}], (
        describe(response)
    )
    return error


def assert_reply(response: httpx.Response, context_id: str | None = None) -> dict[str, Any]:
    """Exactly `{"message": {messageId, contextId, role: ROLE_AGENT, parts: [{text}]}}`."""
    assert response.status_code == 200, describe(response)
    assert_a2a_content_type(response)
    body: dict[str, Any] = response.json()
    assert set(body) == {"message"}, describe(response)
    message: dict[str, Any] = body["message"]
    assert set(message) == {"messageId", "contextId", "role", "parts"}, describe(response)
    assert message["role"] == "ROLE_AGENT"
    assert isinstance(message["messageId"], str)
    assert message["messageId"]
    assert isinstance(message["contextId"], str)
    assert message["contextId"]
    parts = message["parts"]
    assert isinstance(parts, list), describe(response)
    assert len(parts) == 1, describe(response)
    assert set(parts[0]) == {"text"}, describe(response)
    assert isinstance(parts[0]["text"], str), describe(response)
    if context_id is not None:
        assert message["contextId"] == context_id
    return message
