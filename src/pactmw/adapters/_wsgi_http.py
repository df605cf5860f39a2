"""WSGI translation: an environ to the neutral `Request`, a bounded body reader, and a neutral
`Response` to Werkzeug or to `start_response`."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from werkzeug.exceptions import ClientDisconnected
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Response as WerkzeugResponse
from werkzeug.wsgi import get_input_stream

from pactmw.adapters._common import bounded_body
from pactmw.core.errors import RequestRefused
from pactmw.core.http import Request, Response

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


def to_werkzeug(response: Response) -> WerkzeugResponse:
    """A neutral `Response` as a Werkzeug response (no default content type added)."""
    result = WerkzeugResponse(response.body, status=response.status)
    result.headers.clear()
    for name, value in response.headers:
        result.headers.add(name, value)
    return result


def wsgi_path(environ: WSGIEnvironment) -> str:
    """`PATH_INFO` as text. The server has percent-decoded it once (PEP 3333 hands the bytes
    over as latin-1 text): it is only re-read as UTF-8 here, never decoded again."""
    path: str = environ.get("PATH_INFO", "")
    return path.encode("latin-1").decode("utf-8", "replace")


def neutral_request(environ: WSGIEnvironment) -> Request:
    """A WSGI environ as the neutral `Request`."""
    headers = [
        (key[5:].replace("_", "-").lower(), str(value))
        for key, value in environ.items()
        if key.startswith("HTTP_")
    ]
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers.append((key.replace("_", "-").lower(), str(environ[key])))
    return Request(
        method=environ.get("REQUEST_METHOD", "GET"),
        path=wsgi_path(environ),
        query=environ.get("QUERY_STRING", ""),
        headers=tuple(headers),
        client=environ.get("REMOTE_ADDR"),
    )


def body_reader(environ: WSGIEnvironment, *, keep: bool = False) -> Callable[[int], bytes | None]:
    """Read the request body on demand, refusing (None) anything longer than `limit`,
    declared or not: a chunked body stops being read at the limit.

    With `keep`, what was read is put back as `wsgi.input` (with its `CONTENT_LENGTH`), so
    the application behind a guard reads the same body.
    """

    def read_input(size: int) -> bytes:
        try:
            data: bytes = get_input_stream(environ, safe_fallback=True).read(size)
        except ClientDisconnected:  # the upload ended before its declared length
            raise RequestRefused(400) from None
        except OSError:
            # The server could not read the body: broken chunked framing (Werkzeug's
            # "Invalid chunk header", gunicorn's chunk errors) or a connection that failed
            # mid-upload. The client's fault, never a 500.
            raise RequestRefused(400) from None
        return data

    def read(limit: int) -> bytes | None:
        body = bounded_body(environ.get("CONTENT_LENGTH"), limit, read_input)
        if body is not None and keep:
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            # The body is now a plain one of that length, no longer a chunked stream.
            environ.pop("wsgi.input_terminated", None)
            environ.pop("HTTP_TRANSFER_ENCODING", None)
        return body

    return read


def respond(response: Response, start_response: StartResponse) -> Iterable[bytes]:
    """Send a neutral `Response` through `start_response`."""
    reason = HTTP_STATUS_CODES.get(response.status, "Unknown")
    start_response(f"{response.status} {reason}", list(response.headers))
    return [response.body]


__all__ = [
    "body_reader",
    "neutral_request",
    "respond",
    "to_werkzeug",
    "wsgi_path",
]
