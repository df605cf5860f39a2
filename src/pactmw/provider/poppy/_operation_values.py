"""The values Brand code uses with Poppy Operations v1 (docs/poppy.md): what it proposes
(`Proposal`), what an executor gets (`OperationRun`) and answers (`Performed`, or raises
`OperationFailed` / `OutcomeUnknown`), a Brand's settings (`OperationsConfig`) and the
framework-neutral answer of the 202 helper (`JsonAnswer`). The rules are
provider/poppy/_operations.py's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from attrs import field, frozen

from pactmw.core.encoding import json_dumps
from pactmw.core.errors import PactmwError

__all__ = [
    "DEFAULT_IDEMPOTENCY_SECONDS",
    "DEFAULT_PROPOSAL_SECONDS",
    "Executor",
    "JsonAnswer",
    "OperationFailed",
    "OperationRun",
    "OperationsConfig",
    "OutcomeUnknown",
    "Performed",
    "Proposal",
    "json_text",
]

#: How long a proposal waits for its confirmation unless the Brand says otherwise.
DEFAULT_PROPOSAL_SECONDS = 900.0
#: How long an API write's answer is kept under its Idempotency-Key (Guides: "a day").
DEFAULT_IDEMPOTENCY_SECONDS = 86_400.0


def json_text(value: Mapping[str, Any] | None) -> str | None:
    """Terms or outcome data as the store keeps them (JSON text; None stays None)."""
    return None if value is None else json_dumps(dict(value)).decode()


def _frozen_terms(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else MappingProxyType(dict(value))


def _scopes(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("scopes must be a sequence of scope strings, not a string")
    return tuple(value)


@frozen
class Proposal:
    """What Brand code proposes instead of performing (Ops §3).

    `action` names the executor that performs it; `summary` says everything that affects
    the action, in the person's words (OPS-3-01), and `terms` the same as data (JSON
    values); `scopes` are what confirming needs; `user_approval_required` (default) means
    a standing permission cannot confirm it; `url` is an https page about it. The same
    action, summary and terms proposed again while the first is open are one operation.
    """

    action: str
    summary: str
    terms: Mapping[str, Any] | None = field(default=None, converter=_frozen_terms)
    scopes: tuple[str, ...] = field(default=(), converter=_scopes)
    user_approval_required: bool = True
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.action or not self.summary.strip():
            raise ValueError("a Proposal needs an action and a summary")
        if self.url is not None and not self.url.startswith("https://"):
            raise ValueError("a Proposal's url must be https (PAP-3-05)")


@frozen
class OperationRun:
    """What an executor performs: the confirmed revision of one operation.
    `operation_id` is the idempotency key to pass downstream (GUIDE-ops-co-01): a
    retried executor must not do the action twice."""

    operation_id: str
    brand_id: str
    action: str
    revision: int
    summary: str
    terms: Mapping[str, Any] | None
    account: str | None
    client_id: str
    user_id: str
    approved_by: str


@frozen
class Performed:
    """A succeeded operation's result: `summary` says what changed (OPS-6-05)."""

    summary: str
    data: Mapping[str, Any] | None = None


class OperationFailed(PactmwError):
    """Raise from an executor when the action failed: `summary` says what changed anyway
    (partial changes too, OPS-6-05)."""

    def __init__(self, summary: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.data = data


class OutcomeUnknown(PactmwError):
    """Raise from an executor that cannot tell whether the action happened (a timeout
    downstream): the operation stays `in_progress` until `PoppyOperations.settle`."""


Executor = Callable[[OperationRun], "Performed | Awaitable[Performed]"]


def _executors(value: Mapping[str, Executor]) -> Mapping[str, Executor]:
    return MappingProxyType(dict(value))


@frozen
class OperationsConfig:
    """A Brand's Operations v1 settings (`[brands.ID.poppy.operations]`).

    `executors` maps each action Brand code may propose to the callable that performs it
    (sync, or async: it runs in a worker thread either way); `proposal_seconds` is how long
    a proposal waits for its confirmation; `idempotency_seconds` how long an API write's
    answer is kept under its `Idempotency-Key` (a day, as the Guides suggest).
    """

    executors: Mapping[str, Executor] = field(converter=_executors)
    proposal_seconds: float = DEFAULT_PROPOSAL_SECONDS
    idempotency_seconds: float = DEFAULT_IDEMPOTENCY_SECONDS

    def __attrs_post_init__(self) -> None:
        if not self.executors:
            raise ValueError("executors must name at least one action")
        if not all(isinstance(action, str) for action in self.executors):
            raise ValueError("executors' action names must be strings")
        if "" in self.executors:
            # No Proposal has an empty action (`Proposal` refuses one), so this executor
            # could never run: a mistake in the settings, told where it is made.
            raise ValueError(
                "executors has an empty action name: name each executor by the action "
                "Brand code proposes (Proposal.action)"
            )
        if not all(callable(e) for e in self.executors.values()):
            raise ValueError("executors must be callables")
        if (
            isinstance(self.proposal_seconds, bool)
            or not isinstance(self.proposal_seconds, (int, float))
            or not 0 < self.proposal_seconds <= 30 * 86_400
        ):
            raise ValueError("proposal_seconds must be a number of seconds up to 30 days")
        if (
            isinstance(self.idempotency_seconds, bool)
            or not isinstance(self.idempotency_seconds, (int, float))
            or not 0 < self.idempotency_seconds <= 30 * 86_400
        ):
            raise ValueError("idempotency_seconds must be a number of seconds up to 30 days")


@frozen
class JsonAnswer:
    """A framework-neutral JSON answer for Brand code to return through its framework:
    `JSONResponse(a.body, status_code=a.status, headers=dict(a.headers))` (Starlette),
    `(jsonify(a.body), a.status, dict(a.headers))` (Flask), `JsonResponse(a.body,
    status=a.status, headers=a.headers)` (Django)."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(factory=dict)
