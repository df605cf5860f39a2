"""The demo's personal agent: `pactmw.client`, with a fresh key and its JWKS on 127.0.0.1.

Everything the personal agent does goes through the client: it signs the PACT JWTs
(`AgentSigner`), talks A2A (`A2AClient`), runs the device flow (`DeviceCodeClient`) and
checks receipts (`verify_receipt`). The one addition is `Wire`, a transport that keeps the
last answer so the transcript can show what came back (status, headers, bytes) beside what
the client made of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TypeVar

from pactmw.client import (
    A2AClient,
    AgentSigner,
    DelegationScheme,
    DeviceCodeClient,
    HttpRequest,
    HttpResponse,
    JwksHost,
    MessageReply,
    SendResult,
    StepUp,
    SyncTransport,
)
from pactmw.demo._common import ISSUER, REQUEST_TIMEOUT, DemoFailed, expect

E = TypeVar("E", bound=Exception)


class Wire(SyncTransport):
    """`SyncTransport` that keeps the last response it received."""

    def __init__(self) -> None:
        super().__init__(timeout=REQUEST_TIMEOUT)
        self._last: HttpResponse | None = None

    def send(self, request: HttpRequest) -> HttpResponse:
        response = super().send(request)
        self._last = response
        return response

    @property
    def last(self) -> HttpResponse:
        assert self._last is not None, "nothing was sent yet"
        return self._last


class PersonalAgent:
    """A signing key for `ISSUER`, its published JWKS, and clients that use both."""

    def __init__(self) -> None:
        self.signer = AgentSigner.generate(issuer=ISSUER)
        self.wire = Wire()
        self.jwks: JwksHost | None = None

    def publish(self) -> str:
        """Serve the public key (development: plain http on 127.0.0.1); the JWKS URL."""
        self.jwks = self.signer.serve_jwks()
        return self.jwks.url

    def client(self, interface: str, sub: str, audience: str) -> A2AClient:
        """Talk to a Brand's interface for user `sub`: a fresh PACT JWT on every request."""
        return A2AClient(interface, self.signer.for_user(sub, audience), transport=self.wire)

    def device(self, scheme: DelegationScheme, sub: str, audience: str) -> DeviceCodeClient:
        """The device flow at a Brand's authorization server, as the OAuth client `ISSUER`."""
        return DeviceCodeClient(scheme, self.signer.for_user(sub, audience), transport=self.wire)

    def send_without_token(self, interface: str, text: str) -> HttpResponse:
        """What a caller without a personal agent's key sends: no Authorization header."""
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
        request = HttpRequest(
            "POST",
            f"{interface}/message:send",
            headers=(("Content-Type", "application/json"), ("A2A-Version", "1.0")),
            body=json.dumps({"message": message}).encode(),
        )
        return self.wire.send(request)

    def close(self) -> None:
        if self.jwks is not None:
            self.jwks.close()
            self.jwks = None


def reply_of(result: SendResult, what: str) -> MessageReply:
    """The agent's reply, failing the step on a step-up or an empty reply."""
    if not isinstance(result, MessageReply):
        raise DemoFailed(f"{what}: expected a reply, got a step-up for {result.missing_scopes}")
    expect(bool(result.text), f"{what}: the reply has no text")
    return result


def step_up_of(result: SendResult, what: str) -> StepUp:
    """The `TASK_STATE_AUTH_REQUIRED` task of a turn (spec §5.5), failing the step otherwise."""
    if not isinstance(result, StepUp):
        raise DemoFailed(f"{what}: expected a step-up task, got the reply {result.text!r}")
    return result


def refusal(kind: type[E], what: str, call: Callable[[], object]) -> E:
    """The `kind` error `call` raises; a step failure when it answers instead."""
    try:
        call()
    except kind as refused:
        return refused
    raise DemoFailed(f"{what}: expected {kind.__name__}, got an answer")


__all__ = [
    "PersonalAgent",
    "Wire",
    "refusal",
    "reply_of",
    "step_up_of",
]
