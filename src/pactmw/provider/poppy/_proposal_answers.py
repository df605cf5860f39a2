"""An app API's answer proposing a Poppy operation (Operations v1, Ops §4.1), kept under its
`Idempotency-Key` (Guides, Retries).

`PoppyOperations.proposal_answer` hands each call here. Without a key, every call proposes
(the same open action is still the same operation, OPS-4-01). With one, the first answer is
kept for the Session for the Brand's `idempotency_seconds`: a repeat of the same request
(method, path, query and the proposal its body made) gets that answer again, exactly, even
once the operation moved on; another request with the key is `409 idempotency_key_conflict`.
A refusal is not kept (the retry, once allowed, is new).

The key is held in the store in the proposal's own transaction (`propose_operation_once`),
so of requests with one key in flight at once exactly one proposes. A repeat arriving while
the first is under way is told `503 temporarily_unavailable` with `Retry-After: 1`, as the
SDK's reference company does: the agent retries, with the same key, and gets the answer. A
hold whose request never answered (its process died) lapses after `HOLD_SECONDS`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from pactmw.core.encoding import json_dumps, json_loads
from pactmw.protocols.poppy import PoppyError, poppy_response
from pactmw.provider.delegated._responses import NO_STORE
from pactmw.provider.flow import NeedStore, SubFlow, store
from pactmw.provider.poppy._operation_values import (
    JsonAnswer,
    OperationsConfig,
    Proposal,
    json_text,
)
from pactmw.store._protocols.operations import (
    HELD_STATUS,
    KeyedProposal,
    RememberedAnswer,
    StoredOperation,
)
from pactmw.store.base import Store

__all__ = [
    "HOLD_SECONDS",
    "ProposalAnswers",
    "refusal_answer",
]

#: What prepares the caller's proposal (`PoppyOperations.record_for`): its checks, then the
#: value is the `StoredOperation` to store.
_Prepare = Callable[[Any, Proposal], SubFlow]
#: The operation object of a stored operation at a time (`operation_document`).
_Document = Callable[[StoredOperation, float], dict[str, Any]]
#: How long a request holds its key before it answers (the SDK's company: a minute): a repeat
#: meanwhile waits; a holder that never answered lets it go then.
HOLD_SECONDS = 60.0
#: What a repeat arriving while the first request is under way is told to wait.
_IN_FLIGHT_RETRY_AFTER = "1"


@frozen
class ProposalAnswers:
    """The 202 answers of every Brand's API writes, with their Idempotency-Key records."""

    store: Store
    clock: Callable[[], float]
    configs: Mapping[str, OperationsConfig]
    prepare: _Prepare
    document: _Document

    def answer(self, caller: Any, proposal: Proposal) -> SubFlow:
        """The answer proposing `proposal` for `caller` (a `PoppyCaller`), kept under its
        Idempotency-Key when it has one; the value is a `JsonAnswer`."""
        key = caller.idempotency_key
        config = self.configs.get(caller.brand_id)
        if key is None or config is None:
            try:
                record = yield from self.prepare(caller, proposal)
            except PoppyError as refused:
                return refusal_answer(refused)
            now = record.created_at
            stored = yield NeedStore(
                self.store.propose_operation, {"operation": record, "now": now}
            )
            return self._accepted(stored, now)
        record_key = hashlib.sha256(f"{caller.session_id}\n{key}".encode()).hexdigest()
        fingerprint = json_dumps(
            [
                caller.request_line,
                proposal.action,
                proposal.summary,
                json_text(proposal.terms),
                list(proposal.scopes),
                proposal.user_approval_required,
                proposal.url,
            ]
        ).decode()
        kept = yield store(self.store.remembered_answer, record_key=record_key, now=self.clock())
        if kept is None:
            try:
                record = yield from self.prepare(caller, proposal)
            except PoppyError as refused:
                return refusal_answer(refused)
            now = record.created_at
            hold = RememberedAnswer(
                record_key=record_key,
                fingerprint=fingerprint,
                status=HELD_STATUS,
                body="",
                expires_at=now + HOLD_SECONDS,
            )
            keyed: KeyedProposal = yield NeedStore(
                self.store.propose_operation_once, {"operation": record, "hold": hold, "now": now}
            )
            kept = keyed.kept
            if keyed.operation is not None:
                answer = self._accepted(keyed.operation, now)
                fresh = RememberedAnswer(
                    record_key=record_key,
                    fingerprint=fingerprint,
                    status=answer.status,
                    body=json_dumps(dict(answer.body)).decode(),
                    expires_at=now + config.idempotency_seconds,
                )
                kept = yield NeedStore(
                    self.store.remember_answer, {"answer": fresh, "now": self.clock()}
                )
        assert kept is not None
        if kept.fingerprint != fingerprint:
            conflict = PoppyError(
                409, "idempotency_key_conflict", "the key came with another request"
            )
            return refusal_answer(conflict)
        if kept.held:
            # The first request with the key is still under way: its answer is to come.
            busy = PoppyError(
                503,
                "temporarily_unavailable",
                "a request with this Idempotency-Key is under way",
                headers=(("Retry-After", _IN_FLIGHT_RETRY_AFTER),),
            )
            return refusal_answer(busy)
        return JsonAnswer(kept.status, json_loads(kept.body), dict(NO_STORE))

    def _accepted(self, operation: StoredOperation, now: float) -> JsonAnswer:
        """`202 {"operation"}` (Ops §4.1)."""
        return JsonAnswer(202, {"operation": self.document(operation, now)}, dict(NO_STORE))


def refusal_answer(refused: PoppyError) -> JsonAnswer:
    """A Poppy refusal as Brand code returns it (its `WWW-Authenticate` challenge kept; the
    framework sets the length)."""
    response = poppy_response(refused)
    headers = {k: v for k, v in response.headers if k.lower() != "content-length"}
    return JsonAnswer(refused.status, json_loads(response.body), headers)
