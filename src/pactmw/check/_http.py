"""The checker's HTTP side: requests exactly as given, and a personal agent's messages and calls
below the interface URL, with valid tokens unless told otherwise."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from pactmw.check._progress import Progress
from pactmw.check._wire import GREETING
from pactmw.client import AgentSigner, HttpRequest, HttpResponse, RetryPolicy
from pactmw.client.a2a import user_message
from pactmw.client.transport import Transport
from pactmw.core.encoding import json_dumps
from pactmw.core.jose import sign_compact

#: A 429 is waited out this many times, when its Retry-After is at most `MAX_RATE_WAIT` s.
RATE_LIMIT_RETRIES = 3
MAX_RATE_WAIT = 60.0


class Recorder:
    """A transport that remembers the last answer from each URL (for headers the client's
    typed results do not carry, such as a token response's Cache-Control)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.last: dict[str, HttpResponse] = {}

    def send(self, request: HttpRequest) -> HttpResponse:
        response = self.transport.send(request)
        self.last[request.url] = response
        return response


class Http:
    """Requests for the checks, as the personal agent `signer` (user `sub`, audience
    `audience`); `interface` is where messages go, set once the card is read. `transport`
    and `retry` serve the client functions (card, metadata, device code)."""

    def __init__(
        self,
        transport: Transport,
        signer: AgentSigner,
        audience: str,
        *,
        sub: str,
        progress: Progress,
    ) -> None:
        self.transport = Recorder(transport)
        self.retry = RetryPolicy(network_retries=1)
        self.signer = signer
        self.audience = audience
        self.sub = sub
        self.progress = progress
        self.interface = ""

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
    ) -> HttpResponse:
        """One request as given (no retries but after a 429 with a short Retry-After)."""
        request = HttpRequest(method, url, headers=tuple(headers), body=body)
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            response = self.transport.send(request)
            if response.status != 429 or attempt == RATE_LIMIT_RETRIES:
                return response
            wait = response.retry_after()
            wait = 1.0 if wait is None else wait
            if wait > MAX_RATE_WAIT:
                return response
            self.progress.note(f"rate limited (429): waiting {wait:.0f} s as Retry-After asks")
            time.sleep(wait)
        return response  # pragma: no cover - the loop always returns

    def token(self, sub: str | None = None) -> str:
        return self.signer.sign(sub or self.sub, self.audience)

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.signer.issuer,
            "sub": self.sub,
            "aud": self.audience,
            "iat": now,
            "exp": now + 120,
        }
        claims.update(overrides)
        return claims

    def signed(self, **overrides: Any) -> str:
        """A JWT with the checker's key and any claims (`typ: JWT`, the key's `kid`)."""
        return sign_compact(self.claims(**overrides), self.signer.key, typ="JWT")

    def send(
        self,
        text: str = GREETING,
        *,
        interface: str | None = None,
        sub: str | None = None,
        token: str | None = None,
        auth: bool = True,
        context_id: str | None = None,
        message_id: str | None = None,
        body: bytes | None = None,
        path: str = "message:send",
        headers: Mapping[str, str | None] | None = None,
    ) -> HttpResponse:
        """POST a message (or `body`) with the usual headers; `headers` overrides them (None
        drops one)."""
        if body is None:
            message = user_message(
                text, message_id=message_id or str(uuid.uuid4()), context_id=context_id
            )
            body = json_dumps({"message": message})
        sent: dict[str, str | None] = {
            "Authorization": f"Bearer {token or self.token(sub)}" if auth else None,
            "A2A-Version": "1.0",
            "Content-Type": "application/json",
        }
        sent.update(headers or {})
        return self.request(
            "POST",
            f"{interface or self.interface}/{path}",
            headers=[(k, v) for k, v in sent.items() if v is not None],
            body=body,
        )

    def call(
        self,
        method: str,
        rest: str,
        *,
        auth: bool = True,
        token: str | None = None,
        interface: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> HttpResponse:
        """Any request below the interface URL, with a valid token unless `auth=False`."""
        sent = dict(headers or {})
        if auth:
            sent.setdefault("Authorization", f"Bearer {token or self.token()}")
        if body:
            sent.setdefault("Content-Type", "application/json")
        url = f"{interface or self.interface}/{rest}"
        return self.request(method, url, headers=list(sent.items()), body=body)


__all__ = [
    "MAX_RATE_WAIT",
    "RATE_LIMIT_RETRIES",
    "Http",
    "Recorder",
]
