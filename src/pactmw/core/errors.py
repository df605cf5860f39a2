"""One exception hierarchy. Errors are data: adapters render them, nothing else builds bodies."""

from __future__ import annotations


class PactmwError(Exception):
    """Base of every error pactmw raises on purpose."""


class MissingExtra(PactmwError, ImportError):
    """An optional dependency is not installed. The message names the extra that brings it
    (`pip install "pactmw[django]"`); `extra` is that extra's name. An `ImportError`, so code
    that tolerates a missing module with `except ImportError` keeps working."""

    def __init__(self, what: str, needs: str, extra: str) -> None:
        are = "are" if " and " in needs else "is"  # "uvicorn and starlette, which are"
        super().__init__(
            f'{what} needs {needs}, which {are} not installed: pip install "pactmw[{extra}]"'
        )
        self.extra = extra


class MalformedInput(PactmwError, ValueError):
    """Input that does not parse: bad base64url, bad JSON, a bad JWS or JWK shape."""


class JoseError(PactmwError):
    """A JWS or JWK failed a check. `code` is a stable, log-safe reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class KeyUnavailable(PactmwError):
    """No key could be found or fetched for a token. `code` is a stable, log-safe reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class FetchError(PactmwError):
    """An outbound fetch (JWKS, discovery) was refused or failed.

    `status` is the HTTP status the server answered with, or None when there was no answer
    (refused address, connection failure, timeout): a cache tells "the server said so" from
    "the server could not be asked" by it.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AuthenticationFailed(PactmwError):
    """A request's credentials were refused: HTTP 401 with a `WWW-Authenticate` challenge.

    `reason` is a stable code for logs and metrics (never the token). `www_authenticate` is the
    exact challenge header value the protocol prescribes; the body is always empty.
    """

    www_authenticate = 'Bearer realm="a2a"'
    #: Which credential was refused, for the log line (`log_refusal`): the personal agent's
    #: PACT JWT here, its delegation token in `DelegationRejected`.
    credential = "identity_jwt"

    def __init__(self, reason: str, detail: str = "", *, issuer: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        #: The issuer the refused token named, when it named one (unverified: for logs only).
        self.issuer = issuer


class InsufficientScope(PactmwError):
    """A delegation lacks scopes an endpoint needs: HTTP 403 `insufficient_scope` (RFC 6750
    §3.1). `missing` lists them in the order the endpoint asked for them."""

    def __init__(self, missing: tuple[str, ...]) -> None:
        super().__init__("insufficient_scope: " + " ".join(missing))
        self.reason = "insufficient_scope"
        self.missing = missing


class A2AError(PactmwError):
    """An A2A error (PACT §6): a reason from the A2A table and a human message.

    Rendered as the AIP-193 envelope with exactly one `google.rpc.ErrorInfo` detail; the HTTP
    status and `status` string follow from the reason.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class RequestRefused(PactmwError):
    """A request answered with a bare HTTP status and no A2A body (404, 405, 413, 429, 503)."""

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers


__all__ = [
    "A2AError",
    "AuthenticationFailed",
    "FetchError",
    "InsufficientScope",
    "JoseError",
    "KeyUnavailable",
    "MalformedInput",
    "MissingExtra",
    "PactmwError",
    "RequestRefused",
]
