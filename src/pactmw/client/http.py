"""The client's HTTP values and a sans-I/O HTTP/1.1 codec shared by both transports.

`HttpRequest` and `HttpResponse` are plain frozen values: the protocol code builds the one and
reads the other, and never touches a socket. `encode_request` turns a request into bytes and
`ResponseParser` turns the bytes that come back into a response (the h11 idea, kept to what a
client of one request per connection needs: `Connection: close`, Content-Length, chunked or
read-to-close bodies, 1xx interim responses skipped). The blocking and the asyncio transport
only move bytes, so they cannot disagree on what a response is.
"""

from __future__ import annotations

import ipaddress
import re
import string
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, quote, urlsplit

from attrs import field, frozen

from pactmw.client.errors import ResponseInvalid, URLRefused
from pactmw.core.encoding import is_ascii_digits, json_loads
from pactmw.core.errors import MalformedInput, PactmwError
from pactmw.core.fetch import retry_after

#: Answers larger than this are cut off as a failure (cards, replies, tokens are small).
DEFAULT_MAX_BODY = 4 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
USER_AGENT = "pactmw-client"

Headers = tuple[tuple[str, str], ...]
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _first(headers: Headers, name: str) -> str | None:
    lowered = name.lower()
    return next((value for key, value in headers if key.lower() == lowered), None)


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether a parsed JSON value has a string (key or value) with no UTF-8 form."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_lone_surrogate(item) for item in value)
    return False


@frozen
class HttpRequest:
    """One HTTP request. `headers` and `body` stay out of `repr` (they carry tokens)."""

    method: str
    url: str
    headers: Headers = field(default=(), repr=False)
    body: bytes = field(default=b"", repr=False)

    def header(self, name: str) -> str | None:
        """The first value of a header (case-insensitive)."""
        return _first(self.headers, name)


@frozen
class HttpResponse:
    """One complete HTTP response; `url` is the URL that was requested."""

    status: int
    headers: Headers = ()
    body: bytes = field(default=b"", repr=False)
    url: str = ""

    def header(self, name: str) -> str | None:
        """The first value of a header (case-insensitive)."""
        return _first(self.headers, name)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def retry_after(self, *, now: float | None = None) -> float | None:
        """The `Retry-After` in seconds (delta-seconds or an HTTP-date), or None.

        An HTTP-date is measured against the response's own `Date` header when it has one, so
        the client's clock skew does not matter; otherwise against `now` (default: the wall
        clock).
        """
        return retry_after(self.header("retry-after"), date=self.header("date"), now=now)

    def json(self) -> Any:
        """The body as strict JSON (no duplicate keys, no NaN, no lone surrogate);
        `ResponseInvalid` otherwise."""
        try:
            value = json_loads(self.body)
        except MalformedInput as exc:
            raise ResponseInvalid(f"{self.url}: the answer is not JSON ({exc})") from exc
        # A `\ud800` escape not paired with a low one decodes to a string with no UTF-8
        # form, which fails wherever the client sends it back (a contextId, a device code).
        if _SURROGATE_ESCAPE.search(self.body) and _holds_lone_surrogate(value):
            raise ResponseInvalid(f"{self.url}: the answer holds a lone surrogate")
        return value

    def json_object(self) -> Mapping[str, Any]:
        value = self.json()
        if not isinstance(value, dict):
            raise ResponseInvalid(f"{self.url}: the answer is not a JSON object")
        return value


# -- which URLs the client talks to -------------------------------------------------------------


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or `localhost` (and its subdomains, RFC 6761 §6.3)."""
    lowered = host.lower().rstrip(".")
    if lowered == "localhost" or lowered.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(lowered).is_loopback
    except ValueError:
        return False


_USERINFO = re.compile(r"^([^:/?#]*:)?//[^/?#]*@")


def _shown(url: str) -> str:
    """`url` for an error message: any `user:password@` replaced, parsable or not."""
    return _USERINFO.sub(r"\1//***@", url)


def _resolvable(host: str) -> bool:
    try:
        host.encode("idna")
    except UnicodeError:
        return False
    return True


def check_url(url: str) -> SplitResult:
    """Refuse anything but https, or http to a loopback host; no credentials in the URL.

    Every request goes through this, so a card or a redirect can never make the client send a
    bearer token in clear text across a network.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        if parts.port == 0:  # raises ValueError for a bad port; 0 would read as none (80/443)
            raise ValueError("port 0")
    except ValueError as exc:
        raise URLRefused(f"not a valid URL: {_shown(url)!r}") from exc
    if parts.scheme not in ("https", "http") or not host:
        raise URLRefused(f"not an absolute http(s) URL: {_shown(url)!r}")
    if parts.username is not None or parts.password is not None:
        raise URLRefused("URLs with credentials are refused")
    try:
        # The bytes the request line will need: a lone surrogate (JSON's "\ud800") has none.
        url.encode("utf-8")
    except UnicodeError as exc:
        raise URLRefused(f"not a valid URL: {_shown(url)!r}") from exc
    # What the resolver and the Host header will take (an empty or 64+ character label
    # cannot be encoded; a NUL, another control or a space is in no host name): refused here
    # rather than as a UnicodeError or ValueError from the lookup.
    if not _resolvable(host) or any(c <= " " or c == "\x7f" for c in host):
        raise URLRefused(f"not a valid host name: {_shown(url)!r}")
    if parts.scheme == "http" and not is_loopback_host(host):
        raise URLRefused(f"plain http is allowed only to loopback hosts: {_shown(url)!r}")
    return parts


def is_absolute_http_url(value: Any) -> bool:
    """Tell whether `value` is an absolute http(s) URL with a host (a schema check, no policy)."""
    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


# -- the codec ----------------------------------------------------------------------------------

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _target(parts: SplitResult) -> str:
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    # A URL from a card or a redirect may hold spaces, controls or non-ASCII text: percent-
    # encode them as UTF-8 (RFC 3986 §2.5), leaving every printable ASCII character (and so
    # any existing %XX escape) as it is.
    return quote(target, safe=string.punctuation)


def _host_header(parts: SplitResult) -> str:
    # An IPv6 literal in brackets; a name as the resolver sees it (internationalized: xn--).
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host.encode("idna").decode("ascii")
    default = 443 if parts.scheme == "https" else 80
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def encode_request(request: HttpRequest) -> bytes:
    """The request's HTTP/1.1 bytes, one request per connection (`Connection: close`).

    Header names must be tokens and no value may hold CR, LF or NUL (no header injection).
    """
    parts = check_url(request.url)
    if not _TOKEN.fullmatch(request.method):
        raise ValueError(f"invalid HTTP method {request.method!r}")
    lines = [
        f"{request.method} {_target(parts)} HTTP/1.1",
        f"Host: {_host_header(parts)}",
        "Connection: close",
        "Accept-Encoding: identity",
    ]
    names = {name.lower() for name, _ in request.headers}
    if "user-agent" not in names:
        lines.append(f"User-Agent: {USER_AGENT}")
    if request.body or request.method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(request.body)}")
    for name, value in request.headers:
        if not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"invalid header {name!r}")
        if name.lower() in ("host", "connection", "content-length", "transfer-encoding"):
            raise ValueError(f"header {name!r} is set by the client itself")
        lines.append(f"{name}: {value}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + request.body


class ProtocolViolation(PactmwError):
    """The server's bytes are not a valid HTTP/1.1 response (or exceed the client's limits)."""


class ResponseTooLarge(ProtocolViolation):
    """The answer's head or body is larger than the client reads. It is what the server
    answers, not a passing failure: the same request would only fetch it again."""


class ResponseParser:
    """Feed it the bytes read from the connection; it says when the response is complete.

    Call `feed(b"")` at end of stream. Raises `ProtocolViolation` for malformed or oversized
    answers and for a stream that ends before the response is complete.
    """

    def __init__(self, *, method: str = "GET", max_body: int = DEFAULT_MAX_BODY) -> None:
        self._method = method
        self._max_body = max_body
        self._buffer = bytearray()
        self._state = "head"  # head -> body (length | chunked | eof) -> done
        self._mode = ""
        self._remaining = 0
        self._chunk_state = "size"  # size -> data -> crlf -> ... -> trailer
        self._body = bytearray()
        self.status = 0
        self.headers: Headers = ()

    @property
    def done(self) -> bool:
        return self._state == "done"

    @property
    def body(self) -> bytes:
        return bytes(self._body)

    def feed(self, data: bytes) -> None:
        if self.done:
            return
        if not data:
            self._end_of_stream()
            return
        self._buffer += data
        while not self.done and self._step():
            pass

    # -- states ----------------------------------------------------------------------------------

    def _step(self) -> bool:
        """Advance as far as the buffer allows; False when more bytes are needed."""
        if self._state == "head":
            return self._parse_head()
        if self._mode == "length":
            if self._take_remaining() == 0:
                self._state = "done"
            return False
        if self._mode == "chunked":
            return self._parse_chunk()
        # read to end of stream
        self._append(bytes(self._buffer))
        self._buffer.clear()
        return False

    def _parse_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEADER_BYTES:
                raise ResponseTooLarge("response headers too large")
            return False
        if end > MAX_HEADER_BYTES:
            raise ResponseTooLarge("response headers too large")
        head = bytes(self._buffer[:end]).decode("latin-1")
        del self._buffer[: end + 4]
        status_line, *header_lines = head.split("\r\n")
        match = re.fullmatch(r"HTTP/1\.[01] (\d{3})(?: .*)?", status_line)
        if match is None:
            raise ProtocolViolation(f"bad status line {status_line[:80]!r}")
        status = int(match.group(1))
        headers: list[tuple[str, str]] = []
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon or not _TOKEN.fullmatch(name):
                raise ProtocolViolation("malformed header line")
            headers.append((name, value.strip(" \t")))
        if 100 <= status < 200:
            return True  # an interim response (100 Continue, 103 Early Hints): skip it
        self.status = status
        self.headers = tuple(headers)
        self._choose_body_mode()
        return True

    def _choose_body_mode(self) -> None:
        self._state = "body"
        if self._method == "HEAD" or self.status in (204, 304):
            self._state = "done"
            return
        encoding = _first(self.headers, "transfer-encoding")
        if encoding is not None:
            if encoding.lower().replace(" ", "").split(",")[-1] != "chunked":
                raise ProtocolViolation(f"unsupported transfer-encoding {encoding!r}")
            self._mode = "chunked"
            return
        lengths = {value for key, value in self.headers if key.lower() == "content-length"}
        if lengths:
            if len(lengths) != 1 or not is_ascii_digits(next(iter(lengths))):
                raise ProtocolViolation("bad content-length")
            # Compared by digit count first: int() refuses more than 4300 digits (ValueError).
            digits = next(iter(lengths)).lstrip("0") or "0"
            if len(digits) > len(str(self._max_body)) or int(digits) > self._max_body:
                raise ResponseTooLarge("response body too large")
            self._remaining = int(digits)
            self._mode = "length"
            if self._remaining == 0:
                self._state = "done"
            return
        self._mode = "eof"

    def _parse_chunk(self) -> bool:
        if self._chunk_state == "size":
            end = self._buffer.find(b"\r\n")
            if end < 0:
                if len(self._buffer) > 1024:
                    raise ProtocolViolation("chunk size line too long")
                return False
            size_text = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
            del self._buffer[: end + 2]
            if not re.fullmatch(rb"[0-9A-Fa-f]{1,8}", size_text):
                raise ProtocolViolation("bad chunk size")
            self._remaining = int(size_text, 16)
            self._chunk_state = "data" if self._remaining else "trailer"
            return True
        if self._chunk_state == "data":
            if self._take_remaining():
                return False
            self._chunk_state = "crlf"
            return True
        if self._chunk_state == "crlf":
            if len(self._buffer) < 2:
                return False
            if self._buffer[:2] != b"\r\n":
                raise ProtocolViolation("chunk not followed by CRLF")
            del self._buffer[:2]
            self._chunk_state = "size"
            return True
        # trailer section: lines until an empty one
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEADER_BYTES:
                raise ResponseTooLarge("trailers too large")
            return False
        del self._buffer[: end + 2]
        if end == 0:
            self._state = "done"
            return False
        return True

    def _take_remaining(self) -> int:
        """Move what the buffer holds of the `_remaining` body bytes (a Content-Length body
        or a chunk) to the body; how many are still to come."""
        take = min(self._remaining, len(self._buffer))
        self._append(bytes(self._buffer[:take]))
        del self._buffer[:take]
        self._remaining -= take
        return self._remaining

    def _append(self, data: bytes) -> None:
        self._body += data
        if len(self._body) > self._max_body:
            raise ResponseTooLarge("response body too large")

    def _end_of_stream(self) -> None:
        if self._state == "body" and self._mode == "eof":
            self._state = "done"
            return
        if self._state == "head" and not self._buffer:
            raise ProtocolViolation("the connection closed before any response")
        raise ProtocolViolation("the connection closed in the middle of the response")

    def response(self, url: str) -> HttpResponse:
        if not self.done:
            raise ProtocolViolation("response incomplete")
        return HttpResponse(status=self.status, headers=self.headers, body=self.body, url=url)


__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_HEADER_BYTES",
    "USER_AGENT",
    "Headers",
    "HttpRequest",
    "HttpResponse",
    "ProtocolViolation",
    "ResponseParser",
    "ResponseTooLarge",
    "check_url",
    "encode_request",
    "is_absolute_http_url",
    "is_loopback_host",
]
