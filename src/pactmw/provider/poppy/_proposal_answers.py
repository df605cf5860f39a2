"""An app API's answer proposing a Poppy operation (Operations v1, Ops §4.1), kept under its
`Idempotency-Key` (Guides, Retries).

`PoppyOperations.proposal_answer` hands each call here. Without a key, every call proposes
(the same open action is still the same operation, OPS-4-01). With one, the first answer is
kept for the Session for the Brand's `idempotency_seconds`: a repeat of the same request
(method, path, query and the proposal its body made) gets that answer again, exactly, even
once the operation moved on; another request with the key is `409 idempotency_key_conflict`.
A refusal is not kept (the retry, once allowed, is new).
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
from pactmw.store._protocols.operations import RememberedAnswer
from pactmw.store.base import Store

__all__ = [
    "ProposalAnswers",
    "refusal_answer",
]

#: What proposes for the caller (`PoppyOperations.propose_for`); the value is the operation
#: object.
_Propose = Callable[[Any, Proposal], SubFlow]


@frozen
class ProposalAnswers:
    """The 202 answers of every Brand's API writes, with their Idempotency-Key records."""

    store: Store
    clock: Callable[[], float]
    configs: Mapping[str, OperationsConfig]
    propose: _Propose

    def answer(self, caller: Any, proposal: Proposal) -> SubFlow:
        """The answer proposing `proposal` for `caller` (a `PoppyCaller`), kept under its
        Idempotency-Key when it has one; the value is a `JsonAnswer`."""
        key = caller.idempotency_key
        config = self.configs.get(caller.brand_id)
        if key is None or config is None:
            return (yield from self._fresh(caller, proposal))
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
            answer: JsonAnswer = yield from self._fresh(caller, proposal)
            if not 200 <= answer.status < 300:
                return answer
            now = self.clock()
            fresh = RememberedAnswer(
                record_key=record_key,
                fingerprint=fingerprint,
                status=answer.status,
                body=json_dumps(dict(answer.body)).decode(),
                expires_at=now + config.idempotency_seconds,
            )
            kept = yield NeedStore(self.store.remember_answer, {"answer": fresh, "now": now})
        if kept.fingerprint != fingerprint:
            refused = PoppyError(
                409, "idempotency_key_conflict", "the key came with another request"
            )
            return refusal_answer(refused)
        return JsonAnswer(kept.status, json_loads(kept.body), dict(NO_STORE))

    def _fresh(self, caller: Any, proposal: Proposal) -> SubFlow:
        """Propose now: `202 {"operation"}`, or the refusal as an answer."""
        try:
            document = yield from self.propose(caller, proposal)
        except PoppyError as refused:
            return refusal_answer(refused)
        return JsonAnswer(202, {"operation": document}, dict(NO_STORE))


def refusal_answer(refused: PoppyError) -> JsonAnswer:
    """A Poppy refusal as Brand code returns it (its `WWW-Authenticate` challenge kept; the
    framework sets the length)."""
    response = poppy_response(refused)
    headers = {k: v for k, v in response.headers if k.lower() != "content-length"}
    return JsonAnswer(refused.status, json_loads(response.body), headers)
