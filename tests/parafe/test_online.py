"""Online verification (parafe-verifier.md §8, §13 "Online"): the request and the mapping of
every broker answer. The HTTP edges are in test_broker_http.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pactmw.protocols.parafe import (
    EXPIRED_CONSENT_TOKEN,
    INVALID_CONSENT_TOKEN,
    INVALID_PROOF,
    SCOPE_VIOLATION,
    WRONG_AUDIENCE,
    ParafeError,
)
from pactmw.protocols.parafe._online import interpret_answer, verify_request
from tests.parafe.support import Minter

NOW = 1_790_741_039.0


@pytest.fixture
def token() -> str:
    return Minter(NOW).token(target_agent_id="prf_agent_shop", session_id="sess_1")


def answer(status: int, body: Any, token: str, agent_id: str | None = None) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return interpret_answer(
        status, raw, token=token, action="create_order", session_id="sess_1", agent_id=agent_id
    )


def refusal(status: int, body: Any, token: str, agent_id: str | None = None) -> ParafeError:
    with pytest.raises(ParafeError) as caught:
        answer(status, body, token, agent_id)
    return caught.value


def test_request_body(token: str) -> None:
    assert verify_request(token, action="create_order") == {
        "consent_token": token,
        "action": "create_order",
        "session_id": "sess_1",  # from the token
    }
    body = verify_request(
        token, action="a", session_id="sess_9", agent_id="prf_agent_shop", proof="p.r.f"
    )
    assert body == {
        "consent_token": token,
        "action": "a",
        "session_id": "sess_9",
        "agent_id": "prf_agent_shop",
        "proof": "p.r.f",
    }


def test_missing_session_id_raises_before_any_request() -> None:
    for token in ("garbage", Minter(NOW).token(session_id=5)):
        with pytest.raises(ParafeError) as caught:
            verify_request(token, action="a")
        assert caught.value.code == INVALID_CONSENT_TOKEN


def test_permitted(token: str) -> None:
    result = answer(
        200,
        {
            "valid": True,
            "permitted": True,
            "action": "create_order",
            "session_id": "sess_1",
            "expires_at": "2026-09-30T04:08:59.000Z",
            "key_bound": True,
            "proof_verified": True,
        },
        token,
        agent_id="prf_agent_shop",
    )
    assert result.valid
    assert result.permitted
    assert result.key_bound
    assert result.proof_verified
    assert result.expires_at == "2026-09-30T04:08:59.000Z"
    minimal = answer(200, {"valid": True, "permitted": True, "action": "create_order"}, token)
    assert minimal.session_id == "sess_1"
    assert not minimal.key_bound


def test_valid_false_is_returned_not_raised(token: str) -> None:
    result = answer(200, {"valid": False, "permitted": False, "action": "create_order"}, token)
    assert result.valid is False


def test_permitted_false_is_a_scope_violation(token: str) -> None:
    error = refusal(
        200, {"valid": True, "permitted": False, "action": "x", "reason": "excluded"}, token
    )
    assert error.code == SCOPE_VIOLATION
    assert "excluded" in error.message


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"valid": "true", "permitted": True, "action": "a"},
        {"valid": True, "permitted": 1, "action": "a"},
        {"valid": True, "permitted": True, "action": 5},
        [True],
        b"not json",
        b"",
    ],
)
def test_unexpected_2xx(token: str, body: Any) -> None:
    assert refusal(200, body, token).code == INVALID_CONSENT_TOKEN


def test_wrong_agent_after_a_permitted_answer(token: str) -> None:
    error = refusal(200, {"valid": True, "permitted": True, "action": "a"}, token, "prf_agent_x")
    assert error.code == WRONG_AUDIENCE


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (
            {"error": "token_expired", "reason": "Consent token expired"},
            EXPIRED_CONSENT_TOKEN,
            "expired at 2026-09-30T04:08:59.000Z",
        ),
        (
            {"error": "wrong_audience", "reason": "other agent"},
            WRONG_AUDIENCE,
            '"prf_agent_shop", not "prf_agent_other"',
        ),
        ({"error": "proof_invalid", "reason": "proof is stale"}, INVALID_PROOF, "proof is stale"),
        (
            {"error": "token_invalid", "reason": "Consent token signature invalid"},
            INVALID_CONSENT_TOKEN,
            "signature invalid",
        ),
        (
            {"error": "agent_revoked", "reason": "broker says agent_revoked"},
            INVALID_CONSENT_TOKEN,
            "revoked or suspended",
        ),
        (
            {"error": "session_inactive", "reason": "broker says session_inactive"},
            INVALID_CONSENT_TOKEN,
            "new handshake",
        ),
        (
            {"error": "session_not_found", "reason": "broker says session_not_found"},
            INVALID_CONSENT_TOKEN,
            "no such session",
        ),
        (
            {"error": "session_mismatch", "reason": "broker says session_mismatch"},
            INVALID_CONSENT_TOKEN,
            "another session",
        ),
    ],
)
def test_refusal_codes(token: str, body: dict[str, Any], code: str, says: str) -> None:
    error = refusal(401, {"valid": False, **body}, token, "prf_agent_other")
    assert error.code == code
    assert says in error.message
    if body["error"] == "token_invalid":
        assert "tampered with" in error.message
    if body["error"].startswith(("agent_", "session_")):
        assert body["reason"] in error.message
        assert "tampered" not in error.message  # not the advice for a bad signature


def test_token_expired_carries_the_token_exp(token: str) -> None:
    error = refusal(401, {"error": "token_expired"}, token)
    assert error.expired_at == NOW + 300


@pytest.mark.parametrize(
    "reason", ["Consent token signature invalid or token expired", "Session has expired", "expired"]
)
def test_a_refusal_without_code_is_never_read_as_expired(token: str, reason: str) -> None:
    error = refusal(401, {"valid": False, "reason": reason}, token)
    assert error.code == INVALID_CONSENT_TOKEN
    assert "no code" in error.message


def test_other_refusals_say_what_the_broker_said(token: str) -> None:
    error = refusal(400, {"error": "validation_error", "message": "action is required"}, token)
    assert "400 validation_error: action is required" in error.message
    error = refusal(429, b"", token)
    assert "429 no code: Too Many Requests" in error.message
    error = refusal(503, b"<html>", token)
    assert error.code == INVALID_CONSENT_TOKEN
