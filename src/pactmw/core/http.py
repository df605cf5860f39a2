"""The framework-neutral HTTP model every adapter translates to and from."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import field, frozen

from pactmw.core.errors import AuthenticationFailed

#: Where a Provider's routes live below the site root: `/a2a/{brand}/...` (PACT §2.2). The
#: one definition: routing, the adapters' default guarded prefix and interface URLs use it.
PROVIDER_MOUNT = "/a2a/"

#: The header that carries a PACT delegation token, as clients send it (`Request` looks
#: headers up case-insensitively).
DELEGATION_HEADER = "X-A2A-User-Delegation"
_DELEGATION_KEY = DELEGATION_HEADER.lower()


def _lower_case_names(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Header pairs with their names lower-cased: names are case-insensitive (RFC 9110
    §5.1), and a custom server's own pairs keep them as sent ("Authorization"); looked up
    as they were, they were missing, and every caller refused as `missing_token`."""
    return tuple((name.lower(), value) for name, value in headers)


@frozen
class Request:
    """What the Provider needs of a request; the body is read separately, only when needed.

    `path` is the decoded path below the site root; `headers` are (name, value) pairs in
    arrival order, given in any case and kept with lower-case names.
    """

    method: str
    path: str
    query: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), converter=_lower_case_names)
    client: str | None = None

    def header(self, name: str) -> str | None:
        """The single value of a header, any case (None when missing or repeated)."""
        name = name.lower()
        found = None
        for key, value in self.headers:  # every request asks for its `Authorization`
            if key == name:
                if found is not None:
                    return None  # repeated: as `single_header`, treated as missing
                found = value
        return found

    def has_header(self, name: str) -> bool:
        """Whether the header appears at all (once or more), any case."""
        name = name.lower()
        return any(key == name for key, _ in self.headers)

    def delegation_token(self) -> str | None:
        """The `X-A2A-User-Delegation` value: None when absent, `""` when repeated.

        A repeated delegation header is ambiguous, so it is treated as a malformed token (a
        401 `invalid_token`), never as "no delegation" and never by picking one.
        """
        values = [value for key, value in self.headers if key == _DELEGATION_KEY]
        if not values:
            return None
        return values[0] if len(values) == 1 else ""


@frozen
class Response:
    """A complete HTTP response: status, header pairs (in order) and body bytes."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = field(default=b"", repr=False)


def challenge(exc: AuthenticationFailed) -> Response:
    """The 401 answer to a refused credential: the protocol's challenge and an empty body.

    No A2A body and no A2A content type (PACT §3.4; the conformance suite checks both).
    """
    return Response(
        status=401,
        headers=(
            ("WWW-Authenticate", exc.www_authenticate),
            ("Content-Length", "0"),
            ("Cache-Control", "no-store"),
        ),
    )


def single_header(values: Iterable[str]) -> str | None:
    """The one value of a header that must not repeat; a repeated one is treated as missing.

    Two `Authorization` headers are ambiguous (different servers and proxies pick different
    ones), so pactmw refuses to guess.
    """
    found = list(values)
    return found[0] if len(found) == 1 else None


def asgi_header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The single value of header `name` (lowercase bytes) in an ASGI header list."""
    found = None
    for key, value in headers:  # one loop, as `Request.header`: every body read asks
        if key.lower() == name:
            if found is not None:
                return None  # repeated: as `single_header`, treated as missing
            found = value
    return None if found is None else found.decode("latin-1")


def insufficient_scope(scopes: Iterable[str]) -> Response:
    """403 for a delegation that lacks scopes an endpoint needs (RFC 6750 §3.1)."""
    wanted = " ".join(scopes)
    return Response(
        status=403,
        headers=(
            (
                "WWW-Authenticate",
                f'Bearer realm="a2a", error="insufficient_scope", scope="{wanted}"',
            ),
            ("Content-Length", "0"),
            ("Cache-Control", "no-store"),
        ),
    )


__all__ = [
    "DELEGATION_HEADER",
    "PROVIDER_MOUNT",
    "Request",
    "Response",
    "asgi_header",
    "challenge",
    "insufficient_scope",
    "single_header",
]
