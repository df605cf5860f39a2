"""What every Poppy endpoint refuses past its bounds: a body over the endpoint's limit
(`413 request_too_large`) and a caller over its rate limit (`429 rate_limited`)."""

from __future__ import annotations

from pactmw.protocols.poppy import PoppyError
from pactmw.provider.flow import NeedBody, SubFlow
from pactmw.provider.ratelimit import RateLimiter


def bounded_body(limit: int, what: str) -> SubFlow:
    """The request's body, at most `limit` bytes; the value is the bytes. Past the limit,
    `413 request_too_large` saying `what` is too large."""
    body = yield NeedBody(limit)
    if body is None:
        raise PoppyError(413, "request_too_large", f"{what} is too large")
    return body


def within_rate(
    limiter: RateLimiter, client_id: str, user_id: str, now: float, what: str
) -> SubFlow:
    """Count one request of the agent's user (`user_id` "" for the agent as a whole) against
    `limiter`; over it, `429 rate_limited` with `Retry-After` (PAP-4.3-18): too many `what`."""
    wait = yield from limiter.admit(client_id, user_id, now)
    if wait is not None:
        raise PoppyError(
            429, "rate_limited", f"too many {what}", headers=(("Retry-After", str(wait)),)
        )


__all__ = [
    "bounded_body",
    "within_rate",
]
