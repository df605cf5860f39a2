"""Poppy conversations with the company's agent (§7): the same bot as PACT's `message:send`.

Routes, under a Brand's issuer (`{issuer}/conversations` is `E`, published in poppy.json):

- `POST E` `{message}`: start a conversation with its first message (`201` receipt);
- `POST E/{id}/messages` `{message}`: one more message (`202` receipt);
- `GET E/{id}/events?cursor=`: a page of events (`200`), at most `PAGE_SIZE`;
- `POST E/{id}/close`: close it (`200`); its events stay readable.

Every request is checked as an app API call is (`PoppyServer.session_flow`): a live Session
Token of this Brand with a DPoP proof for this method and URL, spent in the store. A
conversation belongs to one Brand, one personal agent (`client_id`) and one User ID; once a
signed-in Session used it, to that account too (`bind_account`): another owner's
conversation is `404 conversation_not_found`, exactly as an unknown one (PAP-7.2-01), and a
signed-out Session on an account's conversation is `403 sign_in_required`.

One bot run per message: the message is claimed in the store under its Poppy id (the same
`start_conversation`/`claim_turn`/`store_reply`/`release_claim` as `message:send`, with
the same lease renewal), so a retried message is answered from the store and the bot runs
once across processes. The first message's conversation id is derived from its owner and the
message id, so a retried `POST E` finds the conversation it made. The stored reply is the
turn's record (`TurnRecord`): the agent's message as received and the company's events, so
reads rebuild the event log from the store and a retry with other content is told
`409 message_id_conflict` (a first message's, by any Session of its User: the id is the
User's, PAP-7.3-01). Being the User's, an id is also held by one conversation only
(`ConversationTurns.claim_message_id`): sent to another, it is `409 message_id_conflict`
too, unless its handling failed (`ConversationTurns.holding_message_id`). The bot runs
while `POST` waits, so its answer is in the events when the receipt arrives.

A bot that needs a scope (`StepUpRequired`, or a tool the Session's scopes do not cover)
answers with an `authorization` event (`sign_in_required` while signed out,
`insufficient_scope` otherwise, naming the scopes) and a company message saying so
(PAP-7.11-01); after sign-in the agent sends again in the same conversation.

The ids, the turn's record and the wire shapes are in `_conversation_records`; one message's
turn (claim, bot, stored events) in `_conversation_turns`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, ParamSpec
from urllib.parse import parse_qsl

from pactmw.core.http import Request
from pactmw.protocols.poppy import (
    InboundMessage,
    PoppyError,
    parse_conversation_start,
    parse_message_post,
)
from pactmw.provider._claims import leaving_nothing
from pactmw.provider._send import MessageSender
from pactmw.provider.brand import Brand
from pactmw.provider.delegated._responses import NO_STORE, json_response
from pactmw.provider.flow import Flow, SubFlow, store
from pactmw.provider.poppy._bounds import bounded_body
from pactmw.provider.poppy._conversation_records import (
    CONVERSATION_PREFIX,
    Receipt,
    TurnRecord,
    conversation_state,
    derived_context_id,
    public_id,
    store_context_id,
)
from pactmw.provider.poppy._conversation_turns import ConversationTurns
from pactmw.provider.poppy._operations import PoppyOperations
from pactmw.provider.poppy._resource_routes import resource_route
from pactmw.provider.poppy._session_check import PoppyCaller
from pactmw.store.base import Claim, Conversation, NotFound, Owner, Store

#: Events per page (the SDK's company uses the same).
PAGE_SIZE = 50
#: The answered turns a read considers: a longer conversation's later turns are not read.
MAX_TURNS = 1000
#: A message body's limit (1 MiB, `413 request_too_large` beyond, as the SDK's company).
BODY_LIMIT = 1 << 20
#: What the conversation's `issuer` column holds for a Poppy agent: never a PACT issuer, so
#: a PACT agent's and a Poppy agent's conversations never mix even for one vendor URL.
OWNER_PREFIX = "poppy "
_CURSOR = re.compile(r"cur_(0|[1-9][0-9]{0,8})")

ConversationOperation = Literal["create", "send", "events", "close"]
#: The operations on one conversation, by (action below `E/{id}`, method).
_ACTIONS: dict[tuple[str, str], ConversationOperation] = {
    ("messages", "POST"): "send",
    ("events", "GET"): "events",
    ("close", "POST"): "close",
}

__all__ = [
    "BODY_LIMIT",
    "CONVERSATION_PREFIX",
    "MAX_TURNS",
    "OWNER_PREFIX",
    "PAGE_SIZE",
    "ConversationOperation",
    "PoppyConversations",
    "conversation_route",
    "poppy_owner",
]


_P = ParamSpec("_P")


def poppy_owner(client_id: str) -> str:
    """What the conversations and message ids of the Poppy agent `client_id` hold as their
    agent (`issuer`): never a PACT issuer, so the two protocols' conversations never mix."""
    return OWNER_PREFIX + client_id


def _owner(agent: PoppyCaller) -> Owner:
    """Whose the conversations `agent`'s Session starts are: its Brand, the agent
    (`poppy_owner`) and the User ID."""
    return Owner(agent.brand_id, poppy_owner(agent.client_id), agent.user_id)


def _vanished_is_not_found(operation: Callable[_P, Flow]) -> Callable[_P, Flow]:
    """`operation`, with a conversation the operator's cleanup deleted while the request
    used it (the store's `NotFound`) answered as an unknown one."""

    @functools.wraps(operation)
    def flow(*args: _P.args, **kwargs: _P.kwargs) -> Flow:
        try:
            return (yield from operation(*args, **kwargs))
        except NotFound:
            raise PoppyError(404, "conversation_not_found", "no such conversation") from None

    return flow


def conversation_route(method: str, rest: str) -> tuple[ConversationOperation, str | None] | None:
    """The conversation operation of `rest` (the path below `{issuer}/conversations`, "" for
    the endpoint itself) and its conversation id; None for anything else."""
    if rest == "":
        return ("create", None) if method == "POST" else None
    return resource_route(method, rest, _ACTIONS)


class PoppyConversations:
    """The conversation endpoints of every Poppy-enabled Brand of one Provider."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Callable[[], float],
        bots: Mapping[str, Brand],
        turns: MessageSender,
    ) -> None:
        self.store = store
        self._clock = clock
        self._turns = ConversationTurns(store=store, clock=clock, bots=bots, sender=turns)

    @property
    def operations(self) -> PoppyOperations | None:
        """Where a bot's `Reply(operation=...)` is proposed (set by the Poppy server when a
        Brand enables Operations v1)."""
        return self._turns.operations

    @operations.setter
    def operations(self, operations: PoppyOperations | None) -> None:
        self._turns.operations = operations

    @_vanished_is_not_found
    def flow(
        self,
        operation: ConversationOperation,
        conversation_id: str | None,
        agent: PoppyCaller,
        request: Request,
        issuer: str,
    ) -> Flow:
        """Answer one conversation request of an already checked Session.

        The whole request is checked before it acts: a bad one is refused with no effect
        (no bot run, no turn stored, no message id held), so sent again right it is new."""
        query = _query(request)
        cursor = query.get("cursor")
        start = _cursor_start(cursor)
        # `wait` is whole seconds; answered at once (a turn's answer is stored before its POST
        # returns), but a malformed one is still the agent's error.
        wait = query.get("wait")
        if wait is not None and not (wait.isascii() and wait.isdigit()):
            raise PoppyError(400, "invalid_request", "wait must be whole seconds")
        receipt: Receipt
        if operation == "create":
            body = yield from bounded_body(BODY_LIMIT, "the body")
            message, parent = parse_conversation_start(body)
            if parent is not None:
                raise PoppyError(400, "invalid_request", "Direct Conversations are not supported")
            yield from self._check_reach(derived_context_id(agent, message.id), start)
            receipt = yield from self._create(agent, message, issuer)
        else:
            assert conversation_id is not None
            conversation = yield from self._owned(agent, conversation_id)
            if operation == "events":
                return (yield from self._page(conversation.context_id, conversation.closed, start))
            if operation == "send":
                body = yield from bounded_body(BODY_LIMIT, "the body")
                message = parse_message_post(body)
                yield from self._check_reach(conversation.context_id, start)
                receipt = yield from self._turns.send(agent, conversation, message, issuer)
            else:
                yield store(self.store.close_conversation, context_id=conversation.context_id)
                receipt = Receipt(conversation.context_id, closed=True, status=200)
        if operation != "close" and (cursor is not None or wait is not None):
            # Asked for a page instead of a receipt (§7.3): the events after `cursor`.
            return (
                yield from self._page(
                    receipt.context_id, receipt.closed, start, receipt.status, receipt.working
                )
            )
        return receipt.response()

    # -- steps ---------------------------------------------------------------------------

    def _owned(self, agent: PoppyCaller, conversation_id: str) -> SubFlow:
        """The conversation, if this Session's owner may use it; unknown and another
        owner's look the same (PAP-7.2-01)."""
        context_id = store_context_id(conversation_id)
        conversation: Conversation | None = (
            (yield store(self.store.get_conversation, context_id=context_id))
            if context_id is not None
            else None
        )
        if (
            conversation is None
            or not conversation.owned_by(_owner(agent))
            or (
                conversation.account is not None
                and agent.account is not None
                and conversation.account != agent.account
            )
        ):
            raise PoppyError(404, "conversation_not_found", "no such conversation")
        if conversation.account is not None and agent.account is None:
            # The account's conversation holds its data: the signed-out Session must sign in
            # (GUIDE-co-conv-02), for reads too.
            raise PoppyError(403, "sign_in_required", "the conversation belongs to an account")
        return conversation

    def _create(self, agent: PoppyCaller, message: InboundMessage, issuer: str) -> SubFlow:
        """Start a conversation with its first message; the value is a `Receipt`."""
        context_id = derived_context_id(agent, message.id)
        owner = _owner(agent)
        # Before the conversation exists: an id another conversation holds starts none; one
        # whose conversation fails to start or answer it is released. A failed start leaves
        # no empty conversation (`leaving_nothing`), and the agent's next attempt with the
        # message id starts the same conversation again (the id is derived from it).
        started = leaving_nothing(
            self.store, context_id, self._start(agent, message, issuer, context_id)
        )
        return (yield from self._turns.holding_message_id(owner, context_id, message.id, started))

    def _start(
        self, agent: PoppyCaller, message: InboundMessage, issuer: str, context_id: str
    ) -> SubFlow:
        """`_create` once the message id is the conversation's."""
        now = self._clock()
        owner = _owner(agent)
        try:
            yield store(
                self.store.start_conversation,
                brand_id=owner.brand_id,
                issuer=owner.issuer,
                sub=owner.sub,
                account=agent.account,
                message_id=message.id,
                text=message.text or "",
                now=now,
                context_id=context_id,
            )
        except ValueError:
            # A retried (or concurrent) first message: the conversation exists; answer it
            # as any message of that conversation, from the store when it was answered.
            yield from self._refuse_other_content(context_id, message)
            conversation = yield from self._owned(agent, public_id(context_id))
            return (yield from self._turns.send(agent, conversation, message, issuer, created=True))
        conversation = Conversation(
            context_id=context_id,
            brand_id=owner.brand_id,
            issuer=owner.issuer,
            sub=owner.sub,
            created_at=now,
            last_activity=now,
            closed=False,
            account=agent.account,
        )
        claim = Claim(kind="new")
        answer = self._turns.answer(agent, conversation, message, claim, now, issuer, 201)
        return (yield from answer)

    def _refuse_other_content(self, context_id: str, message: InboundMessage) -> SubFlow:
        """`409 message_id_conflict` when the conversation `message.id` started holds other
        content for it. A message id is the User's (PAP-7.3-01), not an account's: the
        conflict is told to any Session of that User, before whether it may use the
        conversation (as the SDK's reference company does); the id space is this agent's and
        User's alone, so nothing of another owner shows. A first message still unanswered
        has no record to compare yet: the usual answer follows."""
        replies = yield store(self.store.replies, context_id=context_id, limit=1)
        for message_id, stored in replies:
            record = TurnRecord.load(stored)
            if message_id != message.id or record is None:
                continue
            if record.message != message.content():
                raise PoppyError(409, "message_id_conflict", "the message id has other content")

    def _events(self, context_id: str) -> SubFlow:
        """The conversation's events, oldest first (its first `MAX_TURNS` answered turns')."""
        replies = yield store(self.store.replies, context_id=context_id, limit=MAX_TURNS)
        events: list[dict[str, Any]] = []
        for _, stored in replies:
            record = TurnRecord.load(stored)
            if record is not None:
                events.extend(record.events)
        return events

    def _check_reach(self, context_id: str, start: int) -> SubFlow:
        """Refuse, before a message is received, a cursor past the events stored so far: no
        agent can have read those, and refused only after the turn, its message would be
        answered and stored by a request that fails (the agent then sends it again)."""
        if start > 0 and start > len((yield from self._events(context_id))):
            raise PoppyError(400, "invalid_cursor", "not a cursor of this conversation")

    def _page(
        self,
        context_id: str,
        closed: bool,
        start: int,
        status: int = 200,
        working: bool = False,
    ) -> Flow:
        """One page of events after the `start` first ones (a cursor's, `_cursor_start`)."""
        events: list[dict[str, Any]] = yield from self._events(context_id)
        if start > len(events):
            raise PoppyError(400, "invalid_cursor", "not a cursor of this conversation")
        page = events[start : start + PAGE_SIZE]
        end = start + len(page)
        body = {
            "conversation_id": public_id(context_id),
            "events": page,
            "cursor": f"cur_{end}",
            "has_more": end < len(events),
            **conversation_state(closed, working),
        }
        return json_response(body, status=status, extra=NO_STORE)


def _cursor_start(cursor: str | None) -> int:
    """How many events a cursor (`cur_<events already read>`) says were read; 0 without one.
    A malformed cursor is `400 invalid_cursor`."""
    if cursor is None:
        return 0
    matched = _CURSOR.fullmatch(cursor)
    if matched is None:
        raise PoppyError(400, "invalid_cursor", "not a cursor of this conversation")
    return int(matched.group(1))


def _query(request: Request) -> dict[str, str]:
    """The query parameters; a repeated one is refused (which value would be meant?)."""
    values: dict[str, str] = {}
    for name, value in parse_qsl(request.query, keep_blank_values=True):
        if name in values:
            raise PoppyError(400, "invalid_request", f"{name} is repeated")
        values[name] = value
    return values
