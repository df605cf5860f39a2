"""Parafé errors are data: a stable `code` and a human `message` (parafe-verifier.md §9).

The seven verifier codes (§9.1) go back to the calling agent in the reply's Parafé data; the
receipt codes (§9.4, @getparafe/verify's names) come from checking receipts another agent or
the broker signed. The message texts follow the reference package's, so a client that matches
on them keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pactmw.core.errors import PactmwError
from pactmw.protocols.parafe._constants import MAX_BROKER_TEXT

if TYPE_CHECKING:
    from pactmw.protocols.parafe._message import Consent

MISSING_PARAFE_EXTENSION = "MISSING_PARAFE_EXTENSION"
MALFORMED_PARAFE_DATA = "MALFORMED_PARAFE_DATA"
INVALID_CONSENT_TOKEN = "INVALID_CONSENT_TOKEN"  # noqa: S105 - an error code, not a secret
EXPIRED_CONSENT_TOKEN = "EXPIRED_CONSENT_TOKEN"  # noqa: S105
WRONG_AUDIENCE = "WRONG_AUDIENCE"
SCOPE_VIOLATION = "SCOPE_VIOLATION"
INVALID_PROOF = "INVALID_PROOF"

#: What a receiving agent's verifier reports (§9.1).
VERIFIER_CODES = frozenset(
    {
        MISSING_PARAFE_EXTENSION,
        MALFORMED_PARAFE_DATA,
        INVALID_CONSENT_TOKEN,
        EXPIRED_CONSENT_TOKEN,
        WRONG_AUDIENCE,
        SCOPE_VIOLATION,
        INVALID_PROOF,
    }
)

#: What checking an action receipt, index acknowledgment or session receipt reports (§9.4).
RECEIPT_CODES = frozenset(
    {
        "MALFORMED",
        "INVALID_SIGNATURE",
        "EXPIRED",
        "NOT_YET_VALID",
        "ISSUER_MISMATCH",
        "KEY_FETCH_FAILED",
        "KEY_NOT_FOUND",
        "ISSUER_REVOKED",
    }
)

#: Codes for which a new handshake could help: the spec's TASK_STATE_AUTH_REQUIRED (§9.1).
_NEW_HANDSHAKE_HELPS = frozenset({MISSING_PARAFE_EXTENSION, EXPIRED_CONSENT_TOKEN, SCOPE_VIOLATION})


class ParafeError(PactmwError):
    """A Parafé refusal: `code` (stable, log-safe) and `message` (safe to send back).

    `consent` is the consent the message carried, when it could be read (a refusal receipt
    binds to it, §7.2). `expired_at` (epoch seconds) is set for `EXPIRED_CONSENT_TOKEN` when
    the token names its expiry. `cause` (stable, log-safe, never sent) tells what lies under
    a code that covers several things: `KEY_FETCH_FAILED` when the broker's keys could not be
    fetched (its JWKS, or the initiator's DID document for a proof), `BROKER_UNREACHABLE` when
    the broker could not be asked online; None otherwise.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        expired_at: float | None = None,
        consent: Consent | None = None,
        cause: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.expired_at = expired_at
        self.consent = consent
        self.cause = cause

    def __repr__(self) -> str:
        return f"ParafeError({self.code!r}, {self.message!r})"

    def to_data(self) -> dict[str, str]:
        """The `error` member of the reply's Parafé data: `{"code", "message"}`."""
        return {"code": self.code, "message": self.message}

    @property
    def task_state(self) -> str:
        """The A2A task state the spec asks for: AUTH_REQUIRED when a new handshake helps."""
        if self.code in _NEW_HANDSHAKE_HELPS:
            return "TASK_STATE_AUTH_REQUIRED"
        return "TASK_STATE_REJECTED"


def iso_time(seconds: float) -> str:
    """Epoch seconds as JavaScript's `Date.toISOString()` writes them (millisecond precision)."""
    try:
        if not math.isfinite(seconds):
            raise ValueError
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def missing(detail: str = "No Parafe consent token found in the message.") -> ParafeError:
    return ParafeError(MISSING_PARAFE_EXTENSION, detail)


def malformed(member: str, detail: str) -> ParafeError:
    return ParafeError(
        MALFORMED_PARAFE_DATA,
        f'Malformed Parafe data "{member}": {detail}. The Parafe data is present but a '
        "required field is missing or invalid.",
    )


def invalid_token(detail: str | None = None) -> ParafeError:
    return ParafeError(INVALID_CONSENT_TOKEN, _invalid_text(detail))


def _invalid_text(detail: str | None) -> str:
    head = (
        f"Parafe consent token is invalid: {detail}"
        if detail
        else "Parafe consent token is invalid."
    )
    return (
        head + " Verify the token was issued by the Parafe broker and has not been tampered with."
    )


#: A receipt code (§9.4), and `ParafeError.cause` when the broker's JWKS could not be fetched.
KEY_FETCH_FAILED = "KEY_FETCH_FAILED"
#: `ParafeError.cause` when the broker could not be asked to verify online.
BROKER_UNREACHABLE = "BROKER_UNREACHABLE"


def broker_unavailable(detail: str, cause: str) -> ParafeError:
    """INVALID_CONSENT_TOKEN for a broker that could not be reached: the code stays the
    reference's, which reports a failed key fetch or online call as an invalid token, so a
    caller matching on codes sees no difference. The text does not: the reference appends its
    advice that the token may have been tampered with to every INVALID_CONSENT_TOKEN, which
    sends whoever reads it after the token during a broker outage. Here it says the token
    could not be checked and to try again, and `cause` tells the logs which outage it was."""
    return ParafeError(
        INVALID_CONSENT_TOKEN,
        f"Parafe consent token could not be verified: {detail}. This says nothing about the "
        "token itself: try again later.",
        cause=cause,
    )


def expired(exp: float | None) -> ParafeError:
    when = iso_time(exp) if exp is not None else "an unknown time"
    return ParafeError(
        EXPIRED_CONSENT_TOKEN,
        f"Parafe consent token expired at {when}. Request a new token from the Parafe broker.",
        expired_at=exp,
    )


def wrong_audience(expected: str, actual: Any) -> ParafeError:
    shown = actual if isinstance(actual, str) else "(none)"
    return ParafeError(
        WRONG_AUDIENCE,
        f'Parafe consent token was issued for agent "{shown}", not "{expected}". An agent must '
        "only accept tokens issued for itself.",
    )


def scope_violation(
    required: str | Iterable[Any],
    granted: Iterable[Any],
    detail: str | None = None,
) -> ParafeError:
    if detail is None:
        wanted = required if isinstance(required, str) else ", ".join(map(_js_str, required))
        detail = (
            f'Consent token does not include required scope "{wanted}". Granted scopes: '
            f"{', '.join(map(_js_str, granted))}."
        )
    return ParafeError(SCOPE_VIOLATION, detail)


def invalid_proof(detail: str, *, cause: str | None = None) -> ParafeError:
    return ParafeError(
        INVALID_PROOF,
        f"Parafe presentation proof rejected: {detail}",
        cause=cause,
    )


def receipt_error(code: str, detail: str) -> ParafeError:
    """A receipt, acknowledgment or session receipt that does not check out (§9.4 codes)."""
    return ParafeError(code, detail)


def _js_str(value: Any) -> str:
    """A value as JavaScript's `String()` would show it inside a list join (enough for text)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "[object Object]"
    return str(value)


def error_data(error: BaseException) -> dict[str, str]:
    """The `error` member for any exception: a `ParafeError` as itself, anything else as the
    reference reports it (`INVALID_CONSENT_TOKEN`, a fixed text that leaks nothing)."""
    if isinstance(error, ParafeError):
        return error.to_data()
    return {"code": INVALID_CONSENT_TOKEN, "message": "Parafe consent could not be verified."}


def broker_text(value: Any) -> str | None:
    """A text of the broker's cut to `MAX_BROKER_TEXT` characters before anyone sees it (a
    refusal's reason, an error's message); None when it is not a string."""
    return value[:MAX_BROKER_TEXT] if isinstance(value, str) else None


__all__ = [
    "BROKER_UNREACHABLE",
    "EXPIRED_CONSENT_TOKEN",
    "INVALID_CONSENT_TOKEN",
    "INVALID_PROOF",
    "KEY_FETCH_FAILED",
    "MALFORMED_PARAFE_DATA",
    "MISSING_PARAFE_EXTENSION",
    "RECEIPT_CODES",
    "SCOPE_VIOLATION",
    "VERIFIER_CODES",
    "WRONG_AUDIENCE",
    "ParafeError",
    "broker_text",
    "broker_unavailable",
    "error_data",
    "expired",
    "invalid_proof",
    "invalid_token",
    "iso_time",
    "malformed",
    "missing",
    "receipt_error",
    "scope_violation",
    "wrong_audience",
]
