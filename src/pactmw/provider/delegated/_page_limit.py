"""The one rate limit of the person-facing pages (consent, decision, connected agents).

Counted per client address, where its limiter counts: in the store when the store is shared
(every process on it shares one count), else in this process. One rule for every page, so a
page counted on its own could not give each process, or each page, a bucket of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from pactmw.core.http import Request
from pactmw.provider.delegated._errors import ConsentRefused
from pactmw.provider.flow import SubFlow
from pactmw.provider.ratelimit import RateLimiter


@frozen
class PageRateLimit:
    """Admits one page request of a client address, or refuses it: a 429 page with
    `Retry-After` (`ConsentRefused.rate_limited`)."""

    limiter: RateLimiter
    clock: Callable[[], float]

    def admit(self, request: Request) -> SubFlow:
        # `request.client` is the peer address the server saw, or the one a proxy the
        # server trusts reported (docs/deployment.md): never a header the client chose.
        wait = yield from self.limiter.admit(request.client or "?", "", self.clock())
        if wait is not None:
            raise ConsentRefused.rate_limited(wait)


__all__ = [
    "PageRateLimit",
]
