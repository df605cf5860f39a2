"""Turn a non-2xx `HttpResponse` into the client's typed exception (pure).

The order follows what a Provider sends (pact-provider.md §2.3, §3.4, §5.6, §6.3):
an A2A error envelope is an `A2AErrorResponse` subclass chosen by `details[0].reason`; a 401 without
one is `DelegationTokenRejected` when its challenge says `error="invalid_token"`, otherwise
`IdentityRejected` when it is the `Bearer realm="a2a"` challenge; anything else is `HTTPError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pactmw.client.errors import (
    A2A_ERROR_CLASSES,
    A2AErrorResponse,
    DelegationTokenRejected,
    HTTPError,
    IdentityRejected,
)
from pactmw.client.http import HttpResponse
from pactmw.core.encoding import json_loads
from pactmw.core.errors import MalformedInput
from pactmw.protocols.a2a import A2A_ERROR_DOMAIN, ERROR_INFO_TYPE

_PARAM = re.compile(r'\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')


def parse_challenge(value: str | None) -> tuple[str, dict[str, str]] | None:
    """Split one `WWW-Authenticate` challenge into its scheme (lower case) and auth-params.

    `Bearer realm="a2a", error="invalid_token"` -> `("bearer", {"realm": "a2a", "error":
    "invalid_token"})`. Parameter names are lower-cased; quoted values are unescaped.
    """
    if not value:
        return None
    scheme, _, rest = value.strip().partition(" ")
    params: dict[str, str] = {}
    position = 0
    rest = rest.strip()
    while position < len(rest):
        match = _PARAM.match(rest, position)
        if match is None or match.end() == position:
            break
        name, raw = match.group(1).lower(), match.group(2)
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        params.setdefault(name, raw)
        position = match.end()
    return scheme.lower(), params


def a2a_envelope(body: bytes) -> Mapping[str, Any] | None:
    """The `error` object of an A2A / AIP-193 envelope, when the body is one.

    Requires `code` (int), `status` and `message` (strings) and exactly one `details` entry of
    type `google.rpc.ErrorInfo` with a string `reason`, as the reference schema does.
    """
    if not body:
        return None
    try:
        document = json_loads(body)
    except MalformedInput:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("error"), dict):
        return None
    error: dict[str, Any] = document["error"]
    code, details = error.get("code"), error.get("details")
    if (
        not isinstance(code, int)
        or isinstance(code, bool)
        or not isinstance(error.get("status"), str)
        or not isinstance(error.get("message"), str)
        or not isinstance(details, list)
        or len(details) != 1
        or not isinstance(details[0], dict)
        or details[0].get("@type") != ERROR_INFO_TYPE
        or not isinstance(details[0].get("reason"), str)
    ):
        return None
    return error


def error_for(response: HttpResponse) -> HTTPError:
    """The exception a non-2xx response stands for (not raised)."""
    envelope = a2a_envelope(response.body)
    if envelope is not None:
        reason = str(envelope["details"][0]["reason"])
        cls = A2A_ERROR_CLASSES.get(reason, A2AErrorResponse)
        return cls(
            response.status,
            response.body,
            response.headers,
            reason=reason,
            rpc_status=str(envelope["status"]),
            message=str(envelope["message"]),
            details=tuple(envelope["details"]),
            url=response.url,
        )
    if response.status == 401:
        challenge = parse_challenge(response.header("www-authenticate"))
        params = challenge[1] if challenge is not None and challenge[0] == "bearer" else {}
        if params.get("error") == "invalid_token":
            return _answered(DelegationTokenRejected, response, "the delegation token was refused")
        if params.get("realm") == "a2a":
            return _answered(IdentityRejected, response, _IDENTITY_REFUSED)
    return _answered(HTTPError, response)


#: A refused identity JWT gets a bare 401 (PACT §3.4 says no more), so the text names what
#: the agent can check on its side; the Provider's log has the reason.
_IDENTITY_REFUSED = (
    "the personal-agent JWT was refused (is its issuer registered, its key published at the "
    "registered jwks_uri, its audience the one the Provider assigned, and the clock right?)"
)


def _answered(cls: type[HTTPError], response: HttpResponse, message: str = "") -> HTTPError:
    """`cls` for `response`: its status, body, headers and URL, and `message`."""
    return cls(response.status, response.body, response.headers, message, url=response.url)


def raise_for_status(response: HttpResponse) -> HttpResponse:
    """Return a 2xx response; raise the typed exception for anything else."""
    if not response.ok:
        raise error_for(response)
    return response


__all__ = [
    "A2A_ERROR_DOMAIN",
    "ERROR_INFO_TYPE",
    "a2a_envelope",
    "error_for",
    "parse_challenge",
    "raise_for_status",
]
