"""What every Poppy endpoint refuses past its bounds: a body over the endpoint's limit
(`413 request_too_large`) and a caller over its rate limit (`429 rate_limited`)."""

from __future__ import annotations

from pactmw.protocols.poppy import PoppyError
from pactmw.provider.flow import NeedBody, SubFlow


def bounded_body(limit: int, what: str) -> SubFlow:
    """The request's body, at most `limit` bytes; the value is the bytes. Past the limit,
    `413 request_too_large` saying `what` is too large."""
    body = yield NeedBody(limit)
    if body is None:
        raise PoppyError(413, "request_too_large", f"{what} is too large")
    return body


def rate_limited(wait: int, what: str) -> PoppyError:
    """`429 rate_limited` with `Retry-After` (PAP-4.3-18): too many `what`."""
    return PoppyError(
        429, "rate_limited", f"too many {what}", headers=(("Retry-After", str(wait)),)
    )


__all__ = [
    "bounded_body",
    "rate_limited",
]
