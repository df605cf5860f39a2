"""Django translation: `HttpRequest` to the neutral `Request`, the body reader, and a
neutral `Response` to `HttpResponse`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse

from pactmw.adapters._common import bounded_body
from pactmw.core.errors import RequestRefused
from pactmw.core.http import Request, Response
from pactmw.provider.errors import error_response


def to_django(response: Response) -> HttpResponse:
    """A neutral `Response` as a Django response (no default content type added)."""
    result = HttpResponse(response.body, status=response.status)
    del result["Content-Type"]
    for name, value in response.headers:
        result[name] = value
    return result


def method_as_sent(request: HttpRequest) -> str:
    """The request's method as the client sent it. Django upper-cases `request.method`, but
    methods are case-sensitive (RFC 9110 §9.1): `get` is no GET, and the Provider answers
    it as every other server's adapter does (a bare 404)."""
    scope = getattr(request, "scope", None)  # an ASGIRequest's META has the upper-cased one
    if isinstance(scope, dict) and isinstance(scope.get("method"), str):
        return str(scope["method"])
    sent = request.META.get("REQUEST_METHOD")
    return sent if isinstance(sent, str) and sent else request.method or "GET"


def neutral_request(request: HttpRequest) -> Request:
    """`path_info` is the path below the script prefix, percent-decoded once by Django."""
    return Request(
        method=method_as_sent(request),
        path=request.path_info,
        query=request.META.get("QUERY_STRING", ""),
        headers=tuple((name.lower(), value) for name, value in request.headers.items()),
        client=request.META.get("REMOTE_ADDR"),
    )


def body_reader(request: HttpRequest, *, keep: bool = False) -> Callable[[int], bytes | None]:
    """Read the body on demand, refusing (None) anything longer than `limit`.

    Under WSGI Django reads exactly `CONTENT_LENGTH` bytes (none without it), so a chunked
    body would look empty: it is refused with 411 instead of misread. Under ASGI Django has
    buffered the whole body before any middleware runs, so its length is checked after.
    With `keep`, the view can read `request.body` again.
    """

    def read_body(size: int) -> bytes:
        return request.body if keep else request.read(size)

    def read(limit: int) -> bytes | None:
        content_length = request.META.get("CONTENT_LENGTH")
        if (
            not content_length
            and request.META.get("HTTP_TRANSFER_ENCODING")
            and isinstance(request, WSGIRequest)
        ):
            raise RequestRefused(411)
        return bounded_body(content_length, limit, read_body)

    return read


def abody_reader(
    request: HttpRequest, *, keep: bool = False
) -> Callable[[int], Awaitable[bytes | None]]:
    """`body_reader` for async views (the body is already in memory or on local disk)."""
    read = body_reader(request, keep=keep)

    async def aread(limit: int) -> bytes | None:
        return read(limit)

    return aread


def refused(exc: RequestRefused) -> HttpResponse:
    """A bare status (411, 503, ...) as the Provider renders it."""
    return to_django(error_response(exc))


__all__ = [
    "abody_reader",
    "body_reader",
    "method_as_sent",
    "neutral_request",
    "refused",
    "to_django",
]
