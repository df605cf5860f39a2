"""Poppy operations (Operations extension v1): proposals a Brand's code makes and the
personal agent confirms, performed at most once.

A Brand enables them with `PoppyConfig.operations` (`OperationsConfig`): one executor per
action. Then its poppy.json lists `extensions.operations` with the endpoint
`O = {issuer}/operations`, and for an agent whose client metadata lists
`extensions.operations.version "1"` (OPS-2-01):

- Brand code proposes instead of performing: `PoppyOperations.propose` (through
  `Provider.poppy_propose` in an API behind `poppy_session_required`: `202 {"operation"}`;
  or a bot's `Reply(operation=...)` in a conversation). Proposing never performs (OPS-3-03);
  the same open action proposed again, through any channel, is the same operation
  (OPS-4-01). An agent that did not negotiate the extension is told `403
  extension_required` (at an API).
- `GET O/{id}` reads it (`Retry-After` while in progress, OPS-6-01); past `expires_at` a
  proposal reads `expired`.
- `POST O/{id}/confirm` `{revision, approved_by}`: only the latest revision (`409
  terms_changed` with the current operation, OPS-3.1-01); `approved_by:
  "standing_permission"` on an operation that needs the user is `403
  user_approval_required`; the operation's scopes are needed (`403 insufficient_scope`).
  The store's compare-and-set `proposed -> in_progress` picks the one confirmation that
  performs (OPS-6-02): it runs the action's executor with the operation id as its
  idempotency key (GUIDE-ops-co-01) and records the outcome; any other confirmation gets
  the record as it is, `200`. An executor that cannot tell the outcome (`OutcomeUnknown`,
  or any other exception) leaves it `in_progress`, never `failed` (OPS-6-03), until Brand
  code settles it (`PoppyOperations.settle`).
- `POST O/{id}/cancel` cancels a proposal; one in progress stays in progress.

An operation belongs to its Brand, agent and User ID, and once proposed signed in, to that
account: another owner's operation is `404 operation_not_found`, as an unknown one, and a
signed-out Session on an account's operation gets `403 sign_in_required`.

An API's `202` answer and its `Idempotency-Key` record are `_proposal_answers`'; the
endpoint (`O/{id}`: read, confirm and perform, cancel) is `_operation_endpoint`'; the values
Brand code uses are `_operation_values`'.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from attrs import frozen

from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.encoding import json_dumps
from pactmw.core.errors import PactmwError
from pactmw.protocols.poppy import OPERATIONS_EXTENSION, OPERATIONS_VERSION, PoppyError
from pactmw.provider.flow import NeedKeys, NeedStore, SubFlow
from pactmw.provider.poppy._operation_endpoint import OperationEndpoint, operation_document
from pactmw.provider.poppy._operation_values import (
    Executor,
    OperationFailed,
    OperationRun,
    OperationsConfig,
    Performed,
    Proposal,
    json_text,
)
from pactmw.provider.poppy._proposal_answers import ProposalAnswers
from pactmw.provider.tools import Tool, ToolError, ToolRegistry
from pactmw.provider.turn_tools import tool_call_summary
from pactmw.store._protocols.operations import StoredOperation
from pactmw.store.base import Store

logger = logging.getLogger("pactmw.poppy")

__all__ = [
    "IDEMPOTENCY_KEY",
    "OPERATIONS_SEGMENT",
    "OPERATION_PREFIX",
    "TOOL_ACTION_PREFIX",
    "WRITE_METHODS",
    "PoppyOperations",
    "ProposalWithoutExecutor",
    "tool_proposal",
]

#: Where a Brand's operations endpoint sits below its issuer (Ops §5).
OPERATIONS_SEGMENT = "operations"
OPERATION_PREFIX = "op_"
#: The action of an operation a `write=True` tool proposed: the prefix and the tool's name.
TOOL_ACTION_PREFIX = "tool:"
#: The methods whose `Idempotency-Key` is honoured, and what a key may be (the SDK's).
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")


class ProposalWithoutExecutor(PactmwError, ValueError):
    """Brand code proposed an action its Brand registered no executor for (a mistake in that
    code: the executors are fixed at startup, so no retry of the request can succeed)."""

    def __init__(self, brand_id: str, action: str) -> None:
        super().__init__(f"brands.{brand_id}.poppy.operations.executors has no action {action!r}")
        self.brand_id = brand_id
        self.action = action


def tool_proposal(tool: Tool, arguments: Mapping[str, Any]) -> Proposal:
    """The operation a `write=True` account tool's checked call proposes instead of running:
    every argument in the summary and the terms, the tool's scope to confirm it."""
    return Proposal(
        action=TOOL_ACTION_PREFIX + tool.name,
        summary=tool_call_summary(tool, arguments),
        terms=arguments,
        scopes=() if tool.scope is None else (tool.scope,),
    )


def _perform_tool(tool: Tool, run: OperationRun) -> Performed:
    """A confirmed tool call: the tool runs for the operation's account, once."""
    arguments = dict(run.terms or {})
    try:
        result = tool.function(run.account, **arguments)
    except ToolError as refused:  # a ToolError means nothing was changed
        raise OperationFailed(f"{tool.title}: {refused.message}") from refused
    worded = tool.summarize(arguments, result)
    summary = f"{worded.title}: {worded.detail}" if worded.detail else worded.title
    try:
        json_dumps(result)
    except (TypeError, ValueError):
        return Performed(summary)
    return Performed(summary, {"result": result})


class PoppyOperations:
    """The operations of every Brand that enables them; the Poppy server builds it."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Callable[[], float],
        clients: ClientMetadataCache,
        configs: Mapping[str, OperationsConfig],
        tools: Mapping[str, ToolRegistry] | None = None,
    ) -> None:
        self.store = store
        self._clock = clock
        self._clients = clients
        self.configs = dict(configs)
        #: The Brands' tools: a `write=True` account tool is the executor of its proposals.
        self._tools = dict(tools or {})
        self._answers = ProposalAnswers(
            store=store,
            clock=clock,
            configs=self.configs,
            prepare=self.record_for,
            document=operation_document,
        )
        #: `GET O/{id}`, confirm and cancel (the Poppy server routes them here).
        self.endpoint = OperationEndpoint(store=store, clock=clock, executor=self.executor)

    def executor(self, brand_id: str, action: str) -> Executor | None:
        """What performs `action` for the Brand: its configured executor, or for a
        `tool:NAME` action the Brand's write tool NAME; None when nothing does."""
        config = self.configs.get(brand_id)
        if config is None:
            return None
        if action in config.executors:
            return config.executors[action]
        if action.startswith(TOOL_ACTION_PREFIX):
            name = action[len(TOOL_ACTION_PREFIX) :]
            for tool in self._tools.get(brand_id, ()):
                if tool.name == name and tool.write and tool.scope is not None:
                    return partial(_perform_tool, tool)
        return None

    # -- proposing (Brand code: an API, a bot) ------------------------------------------------

    def negotiated(self, client_id: str) -> SubFlow:
        """Whether the agent's client metadata lists Operations v1 (OPS-2-01); its document
        is the one its Session's assertions were verified with (cached)."""
        try:
            metadata = yield NeedKeys(partial(self._clients.get, client_id))
        except PactmwError as exc:
            # Not verifiable now (its document moved or its host is down): no operation
            # reaches an agent that cannot be shown to have asked for them.
            logger.warning("poppy agent %s: metadata unavailable: %s", client_id, exc)
            return False
        extension = metadata.extensions.get(OPERATIONS_EXTENSION)
        return isinstance(extension, Mapping) and extension.get("version") == OPERATIONS_VERSION

    def propose(
        self,
        *,
        brand_id: str,
        client_id: str,
        user_id: str,
        account: str | None,
        proposal: Proposal,
    ) -> SubFlow:
        """Store `proposal` for this owner (or find the same open action); the value is the
        operation object. `403 extension_required` when the agent did not negotiate
        Operations v1; ValueError when the Brand enables no operations, and its
        `ProposalWithoutExecutor` when it has no executor for the action (a mistake in
        Brand code, not in the request)."""
        return self.propose_for(_Owner(brand_id, client_id, user_id, account), proposal)

    def proposal_record(
        self,
        *,
        brand_id: str,
        client_id: str,
        user_id: str,
        account: str | None,
        proposal: Proposal,
    ) -> SubFlow:
        """The new record `propose` stores (after its checks, which it raises); the value is
        a `StoredOperation` proposed now."""
        return self.record_for(_Owner(brand_id, client_id, user_id, account), proposal)

    def propose_for(self, owner: Any, proposal: Proposal) -> SubFlow:
        """`propose` for the owner a checked Session names (a `PoppyCaller` at an API, the
        conversation's agent in a bot's turn)."""
        record: StoredOperation = yield from self.record_for(owner, proposal)
        now = record.created_at
        # NeedStore itself: `store()`'s own first parameter is named `operation`.
        stored = yield NeedStore(self.store.propose_operation, {"operation": record, "now": now})
        return operation_document(stored, now)

    def record_for(self, owner: Any, proposal: Proposal) -> SubFlow:
        """`proposal_record` for the owner a checked Session names: anything with its
        `brand_id`, `client_id`, `user_id` and `account`."""
        brand_id, client_id = owner.brand_id, owner.client_id
        user_id, account = owner.user_id, owner.account
        config = self.configs.get(brand_id)
        if config is None:
            raise ValueError(f"brands.{brand_id}.poppy.operations is not set")
        if self.executor(brand_id, proposal.action) is None:
            # Unlike the SDK's reference company, which proposes any action and leaves one
            # nobody performs `in_progress` for ever once confirmed: never offer the person
            # what cannot be done.
            raise ProposalWithoutExecutor(brand_id, proposal.action)
        if not (yield from self.negotiated(client_id)):
            raise PoppyError(
                403,
                "extension_required",
                "the agent does not list Operations v1",
                members={"extension": OPERATIONS_EXTENSION},
            )
        now = self._clock()
        terms = json_text(proposal.terms)
        # One open operation per (owner, account, action, summary, terms): OPS-4-01.
        key = json_dumps(
            [brand_id, client_id, user_id, account, proposal.action, proposal.summary, terms]
        )
        return StoredOperation(
            operation_id=OPERATION_PREFIX + secrets.token_urlsafe(18),
            brand_id=brand_id,
            client_id=client_id,
            user_id=user_id,
            account=account,
            action=proposal.action,
            revision=1,
            state="proposed",
            summary=proposal.summary,
            terms=terms,
            scopes=proposal.scopes,
            user_approval_required=proposal.user_approval_required,
            url=proposal.url,
            open_key=hashlib.sha256(key).hexdigest(),
            created_at=now,
            updated_at=now,
            expires_at=now + config.proposal_seconds,
        )

    def proposal_answer(self, caller: Any, proposal: Proposal) -> SubFlow:
        """An API's answer proposing `proposal` for `caller` (a `PoppyCaller`): `202
        {"operation": {...}}` (Ops §4.1), or the refusal (`403 extension_required` with its
        `WWW-Authenticate` challenge); the value is a `JsonAnswer`.

        With an `Idempotency-Key` (Guides, Retries) the answer is kept for the Session for
        `idempotency_seconds`: a repeat of the same request (method, path, query and the
        proposal its body made) gets the first answer again, exactly, even once the
        operation moved on; another request with the key is `409 idempotency_key_conflict`,
        and a repeat while the first is under way `503 temporarily_unavailable`. A refusal
        is not kept (the retry, once allowed, is new)."""
        return self._answers.answer(caller, proposal)

    def settle(self, operation_id: str, outcome: Performed | OperationFailed) -> dict[str, Any]:
        """Record the outcome of an operation left in progress (its executor could not tell);
        the operation object after. KeyError for an unknown id. Blocking."""
        now = self._clock()
        failed = isinstance(outcome, OperationFailed)
        settled = self.store.settle_operation(
            operation_id=operation_id,
            state="failed" if failed else "succeeded",
            summary=outcome.summary,
            data=json_text(outcome.data),
            now=now,
        )
        if settled is None:
            raise KeyError(operation_id)
        return operation_document(settled, now)


@frozen
class _Owner:
    """Whose operation a proposal made through the keyword API (`propose`) is."""

    brand_id: str
    client_id: str
    user_id: str
    account: str | None
