"""The personal agent's errors: every failure of a client call is one of these (errors are data).

```
ClientError
├── NetworkError            no complete HTTP response (`maybe_delivered` tells whether the
│                           Provider may have received the request)
├── URLRefused              a URL the client will not talk to (not https, not loopback http)
├── TooManyRedirects        a card URL redirected more than 5 times
├── ResponseInvalid         a 2xx answer that does not follow the protocol
│   └── CardInvalid         an Agent Card that fails validation
├── HTTPError               any other non-2xx answer: `status`, `body`, `headers`, `url`
│   ├── A2AErrorResponse    an A2A error envelope: `reason`, `rpc_status`, `message`,
│   │                       `details`
│   │   ├── InvalidParams, ContentTypeNotSupported, UnsupportedOperation,
│   │   ├── PushNotificationNotSupported, TaskNotFound, InternalError, VersionNotSupported
│   ├── IdentityRejected    401 `Bearer realm="a2a"`: the personal-agent JWT was refused
│   ├── DelegationTokenRejected
│   │                       401 `error="invalid_token"`: the delegation token was refused
│   ├── RateLimited         429 whose `Retry-After` was longer than the client may wait
│   ├── OAuthErrorResponse  an RFC 6749 error body (`error`, `description`), status != 401
│   └── BrokerRefused       a Parafé broker's refusal (`code`, `message`, `claim_link`,
│                           `hint`), defined in `pactmw.client.parafe`
├── ScopesNotOffered        scopes the card does not offer (also a `ValueError`)
├── DeviceFlowTimeout       the device code expired (or the wait timed out) before approval
└── ReceiptInvalid          a receipt that does not verify: `reason`
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pactmw.core.encoding import loggable
from pactmw.core.errors import PactmwError

#: The most characters of a client error's text (`str(exc)`); longer text is cut with a
#: `...(N chars)` marker.
ERROR_TEXT_LIMIT = 1000


class ClientError(PactmwError):
    """Base of every error the personal agent's client raises.

    Its text (`str(exc)`) quotes the server (a refusal's message, a redirect's target, a
    receipt's claim), so it is made `loggable` here, for every subclass: controls escaped and
    cut to `ERROR_TEXT_LIMIT` characters, so that a hostile Provider can neither drive the
    terminal nor flood the log of whoever prints it. The attributes (`message`, `body`...)
    keep what the server sent.
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(loggable(message, ERROR_TEXT_LIMIT))


class NetworkError(ClientError):
    """No complete HTTP response arrived (refused, reset, timed out, cut short).

    `maybe_delivered` is False only when the request certainly never reached the server (the
    connection or TLS handshake failed), so resending is safe even for non-idempotent calls.
    `retryable` is False for failures a resend cannot fix (an untrusted TLS certificate).
    """

    def __init__(self, message: str, *, maybe_delivered: bool, retryable: bool = True) -> None:
        super().__init__(message)
        self.maybe_delivered = maybe_delivered
        self.retryable = retryable


class URLRefused(ClientError, ValueError):
    """A URL the client refuses: not absolute http(s), credentials in it, or plain http to a
    host that is not loopback (bearer tokens never travel in clear text)."""


class TooManyRedirects(ClientError):
    """A card URL redirected more often than the client follows (5)."""


class ResponseInvalid(ClientError):
    """A successful answer whose body does not follow the protocol."""


class CardInvalid(ResponseInvalid):
    """An Agent Card that fails validation (missing or mistyped required fields)."""


def _status_text(status: int, headers: Sequence[tuple[str, str]]) -> str:
    """`HTTP 404`, and for a 503 (a Provider whose store is down answers it, `Retry-After: 1`)
    that the server cannot answer now, and when to ask again: an operator reading "HTTP 503"
    alone cannot tell an outage from a broken server. Only a number of seconds is repeated,
    so what is said stays the client's own words."""
    if status != 503:
        return f"HTTP {status}"
    retry = next((value for name, value in headers if name.lower() == "retry-after"), "")
    retry = retry.strip()
    when = f"; retry after {retry} s" if retry.isdigit() and len(retry) <= 6 else ""
    return f"HTTP 503: the server cannot answer now{when}"


class HTTPError(ClientError):
    """A non-2xx answer. `body` is the raw body, `headers` the (name, value) pairs, `url` the
    URL that answered (after redirects; empty when not known)."""

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        headers: Sequence[tuple[str, str]] = (),
        message: str = "",
        *,
        url: str = "",
    ) -> None:
        text = message or _status_text(status, headers)
        # The URL may come from a server (a redirect's target): cut on its own, so that a
        # long one cannot push what happened out of the bounded text.
        super().__init__(f"{loggable(url)}: {text}" if url else text)
        self.status = status
        self.body = body
        self.headers = tuple(headers)
        self.url = url

    def header(self, name: str) -> str | None:
        """The first value of a response header (case-insensitive)."""
        lowered = name.lower()
        return next((value for key, value in self.headers if key.lower() == lowered), None)


class A2AErrorResponse(HTTPError):
    """An A2A error envelope (PACT §6): the reason comes from `details[0].reason`, never from
    the status alone. `rpc_status` is the envelope's `status` string (`INVALID_ARGUMENT`...)."""

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: Sequence[tuple[str, str]],
        *,
        reason: str,
        rpc_status: str,
        message: str,
        details: Sequence[Mapping[str, Any]] = (),
        url: str = "",
    ) -> None:
        super().__init__(status, body, headers, f"{reason} ({status}): {message}", url=url)
        self.reason = reason
        self.rpc_status = rpc_status
        self.message = message
        self.details = tuple(details)


class InvalidParams(A2AErrorResponse):
    """`INVALID_PARAMS`: bad body, unknown `contextId`, reused `messageId`..."""


class ContentTypeNotSupported(A2AErrorResponse):
    """`CONTENT_TYPE_NOT_SUPPORTED`: a part the agent does not accept (not text)."""


class UnsupportedOperation(A2AErrorResponse):
    """`UNSUPPORTED_OPERATION`: not offered, or a closed conversation (start a new one)."""


class PushNotificationNotSupported(A2AErrorResponse):
    """`PUSH_NOTIFICATION_NOT_SUPPORTED`."""


class TaskNotFound(A2AErrorResponse):
    """`TASK_NOT_FOUND`."""


class InternalError(A2AErrorResponse):
    """`INTERNAL`: the Provider failed; the message stays unanswered, so resending it is safe."""


class VersionNotSupported(A2AErrorResponse):
    """`VERSION_NOT_SUPPORTED`."""


#: The A2A reasons that have their own class; any other reason raises a plain `A2AErrorResponse`.
A2A_ERROR_CLASSES: Mapping[str, type[A2AErrorResponse]] = {
    "INVALID_PARAMS": InvalidParams,
    "CONTENT_TYPE_NOT_SUPPORTED": ContentTypeNotSupported,
    "UNSUPPORTED_OPERATION": UnsupportedOperation,
    "PUSH_NOTIFICATION_NOT_SUPPORTED": PushNotificationNotSupported,
    "TASK_NOT_FOUND": TaskNotFound,
    "INTERNAL": InternalError,
    "VERSION_NOT_SUPPORTED": VersionNotSupported,
}


class IdentityRejected(HTTPError):
    """401 `Bearer realm="a2a"`: the Provider refused the personal-agent JWT (PACT §3.4).

    Check the issuer registration, the audience, the key published at the JWKS URI and the
    clock; resending the same request will not help.
    """


class DelegationTokenRejected(HTTPError):
    """401 with `error="invalid_token"`: the delegation token was refused (PACT §5.5).

    Refresh it, or run the device flow again if the grant was revoked.
    """


class RateLimited(HTTPError):
    """429 that the client did not wait out: `retry_after` seconds (None when not given)."""

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: Sequence[tuple[str, str]],
        *,
        retry_after: float | None,
        url: str = "",
    ) -> None:
        text = f"HTTP {status}: retry after {retry_after} s"
        super().__init__(status, body, headers, text, url=url)
        self.retry_after = retry_after


class OAuthErrorResponse(HTTPError):
    """An OAuth error answer (RFC 6749 §5.2, RFC 8628 §3.5): `error` and `description`."""

    def __init__(
        self,
        status: int,
        error: str,
        description: str | None = None,
        *,
        body: bytes = b"",
        headers: Sequence[tuple[str, str]] = (),
        url: str = "",
    ) -> None:
        text = f"{error}: {description}" if description else error
        super().__init__(status, body, headers, f"OAuth {text} (HTTP {status})", url=url)
        self.error = error
        self.description = description


class ScopesNotOffered(ClientError, ValueError):
    """Scopes asked for that the card's delegation scheme does not list (PACT §5.2: request
    only ids on the card). `scopes` are those ids.

    A `ClientError` because they often come from the Brand (a step-up's `missing_scopes`, on a
    card fetched before the Brand added the scope), and a `ValueError` as before.
    """

    def __init__(self, scopes: Sequence[str]) -> None:
        super().__init__(
            f"scopes not on the card: {', '.join(scopes)} (a card fetched before the Brand"
            " added them? fetch it again)"
        )
        self.scopes = tuple(scopes)


class DeviceFlowTimeout(ClientError):
    """The device code expired, or the caller's timeout passed, before the user decided."""


class ReceiptInvalid(ClientError):
    """A receipt that does not verify. `reason` is a stable code:

    `malformed`, `alg_not_allowed`, `bad_typ`, `unknown_key`, `bad_signature`,
    `claims_mismatch` (the returned claims are not the signed ones), `bad_claims`,
    `wrong_pa`, `wrong_brand`.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


__all__ = [
    "A2A_ERROR_CLASSES",
    "ERROR_TEXT_LIMIT",
    "A2AErrorResponse",
    "CardInvalid",
    "ClientError",
    "ContentTypeNotSupported",
    "DelegationTokenRejected",
    "DeviceFlowTimeout",
    "HTTPError",
    "IdentityRejected",
    "InternalError",
    "InvalidParams",
    "NetworkError",
    "OAuthErrorResponse",
    "PushNotificationNotSupported",
    "RateLimited",
    "ReceiptInvalid",
    "ResponseInvalid",
    "ScopesNotOffered",
    "TaskNotFound",
    "TooManyRedirects",
    "URLRefused",
    "UnsupportedOperation",
    "VersionNotSupported",
]
