"""Poppy operations (Operations extension v1): the Store contract, its values and decisions.

An operation is an action the company proposed and the personal agent confirms (Ops §3):
`proposed` until confirmed, cancelled or past `expires_at` (then it reads `expired`), then
`in_progress` while the company performs it, then `succeeded` or `failed` (with a result
summary), or `cancelled`. The store keeps the record and guarantees the one thing the
protocol cannot tolerate twice: of any number of confirmations, through any channel and
process, exactly one moves it `proposed -> in_progress` (`confirm_operation`), and only that
one performs (OPS-6-02). A revision never changes once proposed; only the latest is
confirmable (OPS-3.1-01).

`open_key` is the caller's digest of (owner, account, action, summary, terms): while an
operation with that key is open (proposed and unexpired, or in progress), proposing the same
action again returns it instead of a second operation (OPS-4-01).

An API write's `Idempotency-Key` is held before anything is proposed under it
(`propose_operation_once`): the hold and the proposal are one transaction, so of concurrent
requests with one key exactly one proposes; the others find the hold (then the answer).
"""

from __future__ import annotations

from typing import Literal, Protocol

from attrs import frozen

from pactmw.store._inputs import has_nul, reject_nul

__all__ = [
    "FINAL_STATES",
    "HELD_STATUS",
    "OPERATION_STATES",
    "ConfirmKind",
    "KeyedProposal",
    "OperationChange",
    "OperationResult",
    "OperationState",
    "OperationStore",
    "RememberedAnswer",
    "StoredOperation",
    "check_proposal",
    "decide_confirmation",
]

#: The states a record holds; `expired` is never stored: a proposal past `expires_at`
#: reads as expired (`StoredOperation.state_at`).
OperationState = Literal["proposed", "in_progress", "succeeded", "failed", "cancelled"]
OPERATION_STATES: tuple[OperationState, ...] = (
    "proposed",
    "in_progress",
    "succeeded",
    "failed",
    "cancelled",
)
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})

ConfirmKind = Literal["confirmed", "terms_changed", "unchanged", "unknown"]


@frozen
class StoredOperation:
    """One operation record. `terms` and `result_data` are JSON texts (the caller's
    canonical JSON), `scopes` what confirming it needs; `confirmed_revision`,
    `approved_by` and `confirmed_at` are set together by the winning confirmation."""

    operation_id: str
    brand_id: str
    client_id: str
    user_id: str
    account: str | None
    action: str
    revision: int
    state: OperationState
    summary: str
    terms: str | None
    scopes: tuple[str, ...]
    user_approval_required: bool
    url: str | None
    open_key: str | None
    created_at: float
    updated_at: float
    expires_at: float
    confirmed_revision: int | None = None
    approved_by: str | None = None
    confirmed_at: float | None = None
    result_summary: str | None = None
    result_data: str | None = None

    def state_at(self, now: float) -> str:
        """The state as the protocol reads it at `now`: a proposal past `expires_at` is
        `expired`."""
        if self.state == "proposed" and now >= self.expires_at:
            return "expired"
        return self.state

    def is_open(self, now: float) -> bool:
        """Proposed and unexpired, or in progress: proposing the same action returns it."""
        return self.state_at(now) in ("proposed", "in_progress")


@frozen
class OperationChange:
    """What `confirm_operation` did: `confirmed` (this call won the compare-and-set and
    alone performs), `terms_changed` (still proposed, at another revision), `unchanged`
    (already confirmed, final, or expired: the record as it is), `unknown` (no such id)."""

    kind: ConfirmKind
    operation: StoredOperation | None = None


def decide_confirmation(
    operation: StoredOperation | None, *, revision: int, now: float
) -> ConfirmKind:
    """The compare-and-set's decision: only a proposed, unexpired operation at exactly
    `revision` is confirmed."""
    if operation is None:
        return "unknown"
    if operation.state_at(now) != "proposed":
        return "unchanged"
    if operation.revision != revision:
        return "terms_changed"
    return "confirmed"


@frozen
class OperationResult:
    """How an operation in progress ended: `state` succeeded or failed, its result `summary`
    and `data` (JSON text, or None)."""

    state: Literal["succeeded", "failed"]
    summary: str
    data: str | None


#: The `status` of a key held by a request still under way: its answer is to come.
HELD_STATUS = 0


@frozen
class RememberedAnswer:
    """An API write's answer kept under its `Idempotency-Key` (Guides, Retries): a repeat
    with the same `fingerprint` gets `status` and `body` again, another request is a
    conflict. `record_key` is the caller's digest of (Session, key). With `status`
    `HELD_STATUS` it is a hold: the first request is still under way (`body` empty)."""

    record_key: str
    fingerprint: str
    status: int
    body: str
    expires_at: float

    @property
    def held(self) -> bool:
        return self.status == HELD_STATUS


@frozen
class KeyedProposal:
    """What `propose_operation_once` did: `operation` is set when this call held the key
    and proposed (the stored operation, or the open one of the same action); `kept` when a
    live record already held the key (a hold, or an answer), and nothing was proposed."""

    operation: StoredOperation | None = None
    kept: RememberedAnswer | None = None


class OperationStore(Protocol):
    """Poppy operation records and the compare-and-set that lets exactly one confirmer
    perform."""

    def propose_operation(self, *, operation: StoredOperation, now: float) -> StoredOperation:
        """Store a new proposal (`state` proposed, `revision` 1), unless an open operation
        with the same `open_key` exists: then that one, unchanged (OPS-4-01). Atomic: of
        concurrent proposals of one key, one is stored and all return it.

        ValueError for a record that is not a fresh proposal or whose id is taken.
        """
        check_proposal(operation)
        return self._propose_operation(operation, now)

    def propose_operation_once(
        self, *, operation: StoredOperation, hold: RememberedAnswer, now: float
    ) -> KeyedProposal:
        """Hold `hold.record_key` and propose `operation` (as `propose_operation`) in one
        transaction, unless a live record holds the key: then that record, and nothing is
        proposed. Of concurrent calls with one key exactly one proposes. `hold` is a hold
        (`HELD_STATUS`, until `hold.expires_at`); `remember_answer` answers it.

        ValueError as `propose_operation` (then nothing is held either).
        """
        check_proposal(operation)
        if not hold.held or hold.body:
            raise ValueError("a hold has the held status and no body")
        reject_nul(record_key=hold.record_key, fingerprint=hold.fingerprint)
        return self._propose_operation_once(operation, hold, now)

    def operation(self, operation_id: str) -> StoredOperation | None:
        """The record in any state, or None."""
        return None if has_nul(operation_id) else self._operation(operation_id)

    def revise_operation(
        self,
        *,
        operation_id: str,
        summary: str,
        terms: str | None,
        expires_at: float,
        now: float,
    ) -> StoredOperation | None:
        """Propose new terms for a proposed, unexpired operation: the next revision (the old
        one stays as it was: it can no longer be confirmed). None when it is not proposed."""
        reject_nul(summary=summary, terms=terms or "")
        if has_nul(operation_id):
            return None
        return self._revise_operation(operation_id, summary, terms, expires_at, now)

    def confirm_operation(
        self,
        *,
        operation_id: str,
        revision: int,
        approved_by: str,
        now: float,
    ) -> OperationChange:
        """The compare-and-set `proposed -> in_progress` for `revision` (see
        `decide_confirmation`); of concurrent confirmations exactly one is `confirmed`."""
        if has_nul(operation_id, approved_by):
            return OperationChange("unknown")
        return self._confirm_operation(operation_id, revision, approved_by, now)

    def cancel_operation(
        self, *, operation_id: str, summary: str, now: float
    ) -> StoredOperation | None:
        """Cancel a proposed, unexpired operation (result `summary`); any other state stays
        as it is (one in progress is never cancelled here). The record after, or None."""
        reject_nul(summary=summary)
        return None if has_nul(operation_id) else self._cancel_operation(operation_id, summary, now)

    def settle_operation(
        self,
        *,
        operation_id: str,
        state: Literal["succeeded", "failed"],
        summary: str,
        data: str | None,
        now: float,
    ) -> StoredOperation | None:
        """Record the final outcome of an operation in progress (its result); a record in
        any other state is left as it is. The record after, or None."""
        if state not in ("succeeded", "failed"):
            raise ValueError("an operation settles as succeeded or failed")
        reject_nul(summary=summary, data=data or "")
        if has_nul(operation_id):
            return None
        return self._settle_operation(operation_id, OperationResult(state, summary, data), now)

    def remember_answer(self, *, answer: RememberedAnswer, now: float) -> RememberedAnswer:
        """Keep `answer` unless a live one holds its `record_key`: then that one, unchanged
        (the first of concurrent writers wins; an expired record is replaced). A hold with
        the same `fingerprint` is answered: `answer` replaces it."""
        if answer.held:
            raise ValueError("an answer has a status; a hold is propose_operation_once's")
        reject_nul(record_key=answer.record_key, fingerprint=answer.fingerprint, body=answer.body)
        return self._remember_answer(answer, now)

    def remembered_answer(self, record_key: str, *, now: float) -> RememberedAnswer | None:
        """The live answer kept under `record_key`, or None."""
        return None if has_nul(record_key) else self._remembered_answer(record_key, now)

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _propose_operation(self, operation: StoredOperation, now: float) -> StoredOperation:
        """Insert unless an open operation holds `open_key` (then return it; an expired
        holder frees the key first); ValueError when the id is taken."""
        ...

    def _propose_operation_once(
        self, operation: StoredOperation, hold: RememberedAnswer, now: float
    ) -> KeyedProposal:
        """Insert `hold` unless a live record holds its key (then return that record), and
        propose in the same transaction."""
        ...

    def _operation(self, operation_id: str) -> StoredOperation | None: ...

    def _revise_operation(
        self, operation_id: str, summary: str, terms: str | None, expires_at: float, now: float
    ) -> StoredOperation | None: ...

    def _confirm_operation(
        self, operation_id: str, revision: int, approved_by: str, now: float
    ) -> OperationChange:
        """The compare-and-set itself: atomic, one winner among concurrent callers."""
        ...

    def _cancel_operation(
        self, operation_id: str, summary: str, now: float
    ) -> StoredOperation | None: ...

    def _settle_operation(
        self, operation_id: str, result: OperationResult, now: float
    ) -> StoredOperation | None:
        """Record `result` if the operation is in progress; the record after, or None."""
        ...

    def _remember_answer(self, answer: RememberedAnswer, now: float) -> RememberedAnswer: ...

    def _remembered_answer(self, record_key: str, now: float) -> RememberedAnswer | None: ...


def check_proposal(operation: StoredOperation) -> None:
    """ValueError unless `operation` is a fresh proposal (the input check both backends
    share)."""
    if operation.state != "proposed" or operation.revision != 1:
        raise ValueError("a new operation is proposed at revision 1")
    if operation.confirmed_revision is not None or operation.result_summary is not None:
        raise ValueError("a new operation has no confirmation and no result")
    if not operation.summary.strip():
        raise ValueError("an operation needs a summary")
    reject_nul(
        operation_id=operation.operation_id,
        brand_id=operation.brand_id,
        client_id=operation.client_id,
        user_id=operation.user_id,
        action=operation.action,
        summary=operation.summary,
    )
