"""The receiving agent's own calls to the broker, against the stand-in broker on 127.0.0.1:
`/handshake/complete` tried again with bounded exponential backoff (only what is safe), and
filed receipts kept with the broker's verified index acknowledgments (AP2 receipts filed with
their `kind`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from pactmw.core.encoding import json_dumps
from pactmw.core.errors import FetchError
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk
from pactmw.protocols.parafe import (
    Ap2Outcome,
    BrokerKeys,
    BrokerRetry,
    HandshakeChallenge,
    HandshakeComplete,
    ReceiptSigner,
    ReceiptVerifier,
    agent_did,
    check_session_index,
    receipt_hash,
)
from pactmw.provider.parafe import (
    HANDSHAKE_COMPLETE_PATH,
    Filing,
    MemoryAcknowledgments,
    ParafeAgent,
    ReceiptFiler,
)
from pactmw.provider.parafe._broker import BrokerClient
from pactmw.provider.parafe._handshake import complete_handshake
from tests.parafe.fake_broker import unreachable_url
from tests.parafe.support import decode
from tests.parafe_integration.broker import DROP, Scripted
from tests.parafe_integration.support import (
    CALLER_AGENT,
    CREDENTIAL,
    EXCLUSIONS,
    PERMISSIONS,
    SCOPE,
    SHOP_AGENT,
    World,
    issue_options,
)
from tests.support.clock import FakeClock
from tests.support.logs import HOSTILE, assert_logs_tame

MANDATE = "eyJhbGciOiJFUzI1NiJ9.eyJfc2RfYWxnIjoic2hhLTI1NiJ9.c2ln~WyJzIiwiYSIsMV0~"


@pytest.fixture
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    world = World(tmp_path_factory.mktemp("parafe-broker-calls"), shop_alg="ES256")
    yield world
    world.close()


def challenge(world: World) -> HandshakeChallenge:
    opened = world.broker.open_handshake(**issue_options(world))
    return HandshakeChallenge(
        handshake_id=opened["handshake_id"],
        challenge=opened["challenge"],
        initiator_agent_id=CALLER_AGENT,
        broker_url=world.url,
        requested_scope=SCOPE,
        requested_permissions=tuple(PERMISSIONS),
    )


def broker_client(world: World, clock: FakeClock, retry: BrokerRetry | None = None) -> BrokerClient:
    return BrokerClient(
        world.url,
        credential=CREDENTIAL,
        key=world.shop_key,
        policy=world.config().fetch_policy(),
        clock=lambda: 1_790_000_000.0,
        retry=retry,
        sleep=clock.sleep,
    )


# -- /handshake/complete, tried again ----------------------------------------------------------


def complete_after(
    world: World, failures: list[Scripted], retry: BrokerRetry | None = None
) -> tuple[HandshakeComplete, FakeClock]:
    """Complete a fresh handshake while the broker first serves `failures`; the answer and
    the clock the waits were slept on."""
    world.broker.handshake_failures = list(failures)
    clock = FakeClock()
    return complete_handshake(broker_client(world, clock, retry), challenge(world)), clock


def test_a_handshake_survives_a_broker_that_fails_twice_with_backoff(world: World) -> None:
    complete, clock = complete_after(world, [(503, {"error": "unavailable"}, {}), DROP])
    assert complete.status == "authenticated", complete
    assert complete.session_id is not None
    assert complete.consent_token is not None
    assert clock.slept == [0.2, 0.4]  # exponential: 0.2 s, then twice as long
    assert world.broker.hits[HANDSHAKE_COMPLETE_PATH] == 3
    # Each attempt is the whole request again (no proof: the SDK sends none).
    bodies = [call["body"] for call in world.broker.complete_requests]
    assert bodies[0]["handshake_id"] == bodies[2]["handshake_id"]


def test_a_429_or_503_waits_its_retry_after(world: World) -> None:
    complete, clock = complete_after(
        world,
        [
            (429, {"error": "rate_limit_exceeded"}, {"Retry-After": "3"}),
            (503, {"error": "unavailable"}, {"Retry-After": "1"}),
        ],
    )
    assert complete.status == "authenticated"
    assert clock.slept == [3.0, 1.0]


def test_a_retry_after_longer_than_the_bound_is_not_waited_out(world: World) -> None:
    failure: Scripted = (429, {"error": "rate_limit_exceeded"}, {"Retry-After": "60"})
    complete, clock = complete_after(world, [failure])
    assert (complete.status, complete.error_code) == ("rejected", "rate_limit_exceeded")
    assert clock.slept == []
    assert world.broker.hits[HANDSHAKE_COMPLETE_PATH] == 1


def test_a_4xx_is_never_tried_again(world: World) -> None:
    complete, clock = complete_after(world, [(400, {"error": "validation_error"}, {})])
    assert (complete.status, complete.error_code) == ("rejected", "validation_error")
    assert clock.slept == []
    assert world.broker.hits[HANDSHAKE_COMPLETE_PATH] == 1


def test_retries_are_bounded_then_the_handshake_is_an_error(world: World) -> None:
    failure: Scripted = (500, {"error": "internal_error"}, {})
    down, clock = complete_after(world, [failure] * 4 + [DROP])
    assert (down.status, down.error_code) == ("error", "internal_error")
    assert clock.slept == [0.2, 0.4, 0.8]  # three more attempts, then it gives up
    assert world.broker.hits[HANDSHAKE_COMPLETE_PATH] == 4
    lost, clock = complete_after(world, [DROP] * 3, BrokerRetry(retries=1))
    assert (lost.status, lost.error_code) == ("error", "network_error")
    assert clock.slept == [0.2]


def test_the_agent_retries_with_its_configured_schedule(world: World) -> None:
    agent = ParafeAgent(
        world.config(credential=CREDENTIAL, broker_retry=BrokerRetry(retries=2, backoff=0.01))
    )
    world.broker.handshake_failures = [DROP, (502, {"error": "bad_gateway"}, {})]
    assert agent.answer_handshake(challenge(world)).status == "authenticated"
    assert world.broker.hits[HANDSHAKE_COMPLETE_PATH] == 3
    world.broker.handshake_failures = [DROP, DROP, DROP]
    assert agent.answer_handshake(challenge(world)).error_code == "network_error"


def test_a_state_changing_call_is_not_resent_after_a_lost_answer(world: World) -> None:
    # The same client, asked to send a call that is not idempotent: a connection that
    # dropped after the request may have run it, so it is not sent again.
    world.broker.handshake_failures = [DROP]
    clock = FakeClock()
    with pytest.raises(FetchError):
        broker_client(world, clock).send(HANDSHAKE_COMPLETE_PATH, {}, idempotent=False)
    assert world.broker.hits[HANDSHAKE_COMPLETE_PATH] == 1
    world.broker.handshake_failures = [(503, {"error": "unavailable"}, {}), (504, {}, {})]
    answer = broker_client(world, clock).send(HANDSHAKE_COMPLETE_PATH, {}, idempotent=False)
    assert answer.status == 504  # 503 never ran, so it was sent again; a 504 may have
    assert clock.slept == [0.2]


# -- filing, with the acknowledgments kept -----------------------------------------------------


def new_filer(world: World, **options: Any) -> ReceiptFiler:
    """A filer of the world's shop, to its broker unless `options` say otherwise."""
    arguments: dict[str, Any] = {
        "broker_url": world.url,
        "credential": CREDENTIAL,
        "key": world.shop_key,
        "policy": world.config().fetch_policy(),
    }
    return ReceiptFiler(**{**arguments, **options})


def file_batches(world: World, *batches: list[Filing]) -> ReceiptFiler:
    """A filer that filed each batch in turn (waiting for each), then closed."""
    filer = new_filer(world, retry=BrokerRetry(backoff=0.01))
    try:
        for batch in batches:
            filer.submit(batch)
            assert filer.flush(10)
    finally:
        filer.close()
    return filer


def signed_receipts(world: World, count: int) -> tuple[str, list[str]]:
    token, session_id = world.broker.issue(
        initiator_id=CALLER_AGENT,
        initiator_key=world.caller_key.public,
        target_id=SHOP_AGENT,
        scope=SCOPE,
        permissions=list(PERMISSIONS),
        exclusions=list(EXCLUSIONS),
    )
    signer = ReceiptSigner(world.shop_key, agent_did(SHOP_AGENT))
    receipts = [
        signer.sign(session_id=session_id, consent_token=token, action=f"act{n}")
        for n in range(count)
    ]
    return session_id, receipts


def test_each_filed_receipt_keeps_the_brokers_verified_acknowledgment(world: World) -> None:
    session_id, receipts = signed_receipts(world, 2)
    # The second batch files one again: duplicate_receipt.
    filing = file_batches(
        world, [Filing(session_id, r) for r in receipts], [Filing(session_id, receipts[0])]
    )
    assert (filing.outcomes["filed"], filing.outcomes["duplicate"]) == (2, 1)
    assert filing.outcomes["unacknowledged"] == 0
    first = filing.acknowledgment_log.get(receipts[0])
    assert first is not None
    assert first.duplicate  # replaced by the duplicate filing, same acknowledgment
    issued = world.broker.index[session_id]
    assert first.acknowledgment == issued[0]["acknowledgment"]
    assert (first.ack.seq, first.ack.receipt_hash) == (1, receipt_hash(receipts[0]))
    assert first.kind == "parafe.action_receipt"
    listed = filing.acknowledgment_log.for_session(session_id)
    assert [f.ack.seq for f in listed] == [1, 2]
    assert filing.acknowledgment_log.get("x.y.z") is None
    # Kept acknowledgments check the session receipt's index.
    actions = [
        {"seq": n, "receipt_hash": receipt_hash(r), "kind": "parafe.action_receipt"}
        for n, r in enumerate(receipts, start=1)
    ]
    head = issued[-1]["entry_hash"]
    verifier = ReceiptVerifier(BrokerKeys(world.url, fetch_policy=world.config().fetch_policy()))
    session = verifier.verify_session_receipt(
        world.broker.session_receipt(session_id, actions, chain_head=head)
    )
    assert (
        check_session_index(session, receipts=receipts, acknowledgments=[f.ack for f in listed])
        == head
    )


def test_an_ap2_receipt_is_filed_with_its_kind(world: World) -> None:
    session_id, _ = signed_receipts(world, 0)
    signed = ReceiptSigner(world.shop_key, agent_did(SHOP_AGENT)).ap2_receipt(
        "checkout", Ap2Outcome(order_id="ord_1"), MANDATE
    )
    filing = file_batches(world, [Filing(session_id, signed.receipt, signed.kind)])
    (record,) = world.broker.filed
    assert record["body"] == {"receipt": signed.receipt, "kind": "ap2.checkout_receipt"}
    filed = filing.acknowledgment_log.get(signed.receipt)
    assert filed is not None
    assert filed.kind == filed.ack.kind == "ap2.checkout_receipt"


@pytest.mark.parametrize("forgery", ["another key", "another receipt", "none", "garbage"])
def test_a_filing_without_a_valid_acknowledgment_keeps_none(world: World, forgery: str) -> None:
    session_id, (receipt, other) = signed_receipts(world, 2)
    stranger = generate_private_jwk("ES256", kid=world.broker.key.kid)

    def answer(record: dict[str, Any]) -> tuple[int, Any]:
        honest = world.broker.acknowledge(session_id, other, "parafe.action_receipt")
        if forgery == "another key":
            claims = decode(honest["acknowledgment"])[1]
            claims["receipt_hash"] = receipt_hash(receipt)
            honest["acknowledgment"] = sign_compact(claims, stranger, typ="parafe-index-ack+jwt")
        elif forgery == "none":
            del honest["acknowledgment"]
        elif forgery == "garbage":
            honest["acknowledgment"] = "not.a.jws"
        return 201, honest

    world.broker.filing_answer = answer
    filing = file_batches(world, [Filing(session_id, receipt)])
    assert filing.outcomes["filed"] == 1
    assert filing.outcomes["unacknowledged"] == 1
    assert filing.acknowledgment_log.get(receipt) is None


def test_a_refused_filings_code_cannot_forge_a_log_line(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    session_id, (receipt,) = signed_receipts(world, 1)
    world.broker.filing_answer = lambda record: (400, {"error": "bad\nCRITICAL forged"})
    with caplog.at_level(logging.WARNING, logger="pactmw.provider.parafe"):
        filing = file_batches(world, [Filing(session_id, receipt)])
    assert filing.outcomes["rejected"] == 1
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refused == ["Parafé receipt filing refused: 400 bad\\nCRITICAL forged"]


def test_a_filing_is_retried_with_a_fresh_proof(world: World) -> None:
    session_id, (receipt,) = signed_receipts(world, 1)
    answers = iter([(503, {"error": "unavailable"}), None])
    world.broker.filing_answer = lambda record: next(answers, None)
    filing = file_batches(world, [Filing(session_id, receipt)])
    first, second = (decode(record["pop"])[1] for record in world.broker.filed)
    assert first["jti"] != second["jti"]
    assert first["session_id"] == second["session_id"] == session_id
    assert filing.acknowledgment_log.get(receipt) is not None


def test_the_agent_keeps_acknowledgments_where_it_is_told(world: World) -> None:
    log = MemoryAcknowledgments(capacity=1)
    agent = ParafeAgent(
        world.config(credential=CREDENTIAL, file_receipts=True), acknowledgment_log=log
    )
    session_id, receipts = signed_receipts(world, 2)
    try:
        agent.file([Filing(session_id, r) for r in receipts])
        assert agent.filer is not None
        assert agent.filer.flush(10)
    finally:
        agent.close()
    assert agent.acknowledgment(receipts[0]) is None  # the capacity is 1: the oldest went
    kept = agent.acknowledgment(receipts[1])
    assert kept is not None
    assert kept.ack.seq == 2
    assert agent.acknowledgments(session_id) == [kept]
    assert ParafeAgent(world.config()).acknowledgments(session_id) == []
    assert json_dumps({"ack": kept.acknowledgment})  # the broker's JWS as received


def test_closing_the_filer_files_what_it_queued_first(world: World) -> None:
    session_id, receipts = signed_receipts(world, 3)
    filer = new_filer(world, retry=BrokerRetry(backoff=0.01))
    filer.submit([Filing(session_id, r) for r in receipts])
    # No flush: a shutdown closes at once, and the worker is a daemon thread that dies with
    # the process, so whatever is still queued when close() returns is never filed.
    assert filer.close(timeout=30)
    assert filer.outcomes["filed"] == 3
    assert sorted(record["body"]["receipt"] for record in world.broker.filed) == sorted(receipts)


def test_a_receipt_the_closed_filer_cannot_file_is_counted_and_logged(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    session_id, (late,) = signed_receipts(world, 1)
    filer = new_filer(world)
    assert filer.close()
    with caplog.at_level(logging.WARNING, logger="pactmw.provider.parafe"):
        filer.submit([Filing(session_id, late)])
    assert filer.outcomes["dropped"] == 1
    assert "closed" in caplog.text
    assert world.broker.filed == []


def test_closing_with_the_broker_down_gives_up_on_time_and_counts_the_rest(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    session_id, receipts = signed_receipts(world, 3)
    filer = new_filer(
        world, broker_url=unreachable_url(), retry=BrokerRetry(retries=1, backoff=0.01)
    )
    filer.submit([Filing(session_id, r) for r in receipts])
    with caplog.at_level(logging.WARNING, logger="pactmw.provider.parafe"):
        drained = filer.close(timeout=0)
    assert filer.flush(30)  # the filing under way, if any, ends (its retries are bounded)
    # Each receipt is accounted for once: given up after its retries, or dropped unfiled.
    assert filer.outcomes["failed"] + filer.outcomes["dropped"] == 3
    assert drained == (filer.outcomes["dropped"] == 0)
    if filer.outcomes["dropped"]:
        assert "not filed" in caplog.text


def test_a_refused_filings_code_cannot_flood_a_log_line(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    session_id, (receipt,) = signed_receipts(world, 1)
    world.broker.filing_answer = lambda record: (400, {"error": HOSTILE})
    with caplog.at_level(logging.WARNING, logger="pactmw"):
        filing = file_batches(world, [Filing(session_id, receipt)])
    assert filing.outcomes["rejected"] == 1
    messages = assert_logs_tame(caplog.records)
    assert any(m.startswith("Parafé receipt filing refused: 400 x\\n") for m in messages)
