"""Poppy's error answers: a JSON `{"error": code, ...}` body, never cached, and for token
errors at 401/403 the same code in a `WWW-Authenticate: DPoP` challenge (§4.3, §6, §9).

OAuth endpoints answer RFC 6749 §5.2 style (`400 invalid_grant`, `401 invalid_client`,
`400 invalid_dpop_proof` at the token endpoint); APIs and conversations answer token and
proof failures with 401 and the challenge. A refusal never echoes the token, assertion or
proof it refused (GUIDE-secrets-01): `PoppyError` carries codes and fixed words only.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pactmw.core.dpop import USE_DPOP_NONCE, DpopError
from pactmw.core.encoding import json_dumps
from pactmw.core.errors import PactmwError
from pactmw.core.http import Response

#: The codes a `WWW-Authenticate: DPoP` challenge repeats when the status is 401 or 403.
CHALLENGED = frozenset(
    {
        "invalid_token",
        "sign_in_required",
        "insufficient_scope",
        "invalid_dpop_proof",
        "use_dpop_nonce",
        "extension_required",
    }
)
#: Members of the body that also become challenge parameters, in this order.
_CHALLENGE_PARAMETERS = ("scope", "extension")
NO_STORE = ("Cache-Control", "no-store")


class PoppyError(PactmwError):
    """A Poppy refusal: HTTP `status`, the protocol's `error` code, extra body `members`
    (`scope`, `extension`, `operation`, `conversation_id`, ...) and extra `headers`
    (`Retry-After`, `DPoP-Nonce`). `detail` is for logs, never sent."""

    def __init__(
        self,
        status: int,
        error: str,
        detail: str = "",
        *,
        members: Mapping[str, object] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(f"{error}: {detail}" if detail else error)
        self.status = status
        self.error = error
        self.detail = detail
        self.members: Mapping[str, object] = MappingProxyType(dict(members or {}))
        self.headers = headers


def _quoted(value: str) -> str:
    # RFC 9110 §5.6.4 quoted-string: escape the two characters that end or escape it.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(error: PoppyError) -> str | None:
    """The `WWW-Authenticate` value for `error`, or None when it takes no challenge."""
    if error.error not in CHALLENGED or error.status not in (401, 403):
        return None
    parts = [f"DPoP error={_quoted(error.error)}"]
    for name in _CHALLENGE_PARAMETERS:
        value = error.members.get(name)
        if isinstance(value, str):
            parts.append(f"{name}={_quoted(value)}")
    return ", ".join(parts)


def poppy_response(error: PoppyError) -> Response:
    """The complete HTTP answer to `error` (the one place Poppy error bodies are built)."""
    body = json_dumps({"error": error.error, **error.members})
    headers: list[tuple[str, str]] = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        NO_STORE,
    ]
    www_authenticate = challenge(error)
    if www_authenticate is not None:
        headers.append(("WWW-Authenticate", www_authenticate))
    headers.extend(error.headers)
    return Response(status=error.status, headers=tuple(headers), body=body)


def invalid_request(detail: str) -> PoppyError:
    """`400 invalid_request`: a request that does not parse or lacks what it needs."""
    return PoppyError(400, "invalid_request", detail)


def dpop_refusal(error: DpopError, *, token_endpoint: bool, nonce: str | None = None) -> PoppyError:
    """A refused DPoP proof as Poppy answers it (§4.3): at the token endpoint an OAuth error,
    `400` and no challenge; at an API or a conversation `401` with the `DPoP` challenge.
    `use_dpop_nonce` carries a fresh `nonce` in `DPoP-Nonce` either way (RFC 9449 §8)."""
    headers = (("DPoP-Nonce", nonce),) if error.error == USE_DPOP_NONCE and nonce else ()
    return PoppyError(400 if token_endpoint else 401, error.error, error.reason, headers=headers)


__all__ = [
    "CHALLENGED",
    "NO_STORE",
    "PoppyError",
    "challenge",
    "dpop_refusal",
    "invalid_request",
    "poppy_response",
]
