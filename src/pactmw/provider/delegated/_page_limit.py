"""The one rate limit of the person-facing pages (consent, decision, connected agents).

Counted per client address, where its limiter counts: in the store when the store is shared
(every process on it shares one count), else in this process. One rule for every page, so a
page counted on its own could not give each process, or each page, a bucket of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from pactmw.core.errors import RequestRefused
from pactmw.core.http import Request
from pactmw.provider.flow import SubFlow
from pactmw.provider.ratelimit import RateLimiter


@frozen
class PageRateLimit:
    """Admits one page request of a client address, or refuses it with 429 `Retry-After`."""

    limiter: RateLimiter
    clock: Callable[[], float]

    def admit(self, request: Request) -> SubFlow:
        # `request.client` is the peer address the server saw, or the one a proxy the
        # server trusts reported (docs/deployment.md): never a header the client chose.
        wait = yield from self.limiter.admit(request.client or "?", "", self.clock())
        if wait is not None:
            raise RequestRefused(429, (("Retry-After", str(wait)),))


__all__ = [
    "PageRateLimit",
]
