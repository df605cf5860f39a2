"""The Brand-facing values of Poppy Operations v1 and the operation object as the SDK's
model reads it: routes, settings checks, the JSON of every state (OPS-3.2-01, Ops §3), and
settling an operation whose outcome was unknown (OPS-6-03)."""

from __future__ import annotations

from typing import Any

import pytest
from personal_agent_protocol.models import Operation

from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.fetch import FetchPolicy
from pactmw.provider.poppy import (
    OperationFailed,
    OperationRun,
    OperationsConfig,
    Performed,
    PoppyOperations,
    Proposal,
)
from pactmw.provider.poppy._operation_endpoint import (
    EXPIRED_SUMMARY,
    operation_document,
    operation_route,
)
from pactmw.store import MemoryStore
from pactmw.store._protocols.operations import StoredOperation

NOW = 1_800_000_000.0


def performed(run: OperationRun) -> Performed:
    return Performed(summary="done")


def record(**changes: Any) -> StoredOperation:
    values: dict[str, Any] = {
        "operation_id": "op_1",
        "brand_id": "shop",
        "client_id": "https://atlas.example/agent.json",
        "user_id": "usr_1",
        "account": "alice",
        "action": "refund",
        "revision": 1,
        "state": "proposed",
        "summary": "Refund order 7.",
        "terms": '{"order_id":"7"}',
        "scopes": ("orders:write",),
        "user_approval_required": True,
        "url": None,
        "open_key": "k",
        "created_at": NOW,
        "updated_at": NOW,
        "expires_at": NOW + 900,
    }
    values.update(changes)
    return StoredOperation(**values)


@pytest.mark.parametrize(
    ("method", "rest", "expected"),
    [
        ("GET", "/op_1", ("read", "op_1")),
        ("POST", "/op_1/confirm", ("confirm", "op_1")),
        ("POST", "/op_1/cancel", ("cancel", "op_1")),
        ("POST", "/op_1", None),
        ("GET", "/op_1/confirm", None),
        ("POST", "/op_1/confirm/x", None),
        ("GET", "/", None),
        ("GET", "op_1", None),
    ],
)
def test_operation_routes(method: str, rest: str, expected: Any) -> None:
    assert operation_route(method, rest) == expected


def test_each_state_is_an_operation_the_sdk_accepts() -> None:
    proposed = operation_document(record(), NOW)
    assert "url" not in proposed
    assert (proposed["confirmation"], proposed["result"]) == (None, None)
    assert Operation.model_validate(proposed).terms == {"order_id": "7"}
    expired = operation_document(record(), NOW + 900)
    assert (expired["state"], expired["result"]) == ("expired", {"summary": EXPIRED_SUMMARY})
    confirmed = record(
        state="in_progress", confirmed_revision=1, approved_by="user", confirmed_at=NOW + 5
    )
    assert Operation.model_validate(operation_document(confirmed, NOW + 900)).state == (
        "in_progress"
    )
    failed = record(
        state="failed",
        confirmed_revision=1,
        approved_by="user",
        confirmed_at=NOW + 5,
        result_summary="Refunded 5 of 20.",
        result_data='{"refunded":"5"}',
        url="https://shop.example/o/7",
    )
    document = operation_document(failed, NOW + 10)
    assert document["result"] == {"summary": "Refunded 5 of 20.", "data": {"refunded": "5"}}
    assert Operation.model_validate(document).url == "https://shop.example/o/7"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"action": ""}, "action and a summary"),
        ({"summary": "  "}, "action and a summary"),
        ({"url": "http://shop.example/o/7"}, "https"),
    ],
)
def test_a_proposal_checks_itself(changes: dict[str, Any], message: str) -> None:
    values: dict[str, Any] = {"action": "refund", "summary": "Refund order 7."}
    values.update(changes)
    with pytest.raises(ValueError, match=message):
        Proposal(**values)
    with pytest.raises(TypeError, match="not a string"):
        Proposal(action="refund", summary="x", scopes="orders:write")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"executors": {}}, "at least one action"),
        ({"executors": {"refund": "shop:refund"}}, "callables"),
        # Found by a Poppy trial: an executor under "" was taken, though no Proposal can
        # name it (its action must not be empty): refused where it is registered.
        ({"executors": {"": performed}}, "executors has an empty action name"),
        ({"executors": {"refund": performed, "": performed}}, "an empty action name"),
        ({"executors": {7: performed}}, "action names must be strings"),
        ({"proposal_seconds": 0}, "proposal_seconds"),
        ({"proposal_seconds": True}, "proposal_seconds"),
        ({"idempotency_seconds": 31 * 86_400}, "idempotency_seconds"),
    ],
)
def test_operations_settings_check_themselves(changes: dict[str, Any], message: str) -> None:
    values: dict[str, Any] = {"executors": {"refund": performed}}
    values.update(changes)
    with pytest.raises(ValueError, match=message):
        OperationsConfig(**values)


def test_an_unknown_outcome_is_settled_later_by_brand_code() -> None:
    store = MemoryStore()
    operations = PoppyOperations(
        store=store,
        clock=lambda: NOW + 20,
        clients=ClientMetadataCache(FetchPolicy()),
        configs={"shop": OperationsConfig(executors={"refund": performed})},
    )
    store.propose_operation(operation=record(), now=NOW)
    store.confirm_operation(operation_id="op_1", revision=1, approved_by="user", now=NOW + 10)
    settled = operations.settle("op_1", OperationFailed("Nothing was refunded.", {"n": 0}))
    assert (settled["state"], settled["result"]) == (
        "failed",
        {"summary": "Nothing was refunded.", "data": {"n": 0}},
    )
    # Final stays final.
    assert operations.settle("op_1", Performed("done"))["state"] == "failed"
    with pytest.raises(KeyError):
        operations.settle("op_missing", Performed("done"))
