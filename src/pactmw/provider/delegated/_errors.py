"""The two refusals of the authorization server: OAuth errors (JSON) and consent pages (HTML).

Both are rendered by `pactmw.provider.errors.error_response`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pactmw.core.errors import PactmwError


class OAuthError(PactmwError):
    """An RFC 6749 §5.2 / RFC 8628 error, rendered as its JSON body (no-store)."""

    def __init__(
        self,
        error: str,
        description: str,
        status: int = 400,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status
        #: Further response headers (`Retry-After` on a rate-limit refusal).
        self.headers = headers

    @classmethod
    def rate_limited(cls, wait: int, what: str) -> OAuthError:
        """429 with `Retry-After`: this agent user sent too many `what` requests this window.

        RFC 6749 registers no error code for a client over its limit; `temporarily_unavailable`
        (§4.1.2.1) is the registered "try again later" and RFC 6585's 429 says why, so any
        OAuth client backs off, and one that honours `Retry-After` knows for how long.
        """
        return cls(
            "temporarily_unavailable",
            f"too many {what} requests for this agent user; retry after {wait} s",
            429,
            (("Retry-After", str(wait)),),
        )


class ConsentRefused(PactmwError):
    """A consent page error, rendered as an HTML page with `status` (and `headers`).

    `message` is English, with `%(name)s` placeholders filled from `params`: the pages
    translate it (`ConsentPages.translate`) before filling them in. Every message is written
    out in a `ConsentRefused(...)` (or `SignInReused(...)`) call, where the catalog template's
    extraction finds it.
    """

    def __init__(
        self,
        message: str,
        status: int,
        headers: tuple[tuple[str, str], ...] = (),
        params: Mapping[str, object] | None = None,
    ) -> None:
        self.params = dict(params or {})
        super().__init__(message % self.params if self.params else message)
        self.message = message
        self.status = status
        #: Further response headers (`Retry-After` on a rate-limit refusal).
        self.headers = headers

    @classmethod
    def unusable_code(cls) -> ConsentRefused:
        """The user code matches no pending, unexpired authorization of this Brand."""
        return ConsentRefused("This code is unknown, expired or already used.", 400)

    @classmethod
    def rate_limited(cls, wait: int) -> ConsentRefused:
        """429 with `Retry-After`: too many page requests from this client address. A page,
        so that the person reads why and for how long rather than a browser's blank 429."""
        retry_after = (("Retry-After", str(wait)),)
        if wait <= 60:
            return ConsentRefused(
                "Too many requests came from your network. Please try again in a minute.",
                429,
                retry_after,
            )
        return ConsentRefused(
            "Too many requests came from your network. Please try again in %(minutes)s minutes.",
            429,
            retry_after,
            {"minutes": math.ceil(wait / 60)},
        )


__all__ = [
    "ConsentRefused",
    "OAuthError",
]
