"""The agent's own calls to its broker: bounded JSON POSTs, as the agent when they need it
(its credential and a request proof of possession, `Parafe-PoP`), tried again as
`BrokerRetry` says. The wire rules are `pactmw.protocols.parafe._broker_api`'s."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from typing import Any

from attrs import field, frozen
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import FetchError, MalformedInput
from pactmw.core.fetch import FetchPolicy, http_request, retry_after
from pactmw.core.jose import sign_bytes
from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe._broker_api import BrokerRetry, request_pop


@frozen
class BrokerAnswer:
    """One answer of the broker: its status, its JSON body (None when empty or not JSON) and
    its `Retry-After` in seconds (None when absent)."""

    status: int
    body: Any = field(repr=False)
    retry_after: float | None = None


class BrokerClient:
    """POSTs to the broker at `broker_url` (no trailing slash), bounded by `policy`.

    `post` sends no credentials; `post_as_agent` sends `credential` and a request proof
    signed with `key` (either may be None until such a call, which then raises
    `RuntimeError`); `send` tries again as `retry` says, sleeping with `sleep`. `clock`
    (epoch seconds) dates the proofs. Thread-safe.
    """

    def __init__(
        self,
        broker_url: str,
        *,
        credential: str | None,
        key: PrivateJWK | None,
        policy: FetchPolicy,
        clock: Callable[[], float],
        retry: BrokerRetry | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.broker_url = broker_url
        self.credential = credential
        self.key = key
        self.retry = retry if retry is not None else BrokerRetry()
        self._policy = policy
        self._clock = clock
        self._sleep = sleep

    def pop(self, method: str, url: str, **bound: Any) -> str:
        """A request proof of possession for one call (see `ParafeAgent.request_pop`)."""
        if self.key is None:
            raise RuntimeError("a request proof needs the agent's signing_key")
        return request_pop(self.key, method, url, now=self._clock(), **bound)

    def post(
        self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> BrokerAnswer:
        """One POST of `body` as JSON to `{broker_url}{path}`. Raises `FetchError` when the
        broker cannot be reached. Blocking."""
        answer = http_request(
            "POST",
            self.broker_url + path,
            self._policy,
            body=json_dumps(dict(body)),
            headers=headers or {},
        )
        return BrokerAnswer(
            status=answer.status,
            body=_parsed(answer.body),
            retry_after=retry_after(
                answer.headers.get("retry-after"),
                date=answer.headers.get("date"),
                now=self._clock(),
            ),
        )

    def post_as_agent(self, path: str, body: Mapping[str, Any], **bound: Any) -> BrokerAnswer:
        """`post` with `Authorization: Bearer <credential>` and a fresh `Parafe-PoP` binding
        `bound` (e.g. `session_id`)."""
        if self.credential is None:
            raise RuntimeError("calls to the broker as this agent need its credential")
        headers = {
            "Authorization": f"Bearer {self.credential}",
            "Parafe-PoP": self.pop("POST", self.broker_url + path, **bound),
        }
        return self.post(path, body, headers)

    def send(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        idempotent: bool,
        as_agent: bool = False,
        **bound: Any,
    ) -> BrokerAnswer:
        """`post` (or `post_as_agent`, with a new proof each attempt) tried again after a
        network failure, a 429 or a 5xx as `retry` allows for an `idempotent` call (or not).
        Returns the last answer; raises the last `FetchError` when there was none. Blocking:
        it sleeps between attempts."""
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = (
                    self.post_as_agent(path, body, **bound) if as_agent else self.post(path, body)
                )
            except FetchError:
                # core.fetch cannot tell a connection that never opened from a lost answer.
                wait = self.retry.wait(attempt, status=None, idempotent=idempotent)
                if wait is None:
                    raise
            else:
                wait = self.retry.wait(
                    attempt,
                    status=answer.status,
                    idempotent=idempotent,
                    retry_after=answer.retry_after,
                )
                if wait is None:
                    return answer
            self._sleep(wait)


def _parsed(raw: bytes) -> Any:
    try:
        return json_loads(raw) if raw else None
    except MalformedInput:
        return None


def sign_challenge(key: PrivateJWK, challenge: str) -> str:
    """`challenge_response`: base64 of the agent key's signature over the challenge's bytes."""
    data = bytes.fromhex(challenge)
    if not isinstance(key.key, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise RuntimeError("a Parafé agent key is Ed25519 or P-256")
    # ES256 as raw r||s, like every JWS this package signs (`core.jose.sign_bytes`).
    return base64.b64encode(sign_bytes(key, data)).decode("ascii")


__all__ = [
    "BrokerAnswer",
    "BrokerClient",
    "sign_challenge",
]
