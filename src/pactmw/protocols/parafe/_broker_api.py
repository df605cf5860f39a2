"""An agent's own calls to its broker: request proofs, error answers, when to try again, and
receipt filing with its acknowledgment. Pure; shared by the Provider (the receiving agent) and
`pactmw.client.parafe` (the personal agent).

Wire formats are @getparafe/sdk's (src/index.ts, http.ts, crypto.ts) and parafe-verifier.md
§7.4: every call as the agent carries `Authorization: Bearer <credential>` and a `Parafe-PoP`
header, a JWS (typ `parafe-pop+jwt`, no `kid`) signed with the agent's registered key over
`htm`, `htu` (the URL without its query), what the call authorizes (`session_id`, `agent_id`,
...), a random single-use `jti` and `iat`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from attrs import field, frozen

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK
from pactmw.protocols.parafe._constants import POP_TYP, RECEIPT_KINDS
from pactmw.protocols.parafe._errors import ParafeError, broker_text, receipt_error
from pactmw.protocols.parafe._jwt import random_jti, require_agent_key, without_kid
from pactmw.protocols.parafe._receipts import MALFORMED, IndexAck, receipt_hash

#: The `kind` the broker gives a receipt filed without one.
DEFAULT_RECEIPT_KIND = RECEIPT_KINDS[0]


def request_pop(
    key: PrivateJWK,
    method: str,
    url: str,
    *,
    now: float,
    jti: str | None = None,
    **bound: Any,
) -> str:
    """A request proof of possession (`Parafe-PoP`) for one broker call, as the SDK's
    `signProof`: `htm`, `htu` (scheme, host and path of `url`: no query), the call's `bound`
    claims, a fresh `jti` and `iat`, signed with the agent's key and no `kid`. A proof is
    single use: sign a new one for every attempt."""
    require_agent_key(key)
    parts = urlsplit(url)
    claims: dict[str, Any] = {
        "htm": method.upper(),
        "htu": f"{parts.scheme}://{parts.netloc}{parts.path}",
        **bound,
        "jti": jti if jti is not None else random_jti(),
        "iat": int(now),
    }
    return sign_compact(claims, without_kid(key), typ=POP_TYP)


def error_code(answer: Any) -> str | None:
    """The `error` code of a broker's JSON answer, if it names one."""
    code = answer.get("error") if isinstance(answer, Mapping) else None
    return code if isinstance(code, str) else None


def broker_error(answer: Any) -> tuple[str, str]:
    """A broker error answer as (code, message), the SDK's `mapBrokerError`: the code is
    `error` (`unknown_error` when absent), the message `message`, `reason` or `error`, each
    cut to 500 characters."""
    body = answer if isinstance(answer, Mapping) else {}

    def text(name: str) -> str | None:
        return broker_text(body.get(name)) or None

    code = text("error") or "unknown_error"
    return code, text("message") or text("reason") or text("error") or "Unknown error"


# -- trying again ------------------------------------------------------------------------------


@frozen
class BrokerRetry:
    """When a failed broker call is tried again, and after how long.

    At most `retries` more attempts, waiting `backoff` seconds, then twice as long each time
    (at most `max_backoff`), or what a `Retry-After` asks when it is at most
    `max_retry_after` (a longer one is not waited out). What is retried, as @getparafe/sdk's
    `request` does (http.ts), never a 4xx but 429:

    - no answer at all (a network failure): when the request cannot have run twice, i.e. it
      never left (`delivered=False`), or the call is `idempotent`;
    - 429, 502 and 503: the broker (or its edge) refused it before it ran;
    - 500, 504 and other 5xx: only an `idempotent` call (it may have run). The SDK gives up
      on a 500; an idempotent call loses nothing by asking again, so it is asked again here.

    Idempotent calls: filing a receipt (a second filing answers the original
    acknowledgment), reading the claim status, and completing a handshake (the broker
    completes a handshake once; a repeat of one that went through is refused, never a second
    session, which is why the SDK retries it too). Registering is never retried (the SDK's
    choice: the agent may exist already); a claim link or a renewal only when it cannot have
    run.
    """

    retries: int = 3
    backoff: float = 0.2
    max_backoff: float = 2.0
    max_retry_after: float = 5.0

    def __attrs_post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError("retries must be a whole number, 0 or more")
        if not (self.backoff >= 0 and self.max_backoff >= 0 and self.max_retry_after >= 0):
            raise ValueError("backoff, max_backoff and max_retry_after must not be negative")

    def delay(self, attempt: int) -> float:
        """The backoff before retry number `attempt` (1-based)."""
        return float(min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))

    def wait(
        self,
        attempt: int,
        *,
        status: int | None,
        idempotent: bool,
        delivered: bool = True,
        retry_after: float | None = None,
    ) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based) after a failed attempt,
        or None: do not try again. `status` is the answer's (None: no answer, and
        `delivered` says whether the request may have reached the broker); `retry_after`
        the answer's `Retry-After` in seconds."""
        if attempt > self.retries:
            return None
        if status is None:
            return self.delay(attempt) if idempotent or not delivered else None
        if status in (429, 502, 503) or (status >= 500 and idempotent):
            if retry_after is None:
                return self.delay(attempt)
            return retry_after if retry_after <= self.max_retry_after else None
        return None


# -- filing receipts ---------------------------------------------------------------------------


def filing_path(session_id: str) -> str:
    """`/sessions/{session_id}/action-receipts` (the session id URL-encoded)."""
    return f"/sessions/{quote(session_id, safe='')}/action-receipts"


def filing_body(receipt: str, kind: str | None = None) -> dict[str, str]:
    """The JSON body of a filing: `{receipt, kind?}`; `kind` only when given (the broker's
    default is `parafe.action_receipt`). Raises `ValueError` for an unknown kind."""
    if kind is not None and kind not in RECEIPT_KINDS:
        raise ValueError(f"kind must be one of {', '.join(RECEIPT_KINDS)}")
    return {"receipt": receipt} if kind is None else {"receipt": receipt, "kind": kind}


def filing_result(status: int, answer: Any) -> tuple[bool, str | None] | None:
    """What a filing's answer means, as the SDK's `fileActionReceipt`: (duplicate, the
    acknowledgment JWS or None when the answer carries none) for a 2xx or a 409
    `duplicate_receipt`; None for anything else (a refusal, or a failure to retry)."""
    ack = answer.get("acknowledgment") if isinstance(answer, Mapping) else None
    acknowledgment = ack if isinstance(ack, str) else None
    if 200 <= status < 300:
        return False, acknowledgment
    if status == 409 and error_code(answer) == "duplicate_receipt":
        return True, acknowledgment
    return None


@frozen
class FiledReceipt:
    """A receipt the broker indexed: its verified acknowledgment (`ack`, and the broker's JWS
    as received, `acknowledgment`), and whether it had been filed before (`duplicate`)."""

    session_id: str
    receipt: str = field(repr=False)
    kind: str
    acknowledgment: str = field(repr=False)
    ack: IndexAck
    duplicate: bool = False


def acknowledged(
    ack: IndexAck,
    acknowledgment: str,
    *,
    receipt: str,
    session_id: str,
    kind: str | None = None,
    duplicate: bool = False,
) -> FiledReceipt:
    """The `FiledReceipt` of a filing whose acknowledgment `ack` (the JWS `acknowledgment`,
    already verified as the broker's) is for this receipt, session and kind (the broker's
    default kind when `kind` is None); `ParafeError(MALFORMED)` when it is not."""
    expected_kind = kind or DEFAULT_RECEIPT_KIND
    if ack.receipt_hash != receipt_hash(receipt):
        raise _not_ours("another receipt")
    if ack.session_id != session_id:
        raise _not_ours("another session")
    if ack.kind != expected_kind:
        raise _not_ours("another kind of receipt")
    return FiledReceipt(
        session_id=session_id,
        receipt=receipt,
        kind=expected_kind,
        acknowledgment=acknowledgment,
        ack=ack,
        duplicate=duplicate,
    )


def _not_ours(what: str) -> ParafeError:
    return receipt_error(MALFORMED, f"The acknowledgment is for {what}")


__all__ = [
    "DEFAULT_RECEIPT_KIND",
    "BrokerRetry",
    "FiledReceipt",
    "acknowledged",
    "broker_error",
    "error_code",
    "filing_body",
    "filing_path",
    "filing_result",
    "request_pop",
]
