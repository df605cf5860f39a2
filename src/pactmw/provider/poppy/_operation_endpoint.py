"""The operations endpoint of Poppy Operations v1: `GET O/{id}`, `POST O/{id}/confirm` and
`POST O/{id}/cancel` for the operation's owner, and the operation object they answer with.

A confirmation that wins the store's compare-and-set performs, through the action's
executor, once (OPS-6-02); `_operations` (`PoppyOperations`) proposes and says which
executor performs an action.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal, cast

from attrs import field, frozen

from pactmw.core.encoding import json_loads
from pactmw.core.http import Request, Response
from pactmw.protocols.poppy import PoppyError, parse_confirmation, parse_id
from pactmw.provider.delegated._responses import NO_STORE, json_response
from pactmw.provider.flow import Flow, NeedStore, SubFlow, store
from pactmw.provider.poppy._bounds import bounded_body
from pactmw.provider.poppy._operation_values import (
    Executor,
    OperationFailed,
    OperationRun,
    OutcomeUnknown,
    Performed,
    json_text,
)
from pactmw.provider.poppy._resource_routes import resource_route
from pactmw.store._protocols.operations import StoredOperation
from pactmw.store.base import Store

logger = logging.getLogger("pactmw.poppy")

__all__ = [
    "BODY_LIMIT",
    "CANCELLED_SUMMARY",
    "EXPIRED_SUMMARY",
    "RETRY_AFTER_SECONDS",
    "OperationEndpoint",
    "OperationRequest",
    "operation_document",
    "operation_route",
]

#: What `Retry-After` says while an operation is in progress (the SDK's company: 5 s).
RETRY_AFTER_SECONDS = 5
#: A confirm or cancel body is two small members; anything near this is not one.
BODY_LIMIT = 16 * 1024
#: The result an expired proposal reads with (a final state needs one).
EXPIRED_SUMMARY = "This proposal expired before it was confirmed; nothing was done."
CANCELLED_SUMMARY = "Cancelled before anything was done."

OperationRequest = Literal["read", "confirm", "cancel"]
#: The requests on one operation, by (action below `O/{id}`, method).
_ACTIONS: dict[tuple[str, str], OperationRequest] = {
    ("", "GET"): "read",
    ("confirm", "POST"): "confirm",
    ("cancel", "POST"): "cancel",
}


def operation_route(method: str, rest: str) -> tuple[OperationRequest, str] | None:
    """The request of `rest` (the path below `{issuer}/operations`) and its operation id;
    None for anything else."""
    return resource_route(method, rest, _ACTIONS)


def _time_text(now: float) -> str:
    return (
        datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def operation_document(operation: StoredOperation, now: float) -> dict[str, Any]:
    """The operation object of Ops §3 at `now` (absent optional members left out)."""
    state = operation.state_at(now)
    document: dict[str, Any] = {
        "operation_id": operation.operation_id,
        "revision": operation.revision,
        "state": state,
        "summary": operation.summary,
    }
    if operation.terms is not None:
        document["terms"] = json_loads(operation.terms)
    document["expires_at"] = _time_text(operation.expires_at)
    document["user_approval_required"] = operation.user_approval_required
    if operation.url is not None:
        document["url"] = operation.url
    document["confirmation"] = (
        None
        if operation.confirmed_at is None
        else {
            "revision": operation.confirmed_revision,
            "approved_by": operation.approved_by,
            "confirmed_at": _time_text(operation.confirmed_at),
        }
    )
    result: dict[str, Any] | None = None
    if state == "expired":
        result = {"summary": EXPIRED_SUMMARY}
    elif operation.result_summary is not None:
        result = {"summary": operation.result_summary}
        if operation.result_data is not None:
            result["data"] = json_loads(operation.result_data)
    document["result"] = result
    return document


def _run_executor(executor: Executor, run: OperationRun) -> tuple[str, str, str | None]:
    """Perform in a worker thread; the outcome as (state, summary, data JSON), where
    state `in_progress` means nobody knows yet."""
    try:
        answer = executor(run)
        if inspect.isawaitable(answer):
            answer = asyncio.run(_awaited(answer))
        if not isinstance(answer, Performed):
            raise TypeError(f"an executor returns Performed, not {type(answer).__name__}")
        return "succeeded", answer.summary, json_text(answer.data)
    except OperationFailed as failed:
        return "failed", failed.summary, json_text(failed.data)
    except OutcomeUnknown:
        return "in_progress", "", None
    except Exception:
        # Whether it happened is unknown: never call it failed (OPS-6-03).
        logger.exception("poppy operation %s: the executor raised", run.operation_id)
        return "in_progress", "", None


async def _awaited(answer: Awaitable[Performed]) -> Performed:
    return await answer


@frozen
class OperationEndpoint:
    """Answers the requests on one operation for its owner's checked Session."""

    store: Store
    clock: Callable[[], float]
    #: What performs an action for a Brand (`PoppyOperations.executor`); None: nothing.
    executor: Callable[[str, str], Executor | None]
    #: The (Brand, action) pairs of stored proposals this process could not perform,
    #: already logged: an agent retries every few seconds, the operator needs one line.
    _unperformable: set[tuple[str, str]] = field(factory=set, init=False)
    _unperformable_lock: threading.Lock = field(factory=threading.Lock, init=False)

    def flow(
        self,
        request_kind: OperationRequest,
        operation_id: str,
        caller: Any,
        request: Request,
    ) -> Flow:
        """Answer `GET O/{id}`, `POST O/{id}/confirm` or `POST O/{id}/cancel` for `caller`
        (the checked Session, a `PoppyCaller`)."""
        body = b""
        if request_kind != "read":
            body = yield from bounded_body(BODY_LIMIT, "the body")
        found = yield from self._owned(operation_id, caller)
        if request_kind == "read":
            return self._answer(found, self.clock())
        if request_kind == "cancel":
            now = self.clock()
            after = yield store(
                self.store.cancel_operation,
                operation_id=operation_id,
                summary=CANCELLED_SUMMARY,
                now=now,
            )
            return self._answer(after or found, now)
        return (yield from self._confirm(found, caller, body))

    def _owned(self, operation_id: str, caller: Any) -> SubFlow:
        """The operation if it is the caller's; else `404 operation_not_found`, the same for
        an unknown id (GUIDE-co-errors-01), or `403 sign_in_required` for a signed-out
        Session on an account's operation."""
        try:
            parse_id(operation_id, "operation id")
        except PoppyError:
            raise _not_found() from None
        found: StoredOperation | None = yield store(self.store.operation, operation_id=operation_id)
        if found is None or (found.brand_id, found.client_id, found.user_id) != (
            caller.brand_id,
            caller.client_id,
            caller.user_id,
        ):
            raise _not_found()
        if found.account is not None and caller.account is None:
            raise PoppyError(
                403,
                "sign_in_required",
                "an account's operation",
                members={"scope": " ".join(found.scopes)},
            )
        if found.account is not None and found.account != caller.account:
            raise _not_found()
        return found

    def _unperformable_once(self, found: StoredOperation) -> None:
        """Say at ERROR, once per Brand and action, that a stored proposal's action has no
        executor in this process, naming the setting, so that the operator sees why its
        confirmations answer 503 (until the proposal expires, up to 30 days)."""
        with self._unperformable_lock:
            if (found.brand_id, found.action) in self._unperformable:
                return
            self._unperformable.add((found.brand_id, found.action))
        logger.error(
            "poppy operation %s of brand %r: confirmed, but this process has no executor for "
            "its action %r (brands.%s.poppy.operations.executors, or for tool:NAME the "
            "Brand's write tool NAME), so it answers 503 with Retry-After until a process "
            "that has one performs it or the proposal expires at %s (said once per action)",
            found.operation_id,
            found.brand_id,
            found.action,
            found.brand_id,
            datetime.fromtimestamp(found.expires_at, UTC).isoformat(timespec="seconds"),
        )

    def _confirm(self, found: StoredOperation, caller: Any, body: bytes) -> Flow:
        confirmation = parse_confirmation(body)
        now = self.clock()
        if found.state_at(now) == "proposed" and confirmation.revision == found.revision:
            if found.user_approval_required and confirmation.approved_by != "user":
                raise PoppyError(403, "user_approval_required", "the user must approve it")
            wanted = " ".join(found.scopes)
            if found.scopes and caller.account is None:
                raise PoppyError(403, "sign_in_required", "signed out", members={"scope": wanted})
            if not set(found.scopes) <= set(caller.scopes):
                raise PoppyError(
                    403, "insufficient_scope", "not approved", members={"scope": wanted}
                )
        executor = self.executor(found.brand_id, found.action)
        if executor is None and found.state_at(now) == "proposed":
            # Confirming what nobody can perform would strand it in progress. A 503, not a
            # final answer: the executors are fixed per process, and during a rolling
            # deploy another replica may have this one (a proposal from an earlier deploy
            # whose action was renamed or removed, or from the next one).
            self._unperformable_once(found)
            raise PoppyError(
                503,
                "temporarily_unavailable",
                f"no executor for {found.action!r}",
                headers=(("Retry-After", str(RETRY_AFTER_SECONDS)),),
            )
        change = yield store(
            self.store.confirm_operation,
            operation_id=found.operation_id,
            revision=confirmation.revision,
            approved_by=confirmation.approved_by,
            now=now,
        )
        current: StoredOperation = change.operation or found
        if change.kind == "terms_changed":
            raise PoppyError(
                409,
                "terms_changed",
                "a newer revision",
                members={"operation": operation_document(current, now)},
            )
        if change.kind != "confirmed" or executor is None:
            return self._answer(current, now)
        # This confirmation won the compare-and-set: it alone performs (OPS-6-02).
        state, summary, data = yield NeedStore(
            _run_executor,
            {
                "executor": executor,
                "run": OperationRun(
                    operation_id=current.operation_id,
                    brand_id=current.brand_id,
                    action=current.action,
                    revision=current.revision,
                    summary=current.summary,
                    terms=None if current.terms is None else json_loads(current.terms),
                    account=current.account,
                    client_id=current.client_id,
                    user_id=current.user_id,
                    approved_by=confirmation.approved_by,
                ),
            },
        )
        now = self.clock()
        if state != "in_progress":
            settled = yield store(
                self.store.settle_operation,
                operation_id=current.operation_id,
                state=cast(Literal["succeeded", "failed"], state),
                summary=summary,
                data=data,
                now=now,
            )
            current = settled or current
        return self._answer(current, now)

    @staticmethod
    def _answer(operation: StoredOperation, now: float) -> Response:
        extra: tuple[tuple[str, str], ...] = NO_STORE
        if operation.state_at(now) == "in_progress":
            extra += (("Retry-After", str(RETRY_AFTER_SECONDS)),)
        return json_response(operation_document(operation, now), extra=extra)


def _not_found() -> PoppyError:
    return PoppyError(404, "operation_not_found", "no such operation of this owner")
