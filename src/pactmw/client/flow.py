"""One generator-based flow per client operation, driven by a blocking or an asyncio driver.

As in httpx's auth flows, an operation is written once as a generator that yields what it
needs done (`HttpRequest`: send it; `Sleep`: wait) and receives the results (`HttpResponse`,
or a `NetworkError` thrown into it). `run_sync` and `run_async` are the only places that do
I/O, so retries, `Retry-After`, redirects and device-code polling exist once, and tests can
drive a flow with scripted responses and a fake clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from attrs import frozen

from pactmw.client.errors import NetworkError, RateLimited
from pactmw.client.http import HttpRequest, HttpResponse
from pactmw.client.transport import AsyncTransport, Transport
from pactmw.core.drive import adrive, drive

T = TypeVar("T")


@frozen
class Sleep:
    """Wait this many seconds before going on."""

    seconds: float


Effect = HttpRequest | Sleep
Flow = Generator[Effect, Any, T]

#: A fresh personal-agent JWT per call (`AgentSigner.for_user(...)`): every attempt of a
#: request is signed anew.
TokenSource = Callable[[], str]


def check_token_source(token: object) -> None:
    """Refuse a token that is not a `TokenSource` where a client is made, not at its first call.

    A JWT string (from `pactmw token`) is the likely mistake: it lasts minutes, and each attempt
    needs a fresh one. The text never quotes it: it is a credential.
    """
    if not callable(token):
        raise TypeError(
            "token must be a callable that returns a fresh personal-agent JWT for each request,"
            f" such as signer.for_user(sub, audience=...), not a {type(token).__name__}"
        )


@frozen
class RetryPolicy:
    """How hard a client tries before it raises. Every wait is bounded.

    * `network_retries`: resends after a `NetworkError`, waiting `backoff`, then twice as
      long each time (at most `max_backoff`). A request that may have been delivered is
      resent only when the operation is idempotent (see `A2AClient.send`).
    * `rate_limit_retries`: resends after a 429, each after its `Retry-After` (or
      `default_retry_after` when absent). A `Retry-After` above `max_retry_after` is not waited
      out: `RateLimited` is raised at once, carrying it.
    * `retry_new_conversations`: also resend a message that starts a conversation (no
      `contextId`) after a failure that may have been delivered. Off by default: the Provider
      keys retries on `(contextId, messageId)`, so such a resend opens a second conversation
      and runs the Brand's agent twice (pact-provider.md §4).
    """

    network_retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 4.0
    rate_limit_retries: int = 2
    max_retry_after: float = 30.0
    default_retry_after: float = 1.0
    retry_new_conversations: bool = False

    def network_delay(self, attempt: int) -> float:
        """The wait before resend number `attempt` (1-based)."""
        return float(min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))


def exchange(
    build: Callable[[], HttpRequest], policy: RetryPolicy, *, idempotent: bool
) -> Flow[HttpResponse]:
    """Send the request `build()` makes (a fresh one per attempt: new PA JWT, same body) and
    return the first answer that is not a 429, resending within `policy`'s bounds."""
    failures = 0
    throttled = 0
    while True:
        try:
            response: HttpResponse = yield build()
        except NetworkError as exc:
            if (
                not exc.retryable
                or failures >= policy.network_retries
                or (exc.maybe_delivered and not idempotent)
            ):
                if failures:
                    # Each attempt had the transport's whole timeout: "took longer than 10 s"
                    # after 31 s would not say why the call took three times as long.
                    raise NetworkError(
                        f"{exc} ({failures + 1} attempts)",
                        maybe_delivered=exc.maybe_delivered,
                        retryable=exc.retryable,
                    ) from exc
                raise
            failures += 1
            yield Sleep(policy.network_delay(failures))
            continue
        if response.status != 429:
            return response
        # 429 means the request was refused before it ran (RFC 6585), so resending is safe.
        delay = response.retry_after()
        if throttled >= policy.rate_limit_retries or (
            delay is not None and delay > policy.max_retry_after
        ):
            raise RateLimited(
                response.status,
                response.body,
                response.headers,
                retry_after=delay,
                url=response.url,
            )
        throttled += 1
        yield Sleep(policy.default_retry_after if delay is None else delay)


@frozen
class BlockingDriver:
    """How a blocking client runs its flows: `run_sync` on `transport`, waiting with `sleep`."""

    transport: Transport
    sleep: Callable[[float], None]

    def run(self, flow: Flow[T]) -> T:
        return run_sync(flow, self.transport, self.sleep)


@frozen
class AsyncDriver:
    """How an asyncio client runs its flows: `run_async` on `transport`, waiting with `sleep`."""

    transport: AsyncTransport
    sleep: Callable[[float], Awaitable[None]]

    async def run(self, flow: Flow[T]) -> T:
        return await run_async(flow, self.transport, self.sleep)


def run_sync(flow: Flow[T], transport: Transport, sleep: Callable[[float], None]) -> T:
    """Drive a flow with blocking I/O."""
    with contextlib.closing(flow):
        return _drive_sync(flow, transport, sleep)


def _drive_sync(flow: Flow[T], transport: Transport, sleep: Callable[[float], None]) -> T:
    def answer(effect: Effect) -> Any:
        if not isinstance(effect, Sleep):
            return transport.send(effect)
        if effect.seconds > 0:
            sleep(effect.seconds)
        return None

    return drive(flow, answer, catch=(NetworkError,))


async def run_async(
    flow: Flow[T], transport: AsyncTransport, sleep: Callable[[float], Awaitable[None]]
) -> T:
    """Drive a flow with asyncio I/O."""
    with contextlib.closing(flow):
        return await _drive_async(flow, transport, sleep)


async def _drive_async(
    flow: Flow[T], transport: AsyncTransport, sleep: Callable[[float], Awaitable[None]]
) -> T:
    async def answer(effect: Effect) -> Any:
        if not isinstance(effect, Sleep):
            return await transport.send(effect)
        if effect.seconds > 0:
            await sleep(effect.seconds)
        return None

    return await adrive(flow, answer, catch=(NetworkError,))


__all__ = [
    "AsyncDriver",
    "BlockingDriver",
    "Effect",
    "Flow",
    "RetryPolicy",
    "Sleep",
    "TokenSource",
    "check_token_source",
    "exchange",
    "run_async",
    "run_sync",
]
