"""Poppy operations of the memory store (the contract: store/_protocols/operations.py).

The records live in this mixin's own dicts (set up in `__init__`), behind the store's one
lock like every other concern's.
"""

from __future__ import annotations

from attrs import evolve

from pactmw.store._memory.core import MemoryCore
from pactmw.store._protocols.operations import (
    FINAL_STATES,
    KeyedProposal,
    OperationChange,
    OperationResult,
    RememberedAnswer,
    StoredOperation,
    decide_confirmation,
)

__all__ = ["OperationsMixin"]


class OperationsMixin(MemoryCore):
    """The operation records, by id, and the open ones by `open_key` (their dicts are
    `MemoryCore`'s, as every concern's state, so that the cleanup reaches them)."""

    def _put_operation(self, operation: StoredOperation) -> StoredOperation:
        # Called with the lock held; a record that leaves the open states frees its key.
        key = operation.open_key
        if key is not None and operation.state in FINAL_STATES:
            self._open_operations.pop(key, None)
            operation = evolve(operation, open_key=None)
        self._operations[operation.operation_id] = operation
        return operation

    def _propose_operation(self, operation: StoredOperation, now: float) -> StoredOperation:
        with self._open:
            return self._insert_proposal(operation, now)

    def _insert_proposal(self, operation: StoredOperation, now: float) -> StoredOperation:
        # Called with the lock held.
        key = operation.open_key
        if key is not None and key in self._open_operations:
            existing = self._operations[self._open_operations[key]]
            if existing.is_open(now):
                return existing
            # An expired proposal frees its key (the SQL stores do the same).
            del self._open_operations[key]
            self._operations[existing.operation_id] = evolve(existing, open_key=None)
        if operation.operation_id in self._operations:
            raise ValueError("operation id is already stored")
        if key is not None:
            self._open_operations[key] = operation.operation_id
        return self._put_operation(operation)

    def _propose_operation_once(
        self, operation: StoredOperation, hold: RememberedAnswer, now: float
    ) -> KeyedProposal:
        with self._open:
            kept = self._live_answer(hold.record_key, now)
            if kept is not None:
                return KeyedProposal(kept=kept)
            stored = self._insert_proposal(operation, now)
            # Held only once proposed: a proposal that raised holds nothing.
            self._answers[hold.record_key] = hold
            return KeyedProposal(operation=stored)

    def _operation(self, operation_id: str) -> StoredOperation | None:
        with self._open:
            return self._operations.get(operation_id)

    def _revise_operation(
        self, operation_id: str, summary: str, terms: str | None, expires_at: float, now: float
    ) -> StoredOperation | None:
        with self._open:
            found = self._operations.get(operation_id)
            if found is None or found.state_at(now) != "proposed":
                return None
            return self._put_operation(
                evolve(
                    found,
                    revision=found.revision + 1,
                    summary=summary,
                    terms=terms,
                    expires_at=expires_at,
                    updated_at=now,
                )
            )

    def _confirm_operation(
        self, operation_id: str, revision: int, approved_by: str, now: float
    ) -> OperationChange:
        with self._open:
            found = self._operations.get(operation_id)
            kind = decide_confirmation(found, revision=revision, now=now)
            if kind != "confirmed" or found is None:
                return OperationChange(kind, found)
            return OperationChange(
                "confirmed",
                self._put_operation(
                    evolve(
                        found,
                        state="in_progress",
                        confirmed_revision=revision,
                        approved_by=approved_by,
                        confirmed_at=now,
                        updated_at=now,
                    )
                ),
            )

    def _cancel_operation(
        self, operation_id: str, summary: str, now: float
    ) -> StoredOperation | None:
        with self._open:
            found = self._operations.get(operation_id)
            if found is None or found.state_at(now) != "proposed":
                return found
            return self._put_operation(
                evolve(found, state="cancelled", result_summary=summary, updated_at=now)
            )

    def _settle_operation(
        self, operation_id: str, result: OperationResult, now: float
    ) -> StoredOperation | None:
        with self._open:
            found = self._operations.get(operation_id)
            if found is None or found.state != "in_progress":
                return found
            return self._put_operation(
                evolve(
                    found,
                    state=result.state,
                    result_summary=result.summary,
                    result_data=result.data,
                    updated_at=now,
                )
            )

    def _remember_answer(self, answer: RememberedAnswer, now: float) -> RememberedAnswer:
        with self._open:
            kept = self._live_answer(answer.record_key, now)
            answers_hold = kept is not None and kept.held and kept.fingerprint == answer.fingerprint
            if kept is not None and not answers_hold:
                return kept
            self._answers[answer.record_key] = answer
            return answer

    def _remembered_answer(self, record_key: str, now: float) -> RememberedAnswer | None:
        with self._open:
            return self._live_answer(record_key, now)

    def _live_answer(self, record_key: str, now: float) -> RememberedAnswer | None:
        # Called with the lock held. A record holds until its `expires_at` (the SQL stores'
        # `expires_at > ?`); past it, the key is free as if nothing were kept.
        kept = self._answers.get(record_key)
        return kept if kept is not None and kept.expires_at > now else None
