"""The Poppy operation contract (store/_protocols/operations.py) on memory, sqlite,
PostgreSQL and the Django store on both: proposals, one open operation per action
(OPS-4-01), immutable revisions with only the latest confirmable (OPS-3.1-01), expiry read at
once, and the compare-and-set that lets exactly one of many confirmers perform, across
threads and processes (OPS-6-02)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from pactmw.store import Store, open_store
from pactmw.store._protocols import OperationStore
from pactmw.store._protocols.operations import HELD_STATUS, RememberedAnswer, StoredOperation
from tests.store.support import (
    PERSISTENT,
    Backend,
    all_at_once,
    backend_module,
    process_url,
    processes_at_once,
    racer_script,
    schema_version,
)

NOW = 1_000_000.0
CLIENT = "https://atlas.example/agent.json"


def proposal(operation_id: str = "op_1", **changes: Any) -> StoredOperation:
    values: dict[str, Any] = {
        "operation_id": operation_id,
        "brand_id": "shop",
        "client_id": CLIENT,
        "user_id": "usr_1",
        "account": "alice",
        "action": "refund",
        "revision": 1,
        "state": "proposed",
        "summary": "Refund order 7 (USD 20.00) to your card.",
        "terms": '{"order":"7"}',
        "scopes": ("orders:write",),
        "user_approval_required": True,
        "url": "https://shop.example/orders/7",
        "open_key": "key-refund-7",
        "created_at": NOW,
        "updated_at": NOW,
        "expires_at": NOW + 900,
    }
    values.update(changes)
    return StoredOperation(**values)


def confirm(store: Store, operation_id: str = "op_1", revision: int = 1, **changes: Any) -> Any:
    values: dict[str, Any] = {
        "operation_id": operation_id,
        "revision": revision,
        "approved_by": "user",
        "now": NOW + 10,
    }
    values.update(changes)
    return store.confirm_operation(**values)


def test_every_store_is_a_store_with_operations(store: Store) -> None:
    assert isinstance(store, Store)  # runtime_checkable: OperationStore's methods included
    assert all(hasattr(store, name) for name in vars(OperationStore) if name.endswith("operation"))


def test_a_proposal_is_stored_and_read_back_unchanged(store: Store) -> None:
    stored = store.propose_operation(operation=proposal(), now=NOW)
    assert stored == proposal()
    assert store.operation("op_1") == proposal()
    assert store.operation("op_2") is None
    assert store.operation("op\x00") is None
    bare = proposal("op_2", account=None, terms=None, url=None, open_key=None, scopes=())
    assert store.propose_operation(operation=bare, now=NOW) == bare
    assert store.operation("op_2") == bare


def test_the_same_open_action_is_one_operation(store: Store) -> None:
    first = store.propose_operation(operation=proposal(), now=NOW)
    again = store.propose_operation(operation=proposal("op_2"), now=NOW + 1)
    assert again == first
    assert store.operation("op_2") is None
    # Another action (another key) is another operation.
    other = store.propose_operation(operation=proposal("op_3", open_key="other"), now=NOW)
    assert other.operation_id == "op_3"


def test_an_operation_in_progress_is_still_the_open_one(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    assert confirm(store).kind == "confirmed"
    again = store.propose_operation(operation=proposal("op_2"), now=NOW + 20)
    assert (again.operation_id, again.state) == ("op_1", "in_progress")


def test_a_final_or_expired_operation_frees_its_action(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    cancelled = store.cancel_operation(operation_id="op_1", summary="Nothing was done.", now=NOW)
    assert cancelled is not None
    assert (cancelled.state, cancelled.open_key) == ("cancelled", None)
    fresh = store.propose_operation(operation=proposal("op_2"), now=NOW + 1)
    assert fresh.operation_id == "op_2"
    # op_2 expires: the same action proposed later is a new operation, op_2 stays expired.
    later = NOW + 1000
    newer = store.propose_operation(
        operation=proposal("op_3", created_at=later, updated_at=later, expires_at=later + 900),
        now=later,
    )
    assert newer.operation_id == "op_3"
    expired = store.operation("op_2")
    assert expired is not None
    assert (expired.state_at(later), expired.open_key) == ("expired", None)


def test_a_taken_id_or_a_malformed_proposal_is_refused(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    with pytest.raises(ValueError, match="already stored"):
        store.propose_operation(operation=proposal(open_key="other"), now=NOW)
    with pytest.raises(ValueError, match="revision 1"):
        store.propose_operation(operation=proposal("op_9", revision=2), now=NOW)
    with pytest.raises(ValueError, match="revision 1"):
        store.propose_operation(operation=proposal("op_9", state="in_progress"), now=NOW)
    with pytest.raises(ValueError, match="summary"):
        store.propose_operation(operation=proposal("op_9", summary=" "), now=NOW)
    with pytest.raises(ValueError, match="NUL"):
        store.propose_operation(operation=proposal("op\x009"), now=NOW)


def test_confirming_the_current_revision_moves_it_in_progress_once(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    won = confirm(store, approved_by="standing_permission")
    assert won.kind == "confirmed"
    assert won.operation == evolve(
        proposal(),
        state="in_progress",
        confirmed_revision=1,
        approved_by="standing_permission",
        confirmed_at=NOW + 10,
        updated_at=NOW + 10,
    )
    late = confirm(store, now=NOW + 20)
    assert (late.kind, late.operation) == ("unchanged", won.operation)
    assert confirm(store, "op_missing").kind == "unknown"
    assert confirm(store, "op\x00").kind == "unknown"


def test_only_the_latest_revision_is_confirmable(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    revised = store.revise_operation(
        operation_id="op_1",
        summary="Refund order 7 (USD 25.00) to your card.",
        terms='{"order":"7","amount":"25.00"}',
        expires_at=NOW + 1900,
        now=NOW + 5,
    )
    assert revised is not None
    assert (revised.revision, revised.summary, revised.expires_at) == (
        2,
        "Refund order 7 (USD 25.00) to your card.",
        NOW + 1900,
    )
    stale = confirm(store, revision=1)
    assert (stale.kind, stale.operation) == ("terms_changed", revised)
    assert confirm(store, revision=2).kind == "confirmed"
    # Once confirmed, no new revision.
    assert (
        store.revise_operation(
            operation_id="op_1", summary="x", terms=None, expires_at=NOW + 2000, now=NOW + 30
        )
        is None
    )


def test_an_expired_proposal_is_neither_confirmed_nor_cancelled(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    after = NOW + 900
    late = confirm(store, now=after)
    assert late.kind == "unchanged"
    assert late.operation is not None
    assert late.operation.state_at(after) == "expired"
    left = store.cancel_operation(operation_id="op_1", summary="x", now=after)
    assert left is not None
    assert left.state == "proposed"
    assert left.state_at(after) == "expired"


def test_a_cancelled_proposal_is_never_confirmed(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    store.cancel_operation(operation_id="op_1", summary="Cancelled: nothing changed.", now=NOW)
    late = confirm(store)
    assert late.kind == "unchanged"
    assert late.operation is not None
    assert (late.operation.state, late.operation.result_summary) == (
        "cancelled",
        "Cancelled: nothing changed.",
    )


def test_an_operation_in_progress_is_not_cancelled_and_settles_once(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    confirm(store)
    kept = store.cancel_operation(operation_id="op_1", summary="x", now=NOW + 11)
    assert kept is not None
    assert kept.state == "in_progress"
    done = store.settle_operation(
        operation_id="op_1",
        state="failed",
        summary="Refunded USD 5.00 of 20.00.",
        data='{"refunded":"5.00"}',
        now=NOW + 12,
    )
    assert done is not None
    assert (done.state, done.result_summary, done.result_data, done.open_key) == (
        "failed",
        "Refunded USD 5.00 of 20.00.",
        '{"refunded":"5.00"}',
        None,
    )
    again = store.settle_operation(
        operation_id="op_1", state="succeeded", summary="y", data=None, now=NOW + 13
    )
    assert again == done
    assert (
        store.settle_operation(
            operation_id="op_missing", state="succeeded", summary="y", data=None, now=NOW
        )
        is None
    )
    with pytest.raises(ValueError, match="succeeded or failed"):
        store.settle_operation(
            operation_id="op_1",
            state="cancelled",  # type: ignore[arg-type]
            summary="y",
            data=None,
            now=NOW,
        )


def test_a_proposal_is_not_settled(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    left = store.settle_operation(
        operation_id="op_1", state="succeeded", summary="y", data=None, now=NOW + 1
    )
    assert left == proposal()


def test_concurrent_confirmations_have_one_winner(backend: Backend) -> None:
    store = backend.open()
    try:
        store.propose_operation(operation=proposal(), now=NOW)
        kinds = all_at_once(8, lambda i: confirm(store, now=NOW + 10 + i).kind)
        assert sorted(kinds) == ["confirmed"] + ["unchanged"] * 7
    finally:
        store.close()


def test_concurrent_proposals_of_one_action_are_one_operation(backend: Backend) -> None:
    store = backend.open()
    try:
        ids = all_at_once(
            6,
            lambda i: store.propose_operation(operation=proposal(f"op_{i}"), now=NOW).operation_id,
        )
        assert len(set(ids)) == 1
        assert sum(store.operation(f"op_{i}") is not None for i in range(6)) == 1
    finally:
        store.close()


# argv: url, operation id, work dir, worker index, now.
CONFIRMER = racer_script(
    "url, operation_id, work, index, now",
    """change = store.confirm_operation(
    operation_id=operation_id, revision=1, approved_by="user", now=float(now)
)
print(change.kind, flush=True)
store.close()
""",
)


@pytest.fixture(params=PERSISTENT)
def url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    yield from process_url(request.param, request, tmp_path, monkeypatch)


def test_processes_confirming_one_operation_have_one_winner(url: str, tmp_path: Path) -> None:
    store = open_store(url)
    try:
        store.propose_operation(operation=proposal(), now=NOW)
    finally:
        store.close()
    work = tmp_path / "race"
    work.mkdir()
    argvs = [
        [sys.executable, "-c", CONFIRMER, url, "op_1", str(work), str(i), str(NOW + 10)]
        for i in range(4)
    ]
    assert sorted(processes_at_once(argvs, work)) == ["confirmed"] + ["unchanged"] * 3


def test_a_version_10_database_gains_the_operations(
    persistent: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = backend_module(persistent)
    migrations = module.MIGRATIONS
    assert len(migrations) >= 11
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:10])
        old = persistent.open()
        old.agent_enabled("warm-up")  # a first operation: PostgreSQL migrates on first use
        old.close()
    assert schema_version(persistent) == 10
    upgraded = persistent.open()
    try:
        assert upgraded.propose_operation(operation=proposal(), now=NOW) == proposal()
        assert schema_version(persistent) == len(migrations)
        assert confirm(upgraded).kind == "confirmed"
    finally:
        upgraded.close()


def answer(**changes: Any) -> RememberedAnswer:
    values: dict[str, Any] = {
        "record_key": "ses_1-key",
        "fingerprint": "POST /api/refund {}",
        "status": 202,
        "body": '{"operation":{"operation_id":"op_1"}}',
        "expires_at": NOW + 600,
    }
    values.update(changes)
    return RememberedAnswer(**values)


def test_an_idempotent_answer_is_kept_until_it_expires(store: Store) -> None:
    assert store.remembered_answer("ses_1-key", now=NOW) is None
    assert store.remember_answer(answer=answer(), now=NOW) == answer()
    # A later writer gets the first answer, unchanged.
    later = answer(fingerprint="other", body="{}")
    assert store.remember_answer(answer=later, now=NOW + 1) == answer()
    assert store.remembered_answer("ses_1-key", now=NOW + 599) == answer()
    assert store.remembered_answer("ses_1-key", now=NOW + 600) is None
    assert store.remembered_answer("other\x00", now=NOW) is None
    # Expired, the key is free again.
    renewed = answer(body="{}", expires_at=NOW + 1200)
    assert store.remember_answer(answer=renewed, now=NOW + 600) == renewed
    assert store.remembered_answer("ses_1-key", now=NOW + 601) == renewed
    with pytest.raises(ValueError, match="NUL"):
        store.remember_answer(answer=answer(record_key="k\x00"), now=NOW)


def test_concurrent_writers_of_one_key_keep_one_answer(backend: Backend) -> None:
    store = backend.open()
    try:
        kept = all_at_once(6, lambda i: store.remember_answer(answer=answer(body=str(i)), now=NOW))
        assert len({a.body for a in kept}) == 1
    finally:
        store.close()


def hold(**changes: Any) -> RememberedAnswer:
    return answer(**{"status": HELD_STATUS, "body": "", "expires_at": NOW + 60, **changes})


def test_a_held_key_proposes_once_until_answered_or_lapsed(store: Store) -> None:
    first = store.propose_operation_once(operation=proposal(), hold=hold(), now=NOW)
    assert (first.operation, first.kept) == (proposal(), None)
    # A repeat while the first is under way finds the hold, and proposes nothing.
    other = proposal("op_2", open_key="key-other")
    repeat = store.propose_operation_once(operation=other, hold=hold(), now=NOW + 1)
    assert (repeat.operation, repeat.kept) == (None, hold())
    assert store.operation("op_2") is None
    # Another request's answer leaves the hold; its own request's answer replaces it.
    assert store.remember_answer(answer=answer(fingerprint="other"), now=NOW + 2) == hold()
    assert store.remember_answer(answer=answer(), now=NOW + 2) == answer()
    answered = store.propose_operation_once(operation=other, hold=hold(), now=NOW + 3)
    assert (answered.operation, answered.kept) == (None, answer())
    # A hold never answered (its process died) lapses; the key proposes again.
    lapsed = hold(record_key="ses_1-lapsed")
    store.propose_operation_once(operation=proposal("op_3", open_key="k3"), hold=lapsed, now=NOW)
    again = store.propose_operation_once(
        operation=proposal("op_4", open_key="k4"),
        hold=hold(record_key="ses_1-lapsed"),
        now=NOW + 60,
    )
    assert again.operation == proposal("op_4", open_key="k4")


def test_a_refused_proposal_holds_nothing(store: Store) -> None:
    store.propose_operation(operation=proposal(), now=NOW)
    with pytest.raises(ValueError, match="already stored"):
        store.propose_operation_once(operation=proposal(open_key="key-other"), hold=hold(), now=NOW)
    assert store.remembered_answer("ses_1-key", now=NOW) is None
    with pytest.raises(ValueError, match="held"):
        store.propose_operation_once(operation=proposal("op_2"), hold=answer(), now=NOW)
    with pytest.raises(ValueError, match="status"):
        store.remember_answer(answer=hold(), now=NOW)


def test_concurrent_holders_of_one_key_propose_one_operation(backend: Backend) -> None:
    store = backend.open()
    try:
        # Six requests with one key, each proposing its own action: only one is stored.
        keyed = all_at_once(
            6,
            lambda i: store.propose_operation_once(
                operation=proposal(f"op_{i}", open_key=f"key-{i}"), hold=hold(), now=NOW
            ),
        )
        proposed = [k.operation for k in keyed if k.operation is not None]
        assert len(proposed) == 1
        assert [k.kept for k in keyed if k.operation is None] == [hold()] * 5
        stored = [store.operation(f"op_{i}") for i in range(6)]
        assert [s for s in stored if s is not None] == proposed
    finally:
        store.close()


def test_cleanup_deletes_expired_answers_and_old_final_operations_only(store: Store) -> None:
    day = 86_400.0
    store.remember_answer(answer=answer(record_key="old", expires_at=NOW + 10), now=NOW)
    store.remember_answer(answer=answer(record_key="live", expires_at=NOW + 3 * day), now=NOW)
    # Five operations, all last changed at about NOW: succeeded, cancelled, an expired
    # proposal, one in progress (its outcome still to come) and a live proposal.
    for name in ("done", "cancelled", "expired", "running", "live"):
        expires = NOW + 60 if name == "expired" else NOW + 3 * day
        store.propose_operation(
            operation=proposal(name, open_key=f"key-{name}", expires_at=expires), now=NOW
        )
    confirm(store, "done")
    store.settle_operation(
        operation_id="done", state="succeeded", summary="Refunded.", data=None, now=NOW + 20
    )
    store.cancel_operation(operation_id="cancelled", summary="Nothing was done.", now=NOW + 20)
    confirm(store, "running")

    # Without a retention cutoff, only the expired answer goes.
    kept = store.cleanup(now=NOW + day, conversations_idle_before=None)
    assert (kept.idempotency_answers, kept.operations) == (1, 0)
    assert store.remembered_answer("live", now=NOW + day) is not None
    assert store.operation("done") is not None
    # A cutoff before their last change keeps them too.
    early = store.cleanup(now=NOW + day, conversations_idle_before=NOW)
    assert (early.idempotency_answers, early.operations) == (0, 0)

    done = store.cleanup(now=NOW + 2 * day, conversations_idle_before=NOW + day)
    assert (done.idempotency_answers, done.operations) == (0, 3)
    for gone in ("done", "cancelled", "expired"):
        assert store.operation(gone) is None, gone
    assert store.operation("running") is not None
    assert store.operation("live") is not None
    # The expired proposal's action is free, the live one's still holds its key.
    again = store.propose_operation(
        operation=proposal("expired-2", open_key="key-expired"), now=NOW + 2 * day
    )
    assert again.operation_id == "expired-2"
    same = store.propose_operation(operation=proposal("live-2", open_key="key-live"), now=NOW)
    assert same.operation_id == "live"
