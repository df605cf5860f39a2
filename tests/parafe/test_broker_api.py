"""The agent's own broker calls, as @getparafe/sdk makes them: request proofs, error answers,
when a call is tried again, filing bodies and answers, and acknowledgments checked against
the receipt they acknowledge (the real phase-2 broker fixture)."""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

import pytest

from pactmw.core.fetch import retry_after as parse_retry_after
from pactmw.core.jose import parse_compact, verify_signature
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    BrokerRetry,
    FiledReceipt,
    ParafeError,
    ReceiptVerifier,
    StaticBrokerKeys,
    request_pop,
)
from pactmw.protocols.parafe._broker_api import (
    DEFAULT_RECEIPT_KIND,
    acknowledged,
    broker_error,
    filing_body,
    filing_path,
    filing_result,
)
from tests.parafe.support import PHASE2, fixture, fixture_now

NOW = 1_790_000_000


# -- request proofs ----------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_a_request_proof_binds_method_url_without_query_and_the_call(alg: str) -> None:
    key = generate_private_jwk(alg, kid="must-not-appear")
    url = "https://api.parafe.ai/agents/prf_agent_a/claim-status?wait=25"
    proof = request_pop(key, "get", url, now=NOW + 0.7, agent_id="prf_agent_a")
    jws = parse_compact(proof, allowed_algs=frozenset({alg}))
    verify_signature(jws, key.public)
    assert dict(jws.header) == {"alg": alg, "typ": "parafe-pop+jwt"}
    claims = jws.claims()
    assert claims["htm"] == "GET"
    assert claims["htu"] == "https://api.parafe.ai/agents/prf_agent_a/claim-status"
    assert claims["agent_id"] == "prf_agent_a"
    assert claims["iat"] == NOW
    assert len(claims["jti"]) == 36
    again = parse_compact(request_pop(key, "GET", url, now=NOW), allowed_algs=frozenset({alg}))
    assert again.claims()["jti"] != claims["jti"]  # single use: a new jti every time


def test_a_request_proof_needs_an_agent_key() -> None:
    with pytest.raises(ValueError, match="Ed25519 or P-256"):
        request_pop(generate_private_jwk("RS256"), "POST", "https://b.example/x", now=NOW)


def test_broker_errors_read_as_the_sdks_map_broker_error() -> None:
    assert broker_error({"error": "tier_insufficient", "message": "Needs email"}) == (
        "tier_insufficient",
        "Needs email",
    )
    assert broker_error({"error": "x", "reason": "because"}) == ("x", "because")
    assert broker_error({"error": "only_code"}) == ("only_code", "only_code")
    assert broker_error(None) == ("unknown_error", "Unknown error")
    assert broker_error({"error": 5, "message": "m" * 900}) == ("unknown_error", "m" * 500)


# -- trying again ------------------------------------------------------------------------------


def test_retry_after_is_seconds_or_an_http_date() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after(formatdate(NOW + 30, usegmt=True), now=NOW) == 30.0
    assert parse_retry_after(formatdate(NOW - 30, usegmt=True), now=NOW) == 0.0
    # Against the answer's own Date when it has one (no clock skew).
    date = formatdate(NOW - 100, usegmt=True)
    assert parse_retry_after(formatdate(NOW - 90, usegmt=True), date=date, now=NOW) == 10.0
    for value in (None, "", "soon", "-1", "1.5", "²"):
        assert parse_retry_after(value, now=NOW) is None, value


RETRY = BrokerRetry(retries=3, backoff=0.2, max_backoff=2.0, max_retry_after=5.0)


@pytest.mark.parametrize(
    ("status", "idempotent", "delivered", "retry_after", "expected"),
    [
        (None, True, True, None, 0.2),  # a network failure, an idempotent call
        (None, False, False, None, 0.2),  # it never left: safe for any call
        (None, False, True, None, None),  # it may have run: not for a state change
        (429, False, True, None, 0.2),
        (429, False, True, 3.0, 3.0),  # Retry-After is waited out
        (429, True, True, 30.0, None),  # ... unless it is longer than max_retry_after
        (503, False, True, 1.0, 1.0),  # the edge refused it: never ran
        (502, False, True, None, 0.2),
        (500, True, True, None, 0.2),  # may have run: idempotent calls only
        (500, False, True, None, None),
        (504, False, True, None, None),
        (507, True, True, None, 0.2),
        (400, True, True, None, None),  # never a 4xx but 429
        (401, True, True, 1.0, None),
        (409, True, True, None, None),
        (201, True, True, None, None),  # success is not retried either
    ],
)
def test_what_is_tried_again(
    status: int | None,
    idempotent: bool,
    delivered: bool,
    retry_after: float | None,
    expected: float | None,
) -> None:
    wait = RETRY.wait(
        1, status=status, idempotent=idempotent, delivered=delivered, retry_after=retry_after
    )
    assert wait == expected


def test_backoff_doubles_is_capped_and_the_retries_are_bounded() -> None:
    retry = BrokerRetry(retries=5, backoff=0.5, max_backoff=3.0)
    waits = [retry.wait(n, status=503, idempotent=True) for n in range(1, 7)]
    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0, None]
    assert BrokerRetry(retries=0).wait(1, status=None, idempotent=True) is None
    for bad in ({"retries": -1}, {"retries": True}, {"backoff": -0.1}):
        with pytest.raises(ValueError):
            BrokerRetry(**bad)


# -- filing ------------------------------------------------------------------------------------


def test_filing_bodies_carry_kind_only_when_given() -> None:
    assert filing_path("sess/1 2") == "/sessions/sess%2F1%202/action-receipts"
    assert filing_body("a.b.c") == {"receipt": "a.b.c"}
    assert filing_body("a.b.c", "ap2.checkout_receipt") == {
        "receipt": "a.b.c",
        "kind": "ap2.checkout_receipt",
    }
    with pytest.raises(ValueError, match="kind must be one of"):
        filing_body("a.b.c", "ap2.refund_receipt")


def test_filing_answers_as_the_sdks_file_action_receipt() -> None:
    assert filing_result(201, {"acknowledgment": "x.y.z", "seq": 1}) == (False, "x.y.z")
    assert filing_result(200, {}) == (False, None)
    assert filing_result(409, {"error": "duplicate_receipt", "acknowledgment": "x.y.z"}) == (
        True,
        "x.y.z",
    )
    assert filing_result(409, {"error": "session_closed"}) is None
    assert filing_result(401, {"error": "invalid_credential"}) is None
    assert filing_result(500, None) is None


def _phase2() -> tuple[dict[str, Any], ReceiptVerifier]:
    data = fixture(PHASE2)
    return data, ReceiptVerifier(StaticBrokerKeys(data["jwks"]), clock=lambda: fixture_now(PHASE2))


def test_the_brokers_real_acknowledgments_acknowledge_their_receipts() -> None:
    data, verifier = _phase2()
    session = data["session_id"]
    for seq, (receipt, jws) in enumerate(
        zip(data["action_receipts"], data["acknowledgments"], strict=True), start=1
    ):
        filed = acknowledged(
            verifier.verify_index_ack(jws), jws, receipt=receipt, session_id=session
        )
        assert filed == FiledReceipt(
            session_id=session,
            receipt=receipt,
            kind=DEFAULT_RECEIPT_KIND,
            acknowledgment=jws,
            ack=filed.ack,
        )
        assert filed.ack.seq == seq


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"receipt_index": 1}, "another receipt"),
        ({"session_id": "sess_other"}, "another session"),
        ({"kind": "ap2.checkout_receipt"}, "another kind of receipt"),
    ],
)
def test_an_acknowledgment_of_something_else_is_refused(change: dict[str, Any], what: str) -> None:
    data, verifier = _phase2()
    ack = verifier.verify_index_ack(data["acknowledgments"][0])
    with pytest.raises(ParafeError) as caught:
        acknowledged(
            ack,
            data["acknowledgments"][0],
            receipt=data["action_receipts"][change.get("receipt_index", 0)],
            session_id=change.get("session_id", data["session_id"]),
            kind=change.get("kind"),
        )
    assert caught.value.code == "MALFORMED"
    assert caught.value.message == f"The acknowledgment is for {what}"
