"""The agent's own calls to its broker: bounded JSON POSTs, as the agent when they need it
(its credential and a request proof of possession, `Parafe-PoP`)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from attrs import evolve
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.core.fetch import FetchPolicy, http_request
from pactmw.core.jose import sign_bytes, sign_compact
from pactmw.core.jwk import PrivateJWK

_POP_TYP = "parafe-pop+jwt"
_MAX_BROKER_TEXT = 500


class BrokerClient:
    """POSTs to the broker at `broker_url` (no trailing slash), bounded by `policy`.

    `post` sends no credentials; `post_as_agent` sends `credential` and a request proof
    signed with `key` (either may be None until such a call, which then raises
    `RuntimeError`). `clock` (epoch seconds) dates the proofs. Thread-safe.
    """

    def __init__(
        self,
        broker_url: str,
        *,
        credential: str | None,
        key: PrivateJWK | None,
        policy: FetchPolicy,
        clock: Callable[[], float],
    ) -> None:
        self.broker_url = broker_url
        self.credential = credential
        self.key = key
        # A request proof names no `kid`: the broker knows the agent's registered key.
        self._pop_key = None if key is None else evolve(key, public=evolve(key.public, kid=None))
        self._policy = policy
        self._clock = clock

    def pop(self, method: str, url: str, **bound: Any) -> str:
        """A request proof of possession for one call (see `ParafeAgent.request_pop`)."""
        if self._pop_key is None:
            raise RuntimeError("a request proof needs the agent's signing_key")
        parts = urlsplit(url)
        claims: dict[str, Any] = {
            "htm": method.upper(),
            "htu": f"{parts.scheme}://{parts.netloc}{parts.path}",
            **bound,
            "jti": str(uuid.uuid4()),
            "iat": int(self._clock()),
        }
        return sign_compact(claims, self._pop_key, typ=_POP_TYP)

    def post(
        self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        """One POST of `body` as JSON to `{broker_url}{path}`: the status and the parsed JSON
        answer (None when empty or not JSON). Raises `FetchError` when the broker cannot be
        reached. Blocking."""
        answer = http_request(
            "POST",
            self.broker_url + path,
            self._policy,
            body=json_dumps(dict(body)),
            headers=headers or {},
        )
        return answer.status, _parsed(answer.body)

    def post_as_agent(self, path: str, body: Mapping[str, Any], **bound: Any) -> tuple[int, Any]:
        """`post` with `Authorization: Bearer <credential>` and a `Parafe-PoP` binding
        `bound` (e.g. `session_id`)."""
        if self.credential is None:
            raise RuntimeError("calls to the broker as this agent need its credential")
        headers = {
            "Authorization": f"Bearer {self.credential}",
            "Parafe-PoP": self.pop("POST", self.broker_url + path, **bound),
        }
        return self.post(path, body, headers)


def _parsed(raw: bytes) -> Any:
    try:
        return json_loads(raw) if raw else None
    except MalformedInput:
        return None


def error_code(answer: Any) -> str | None:
    """The `error` code of a broker's JSON answer, if it names one."""
    code = answer.get("error") if isinstance(answer, Mapping) else None
    return code if isinstance(code, str) else None


def broker_error(answer: Any) -> tuple[str, str]:
    """A broker error answer as (code, message), the reference SDK's `mapBrokerError`: the code
    is `error` (`unknown_error` when absent), the message `message`, `reason` or `error`."""
    body = answer if isinstance(answer, Mapping) else {}

    def text(name: str) -> str | None:
        value = body.get(name)
        return value[:_MAX_BROKER_TEXT] if isinstance(value, str) and value else None

    code = text("error") or "unknown_error"
    return code, text("message") or text("reason") or text("error") or "Unknown error"


def sign_challenge(key: PrivateJWK, challenge: str) -> str:
    """`challenge_response`: base64 of the agent key's signature over the challenge's bytes."""
    data = bytes.fromhex(challenge)
    if not isinstance(key.key, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise RuntimeError("a Parafé agent key is Ed25519 or P-256")
    # ES256 as raw r||s, like every JWS this package signs (`core.jose.sign_bytes`).
    return base64.b64encode(sign_bytes(key, data)).decode("ascii")


__all__ = [
    "BrokerClient",
    "broker_error",
    "error_code",
    "sign_challenge",
]
