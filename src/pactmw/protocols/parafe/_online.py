"""Online verification, `POST {broker}/consent/verify` (parafe-verifier.md §8). Pure: the
request body is built here, the answer interpreted here; the POST is the driver's.

The mapping of the broker's refusal codes is the reference's 3.3.0 one: refusal text is never
read for "expired", a refusal without a code is INVALID_CONSENT_TOKEN, and a 2xx answer with
`valid: false` is returned (not raised) so a caller of `interpret_answer` sees what the broker
said. `ParafeVerifier` refuses such an answer.
"""

from __future__ import annotations

import http.client
from typing import Any

from attrs import frozen

from pactmw.core.encoding import json_loads
from pactmw.core.errors import MalformedInput
from pactmw.protocols.parafe import _errors as err
from pactmw.protocols.parafe._errors import INVALID_CONSENT_TOKEN, ParafeError
from pactmw.protocols.parafe._jwt import as_float, is_number, unverified_claims

VERIFY_PATH = "/consent/verify"

#: Refusals that are not about the token's signature: say which, without the tamper advice.
_SESSION_REFUSALS = {
    "agent_revoked": "an agent in this session has been revoked or suspended",
    "session_inactive": "the session is closed or expired; start a new handshake",
    "session_not_found": "the broker knows no such session",
    "session_mismatch": "the token belongs to another session",
}


@frozen
class OnlineVerification:
    """The broker's answer to an online check. Check `valid`: a 2xx may say False."""

    valid: bool
    permitted: bool
    action: str
    session_id: str
    expires_at: str | None = None
    key_bound: bool = False
    proof_verified: bool = False


def verify_request(
    token: str,
    *,
    action: str,
    session_id: str | None = None,
    agent_id: str | None = None,
    proof: str | None = None,
) -> dict[str, Any]:
    """The JSON body of `POST /consent/verify`.

    `session_id` defaults to the token's own (read unverified); with neither, this raises
    `ParafeError(INVALID_CONSENT_TOKEN)` before any request is made. `agent_id` is sent only
    when given (the broker then refuses another agent's token).
    """
    if session_id is None:
        claimed = unverified_claims(token).get("session_id")
        session_id = claimed if isinstance(claimed, str) else None
    if session_id is None:
        raise err.invalid_token(
            "session_id is required for online verification. Provide it or use a token that "
            "carries a session_id claim."
        )
    body: dict[str, Any] = {"consent_token": token, "action": action, "session_id": session_id}
    if agent_id is not None:
        body["agent_id"] = agent_id
    if proof:
        body["proof"] = proof
    return body


def unreachable(broker_url: str, detail: str) -> ParafeError:
    # The reference's text, without its tamper advice: the broker is down, not the token bad.
    return err.broker_unavailable(
        f"Could not reach Parafe broker at {broker_url}: {detail}", err.BROKER_UNREACHABLE
    )


def interpret_answer(
    status: int,
    body: bytes,
    *,
    token: str,
    action: str,
    session_id: str,
    agent_id: str | None = None,
) -> OnlineVerification:
    """Map the broker's answer (§8 table) to a result or a `ParafeError`."""
    try:
        parsed = json_loads(body) if body else {}
    except MalformedInput:
        parsed = {}
    answer: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    if not 200 <= status < 300:
        raise _refusal(status, answer, token=token, agent_id=agent_id)
    valid, permitted, answered_action = (
        answer.get("valid"),
        answer.get("permitted"),
        answer.get("action"),
    )
    if valid is True and permitted is False:
        # The reference quotes the broker's reason whole (§8); it becomes the refusal's message,
        # which the reply carries to the calling agent: cut, as the broker's errors are.
        reason = err.broker_text(answer.get("reason"))
        raise err.scope_violation(
            action, [reason if reason is not None else "Action not permitted"]
        )
    if (
        not isinstance(valid, bool)
        or not isinstance(permitted, bool)
        or not isinstance(answered_action, str)
    ):
        raise err.invalid_token(
            "Unexpected response from broker /consent/verify: missing or invalid fields."
        )
    if agent_id is not None:
        target = unverified_claims(token).get("target_agent_id")
        if not (isinstance(target, str) and target == agent_id):
            raise err.wrong_audience(agent_id, target)
    answered_session = answer.get("session_id")
    expires_at = answer.get("expires_at")
    return OnlineVerification(
        valid=valid,
        permitted=permitted,
        action=answered_action,
        session_id=answered_session if isinstance(answered_session, str) else session_id,
        expires_at=expires_at if isinstance(expires_at, str) else None,
        key_bound=answer.get("key_bound") is True,
        proof_verified=answer.get("proof_verified") is True,
    )


def _refusal(
    status: int, answer: dict[str, Any], *, token: str, agent_id: str | None
) -> ParafeError:
    code = answer.get("error")
    reason = answer.get("reason")
    if not isinstance(reason, str):
        reason = answer.get("message")
    reason = err.broker_text(reason)
    if reason is None:
        reason = http.client.responses.get(status, "")
    if code == "token_expired":
        exp = unverified_claims(token).get("exp")
        return err.expired(as_float(exp) if is_number(exp) else None)
    if code == "wrong_audience":
        target = unverified_claims(token).get("target_agent_id")
        return err.wrong_audience(agent_id if agent_id is not None else "(this agent)", target)
    if code == "proof_invalid":
        return err.invalid_proof(reason)
    if code == "token_invalid":
        return err.invalid_token(reason)
    if isinstance(code, str) and code in _SESSION_REFUSALS:
        return ParafeError(
            INVALID_CONSENT_TOKEN,
            f"Parafe consent token was refused by the broker: {_SESSION_REFUSALS[code]} "
            f"({reason}).",
        )
    shown = code if isinstance(code, str) and code else "no code"
    return ParafeError(
        INVALID_CONSENT_TOKEN,
        f"Parafe consent token is invalid: the broker refused to verify it ({status} {shown}: "
        f"{reason}).",
    )


__all__ = [
    "VERIFY_PATH",
    "OnlineVerification",
    "interpret_answer",
    "unreachable",
    "verify_request",
]
