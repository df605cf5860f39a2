"""The personal agent's own Parafé broker credential (spec "New to Parafé"), and filing its
copies of receipts (spec §4.5, §5.3).

    broker = ParafeBrokerClient("https://api.parafe.ai")
    registration = broker.register(generate_private_jwk("ES256"))   # P-256: AP2 needs it
    registration.credential.save("parafe-credential.json")           # with its private key
    show_the_person(registration.claim_link.url)                    # the one the agent acts for
    status = broker.wait_for_claim()                                 # or claim_status()
    if status.claimed and not status.credential_current:
        broker.renew()                                               # broker.credential is new
    broker.file_receipt(session_id, receipt)                        # FiledReceipt, ack verified

The wire format is @getparafe/sdk 0.5's (see `pactmw.client._parafe_wire`). Calls are tried
again as `BrokerRetry` says (fresh proof each attempt): registration never (the agent may
exist already), a claim link or a renewal only when it cannot have run, claim status and
filing after any network failure, 429 or 5xx. Each operation is one flow; the blocking and
the asyncio client drive the same flows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pactmw.client._parafe_wire import (
    MAX_CLAIM_WAIT,
    BrokerCredential,
    BrokerRefused,
    ClaimLink,
    ClaimStatus,
    Registration,
    Renewal,
    agent_request,
    agent_url,
    answer_object,
    parse_claim_link,
    parse_claim_status,
    parse_registration,
    parse_renewal,
    register_request,
)
from pactmw.client.errors import NetworkError, ResponseInvalid
from pactmw.client.flow import AsyncDriver, BlockingDriver, Flow, Sleep
from pactmw.client.http import HttpRequest, HttpResponse, check_url, is_loopback_host
from pactmw.client.transport import AsyncioTransport, AsyncTransport, SyncTransport, Transport
from pactmw.core.encoding import json_dumps
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe import (
    DEFAULT_BROKER_URL,
    BrokerKeys,
    BrokerRetry,
    FiledReceipt,
    IndexAck,
    KeySource,
    ReceiptVerifier,
)
from pactmw.protocols.parafe._broker_api import (
    acknowledged,
    filing_body,
    filing_path,
    filing_result,
    request_pop,
)

#: How long a claim link lives, and so how long `wait_for_claim` waits by default.
CLAIM_LINK_LIFETIME = 30 * 60.0
#: `wait_for_claim` gives up after this many transient failures in a row (the SDK's five).
MAX_CLAIM_FAILURES = 5
#: The default transports' timeout: a claim-status request may be held `MAX_CLAIM_WAIT` s.
BROKER_TIMEOUT = MAX_CLAIM_WAIT + 15.0


def _exchange(
    build: Callable[[], HttpRequest], retry: BrokerRetry | None, *, idempotent: bool
) -> Flow[HttpResponse]:
    """Send `build()` (a new request, and so a new proof, per attempt), tried again as `retry`
    says (None: never); the last response, or the last `NetworkError`."""
    attempt = 0
    while True:
        attempt += 1
        try:
            response: HttpResponse = yield build()
        except NetworkError as exc:
            wait = None
            if retry is not None and exc.retryable:
                wait = retry.wait(
                    attempt, status=None, idempotent=idempotent, delivered=exc.maybe_delivered
                )
            if wait is None:
                raise
        else:
            if retry is None:
                return response
            delay = response.retry_after()
            wait = retry.wait(
                attempt, status=response.status, idempotent=idempotent, retry_after=delay
            )
            if wait is None:
                return response
        yield Sleep(wait)


def _claim_wait(seconds: int) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise TypeError("wait is whole seconds")
    if not 0 <= seconds <= MAX_CLAIM_WAIT:
        raise ValueError(f"wait must be from 0 to {MAX_CLAIM_WAIT} seconds")
    return seconds


class _Broker:
    """What both clients share: the broker, the credential held, and each call's flow."""

    def __init__(
        self,
        broker_url: str,
        credential: BrokerCredential | None,
        retry: BrokerRetry | None,
        keys: KeySource | None,
        clock: Callable[[], float],
    ) -> None:
        parts = check_url(broker_url)
        self.broker_url = broker_url.rstrip("/")
        self.credential = credential
        self.retry = retry or BrokerRetry()
        policy = FetchPolicy(allow_http_on_loopback=is_loopback_host(parts.hostname or ""))
        #: The broker's keys, which verify its acknowledgments.
        self.keys: KeySource = keys or BrokerKeys(self.broker_url, fetch_policy=policy)
        self._clock = clock

    def _held(self) -> BrokerCredential:
        if self.credential is None:
            raise RuntimeError("no broker credential: register() first, or pass credential=")
        return self.credential

    def _register(
        self,
        key: PrivateJWK,
        agent_type: str,
        name: str | None,
        principal_name: str | None,
        scope_policies: Mapping[str, Any] | None,
    ) -> Flow[Registration]:
        request = register_request(
            self.broker_url,
            key,
            agent_type=agent_type,
            name=name,
            principal_name=principal_name,
            scope_policies=scope_policies,
            now=self._clock(),
        )
        # Never tried again: the proof is single use, and the agent may exist already.
        response = yield from _exchange(lambda: request, None, idempotent=False)
        registration = parse_registration(response, key)
        self.credential = registration.credential
        return registration

    def _as_agent(
        self, method: str, action: str, *, idempotent: bool, query: str = ""
    ) -> Flow[HttpResponse]:
        """`{method} /agents/{id}/{action}` as the held agent, a new proof each attempt."""
        held = self._held()
        url = agent_url(self.broker_url, held.agent_id, action)
        return _exchange(
            lambda: agent_request(method, url, held, now=self._clock(), query=query),
            self.retry,
            idempotent=idempotent,
        )

    def _claim_link(self) -> Flow[ClaimLink]:
        # Each call replaces the link: not sent again after it may have run.
        response = yield from self._as_agent("POST", "claim-link", idempotent=False)
        return parse_claim_link(response)

    def _claim_status(self, wait: int) -> Flow[ClaimStatus]:
        query = f"?wait={_claim_wait(wait)}" if wait else ""
        response = yield from self._as_agent("GET", "claim-status", idempotent=True, query=query)
        return parse_claim_status(response)

    def _wait_for_claim(self, timeout: float, wait: int) -> Flow[ClaimStatus]:
        if _claim_wait(wait) < 1:
            raise ValueError("wait_for_claim needs a wait of at least 1 second")
        deadline = self._clock() + timeout
        status: ClaimStatus | None = None
        failures = 0
        while status is None or not status.claimed:
            left = deadline - self._clock()
            if status is not None and left <= 0:
                break
            try:
                status = yield from self._claim_status(max(1, min(wait, int(left) or 1)))
                failures = 0
            except (NetworkError, BrokerRefused) as exc:
                # A deploy or a dropped connection: pause, then ask again (a new proof); not
                # a failure every request meets (an untrusted certificate, a too-large answer).
                transient = exc.retryable if isinstance(exc, NetworkError) else exc.status >= 500
                failures += 1
                if not transient or failures >= MAX_CLAIM_FAILURES or self._clock() >= deadline:
                    raise
                yield Sleep(2.0)
        return status

    def _renew(self) -> Flow[Renewal]:
        held = self._held()
        # A renewal revokes the old credential: not sent again after it may have run.
        response = yield from self._as_agent("POST", "renew", idempotent=False)
        renewal = parse_renewal(response, held)
        self.credential = renewal.credential
        return renewal

    def _file(self, session_id: str, receipt: str, kind: str | None) -> Flow[tuple[bool, str]]:
        held = self._held()
        url = self.broker_url + filing_path(session_id)
        body = json_dumps(filing_body(receipt, kind))

        def build() -> HttpRequest:
            pop = request_pop(held.key, "POST", url, now=self._clock(), session_id=session_id)
            headers = (
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
                ("Authorization", f"Bearer {held.credential}"),
                ("Parafe-PoP", pop),
            )
            return HttpRequest("POST", url, headers=headers, body=body)

        response = yield from _exchange(build, self.retry, idempotent=True)
        answer: Any
        try:
            answer = response.json()
        except ResponseInvalid:
            answer = None
        result = filing_result(response.status, answer)
        if result is None:
            answer_object(response)  # raises BrokerRefused for a refusal
            raise ResponseInvalid(f"{url}: the broker did not index the receipt")
        duplicate, acknowledgment = result
        if acknowledgment is None:
            raise ResponseInvalid(f"{url}: the broker sent no acknowledgment")
        return duplicate, acknowledgment

    def _filed(
        self, ack: IndexAck, jws: str, session_id: str, receipt: str, kind: str | None, dup: bool
    ) -> FiledReceipt:
        return acknowledged(
            ack, jws, receipt=receipt, session_id=session_id, kind=kind, duplicate=dup
        )


class ParafeBrokerClient(_Broker):
    """The personal agent's blocking client of its Parafé broker (default the public one).

    `credential` is the agent's `BrokerCredential` (None until `register`); `register` and
    `renew` replace it, so save `client.credential` after them. `retry` says when a call is
    tried again, `keys` where the broker's JWKS comes from (it verifies acknowledgments),
    `clock` dates the proofs. The default transport waits up to `BROKER_TIMEOUT` seconds (a
    claim-status request may be held a minute); one of your own must allow for `wait`. Not
    thread-safe (it holds the credential).
    """

    def __init__(
        self,
        broker_url: str = DEFAULT_BROKER_URL,
        *,
        credential: BrokerCredential | None = None,
        retry: BrokerRetry | None = None,
        keys: KeySource | None = None,
        transport: Transport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(broker_url, credential, retry, keys, clock)
        self.driver = BlockingDriver(transport or SyncTransport(timeout=BROKER_TIMEOUT), sleep)

    def register(
        self,
        key: PrivateJWK,
        *,
        agent_type: str = "personal",
        name: str | None = None,
        principal_name: str | None = None,
        scope_policies: Mapping[str, Any] | None = None,
    ) -> Registration:
        """Register a new agent with `key` (Ed25519, or P-256 for AP2), no API key: `POST
        /agents/register`. Raises `BrokerRefused`, `NetworkError` or `ResponseInvalid`."""
        flow = self._register(key, agent_type, name, principal_name, scope_policies)
        return self.driver.run(flow)

    def create_claim_link(self) -> ClaimLink:
        """A new claim link (it replaces the last one); `BrokerRefused` 409 `already_claimed`
        once a person has claimed the agent."""
        return self.driver.run(self._claim_link())

    def claim_status(self, wait: int = 0) -> ClaimStatus:
        """Whether the agent is claimed; `wait` (0-60 s) asks the broker to hold the answer
        until the claim is approved or that time has passed."""
        return self.driver.run(self._claim_status(wait))

    def wait_for_claim(self, timeout: float = CLAIM_LINK_LIFETIME, wait: int = 25) -> ClaimStatus:
        """Ask until the agent is claimed or `timeout` passes, `wait` seconds a request;
        rides out up to four transient failures in a row. The last status: check `claimed`."""
        return self.driver.run(self._wait_for_claim(timeout, wait))

    def renew(self) -> Renewal:
        """Renew the credential (`POST /agents/{id}/renew`), as the agent itself: the broker
        re-issues it when it no longer shows who the agent acts for, its tier changed, or it
        is near expiry; `renewed` says whether it did (and `credential` is then the new one)."""
        return self.driver.run(self._renew())

    def file_receipt(self, session_id: str, receipt: str, kind: str | None = None) -> FiledReceipt:
        """File a receipt (an action receipt, or an AP2 receipt with its `kind`) in the
        session's index, as the client SHOULD file its copies; the broker's acknowledgment is
        verified with its keys (`ParafeError` when it fails). A receipt filed before returns
        its original acknowledgment (`duplicate`)."""
        duplicate, jws = self.driver.run(self._file(session_id, receipt, kind))
        ack = ReceiptVerifier(self.keys, clock=self._clock).verify_index_ack(jws)
        return self._filed(ack, jws, session_id, receipt, kind, duplicate)


class AsyncParafeBrokerClient(_Broker):
    """`ParafeBrokerClient` for asyncio: the same flows, driven by `AsyncioTransport`."""

    def __init__(
        self,
        broker_url: str = DEFAULT_BROKER_URL,
        *,
        credential: BrokerCredential | None = None,
        retry: BrokerRetry | None = None,
        keys: KeySource | None = None,
        transport: AsyncTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(broker_url, credential, retry, keys, clock)
        self.driver = AsyncDriver(transport or AsyncioTransport(timeout=BROKER_TIMEOUT), sleep)

    async def register(
        self,
        key: PrivateJWK,
        *,
        agent_type: str = "personal",
        name: str | None = None,
        principal_name: str | None = None,
        scope_policies: Mapping[str, Any] | None = None,
    ) -> Registration:
        flow = self._register(key, agent_type, name, principal_name, scope_policies)
        return await self.driver.run(flow)

    async def create_claim_link(self) -> ClaimLink:
        return await self.driver.run(self._claim_link())

    async def claim_status(self, wait: int = 0) -> ClaimStatus:
        return await self.driver.run(self._claim_status(wait))

    async def wait_for_claim(
        self, timeout: float = CLAIM_LINK_LIFETIME, wait: int = 25
    ) -> ClaimStatus:
        return await self.driver.run(self._wait_for_claim(timeout, wait))

    async def renew(self) -> Renewal:
        return await self.driver.run(self._renew())

    async def file_receipt(
        self, session_id: str, receipt: str, kind: str | None = None
    ) -> FiledReceipt:
        duplicate, jws = await self.driver.run(self._file(session_id, receipt, kind))
        ack = await ReceiptVerifier(self.keys, clock=self._clock).averify_index_ack(jws)
        return self._filed(ack, jws, session_id, receipt, kind, duplicate)


__all__ = [
    "BROKER_TIMEOUT",
    "CLAIM_LINK_LIFETIME",
    "MAX_CLAIM_FAILURES",
    "AsyncParafeBrokerClient",
    "BrokerCredential",
    "BrokerRefused",
    "ClaimLink",
    "ClaimStatus",
    "ParafeBrokerClient",
    "Registration",
    "Renewal",
]
