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
turn's record (`_TurnRecord`): the agent's message as received and the company's events, so
reads rebuild the event log from the store and a retry with other content is told
`409 message_id_conflict`. The bot runs while `POST` waits, so its answer is in the events
when the receipt arrives.

A bot that needs a scope (`StepUpRequired`, or a tool the Session's scopes do not cover)
answers with an `authorization` event (`sign_in_required` while signed out,
`insufficient_scope` otherwise, naming the scopes) and a company message saying so
(PAP-7.11-01); after sign-in the agent sends again in the same conversation.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import parse_qsl

from attrs import frozen

from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.core.http import Request, Response
from pactmw.protocols.delegation import Delegation
from pactmw.protocols.identity import PersonalAgent
from pactmw.protocols.poppy import (
    InboundMessage,
    PoppyError,
    parse_conversation_start,
    parse_message_post,
)
from pactmw.provider._send import MessageSender, as_reply
from pactmw.provider.brand import Brand, Reply, Turn
from pactmw.provider.delegated._responses import NO_STORE, json_response
from pactmw.provider.flow import Flow, NeedBody, NeedBot, SubFlow, TurnTimedOut, store
from pactmw.provider.poppy._operations import PoppyOperations, tool_proposal
from pactmw.provider.tools import StepUpRequired, ToolError
from pactmw.provider.turn_tools import BoundTools
from pactmw.store.base import Claim, Conversation, NotFound, Store

logger = logging.getLogger("pactmw.poppy")

CONVERSATION_PREFIX = "cnv_"
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
_UUID_HEX = re.compile(r"[0-9a-f]{32}")
#: Fixed: conversation ids derived from (Brand, agent, User ID, first message id).
_ID_NAMESPACE = uuid.UUID("5b0a8a57-7c2e-4c11-9a55-1f8f0f6b3e21")
_RECORD_VERSION = 1

ConversationOperation = Literal["create", "send", "events", "close"]

__all__ = [
    "BODY_LIMIT",
    "CONVERSATION_PREFIX",
    "MAX_TURNS",
    "OWNER_PREFIX",
    "PAGE_SIZE",
    "ConversationOperation",
    "PoppyAgent",
    "PoppyConversations",
    "conversation_route",
]


def conversation_route(method: str, rest: str) -> tuple[ConversationOperation, str | None] | None:
    """The conversation operation of `rest` (the path below `{issuer}/conversations`, "" for
    the endpoint itself) and its conversation id; None for anything else."""
    if rest == "":
        return ("create", None) if method == "POST" else None
    conversation_id, _, action = rest.lstrip("/").partition("/")
    if not conversation_id or "/" in action:
        return None
    if action == "messages" and method == "POST":
        return "send", conversation_id
    if action == "events" and method == "GET":
        return "events", conversation_id
    if action == "close" and method == "POST":
        return "close", conversation_id
    return None


@frozen
class PoppyAgent:
    """Who converses: the checked Session (owner, account, scopes)."""

    brand_id: str
    client_id: str
    user_id: str
    account: str | None
    grant_id: str | None
    scopes: tuple[str, ...]


def _now_text(now: float) -> str:
    return (
        datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _event_id(context_id: str, message_id: str, index: int) -> str:
    """A stable event id: the same turn always numbers its events the same."""
    digest = hashlib.sha256(f"{context_id}\n{message_id}\n{index}".encode()).digest()
    return "evt_" + base64.urlsafe_b64encode(digest[:18]).decode("ascii")


def _public_id(context_id: str) -> str:
    return CONVERSATION_PREFIX + uuid.UUID(context_id).hex


def _context_id(conversation_id: str) -> str | None:
    """The store's id of a Poppy conversation id, None when it cannot be one of ours."""
    if not conversation_id.startswith(CONVERSATION_PREFIX):
        return None
    rest = conversation_id[len(CONVERSATION_PREFIX) :]
    return str(uuid.UUID(rest)) if _UUID_HEX.fullmatch(rest) else None


def _derived_context_id(agent: PoppyAgent, message_id: str) -> str:
    owner = f"{agent.brand_id}\n{agent.client_id}\n{agent.user_id}\n{message_id}"
    return str(uuid.uuid5(_ID_NAMESPACE, owner))


def _caller(agent: PoppyAgent, audience: str) -> PersonalAgent:
    """The bot's `turn.caller` for a Poppy Session: the agent (`client_id`) and its User ID,
    with the Session's account and scopes as the delegation `turn.tools` checks."""
    delegation = None
    if agent.account is not None and agent.grant_id is not None:
        delegation = Delegation(
            account=agent.account,
            scopes=frozenset(agent.scopes),
            grant_id=agent.grant_id,
            client_id=agent.client_id,
            claims={},
        )
    return PersonalAgent(agent.client_id, agent.user_id, agent.client_id, {}, audience, delegation)


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
        self._bots = bots
        self._turns = turns
        #: Where a bot's `Reply(operation=...)` is proposed (set by the Poppy server when a
        #: Brand enables Operations v1).
        self.operations: PoppyOperations | None = None

    def flow(
        self,
        operation: ConversationOperation,
        conversation_id: str | None,
        agent: PoppyAgent,
        request: Request,
        issuer: str,
    ) -> Flow:
        """Answer one conversation request of an already checked Session."""
        try:
            return (yield from self._operation(operation, conversation_id, agent, request, issuer))
        except NotFound:
            # The operator's cleanup deleted the conversation while this request used it.
            raise PoppyError(404, "conversation_not_found", "no such conversation") from None

    def _operation(
        self,
        operation: ConversationOperation,
        conversation_id: str | None,
        agent: PoppyAgent,
        request: Request,
        issuer: str,
    ) -> Flow:
        query = _query(request)
        cursor = query.get("cursor")
        # `wait` is whole seconds; answered at once (a turn's answer is stored before its POST
        # returns), but a malformed one is still the agent's error.
        wait = query.get("wait")
        if wait is not None and not (wait.isascii() and wait.isdigit()):
            raise PoppyError(400, "invalid_request", "wait must be whole seconds")
        receipt: _Receipt
        if operation == "create":
            body = yield from self._body()
            message, parent = parse_conversation_start(body)
            if parent is not None:
                raise PoppyError(400, "invalid_request", "Direct Conversations are not supported")
            receipt = yield from self._create(agent, message, issuer)
        else:
            assert conversation_id is not None
            conversation = yield from self._owned(agent, conversation_id)
            if operation == "events":
                return (yield from self._page(conversation.context_id, conversation.closed, cursor))
            if operation == "send":
                body = yield from self._body()
                message = parse_message_post(body)
                receipt = yield from self._send(agent, conversation, message, issuer)
            else:
                yield store(self.store.close_conversation, context_id=conversation.context_id)
                receipt = _Receipt(conversation.context_id, closed=True, status=200)
        if operation != "close" and (cursor is not None or wait is not None):
            # Asked for a page instead of a receipt (§7.3): the events after `cursor`.
            return (
                yield from self._page(
                    receipt.context_id, receipt.closed, cursor, receipt.status, receipt.working
                )
            )
        return receipt.response()

    # -- steps ---------------------------------------------------------------------------

    def _body(self) -> SubFlow:
        body = yield NeedBody(BODY_LIMIT)
        if body is None:
            raise PoppyError(413, "request_too_large", "the body is too large")
        return body

    def _owned(self, agent: PoppyAgent, conversation_id: str) -> SubFlow:
        """The conversation, if this Session's owner may use it; unknown and another
        owner's look the same (PAP-7.2-01)."""
        context_id = _context_id(conversation_id)
        conversation: Conversation | None = (
            (yield store(self.store.get_conversation, context_id=context_id))
            if context_id is not None
            else None
        )
        if (
            conversation is None
            or conversation.brand_id != agent.brand_id
            or conversation.issuer != OWNER_PREFIX + agent.client_id
            or conversation.sub != agent.user_id
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

    def _create(self, agent: PoppyAgent, message: InboundMessage, issuer: str) -> SubFlow:
        """Start a conversation with its first message; the value is a `_Receipt`."""
        context_id = _derived_context_id(agent, message.id)
        now = self._clock()
        try:
            yield store(
                self.store.start_conversation,
                brand_id=agent.brand_id,
                issuer=OWNER_PREFIX + agent.client_id,
                sub=agent.user_id,
                account=agent.account,
                message_id=message.id,
                text=message.text or "",
                now=now,
                context_id=context_id,
            )
        except ValueError:
            # A retried (or concurrent) first message: the conversation exists; answer it
            # as any message of that conversation, from the store when it was answered.
            conversation = yield from self._owned(agent, _public_id(context_id))
            return (yield from self._send(agent, conversation, message, issuer, created=True))
        conversation = Conversation(
            context_id=context_id,
            brand_id=agent.brand_id,
            issuer=OWNER_PREFIX + agent.client_id,
            sub=agent.user_id,
            created_at=now,
            last_activity=now,
            closed=False,
            account=agent.account,
        )
        claim = Claim(kind="new")
        return (yield from self._answer(agent, conversation, message, claim, now, issuer, 201))

    def _send(
        self,
        agent: PoppyAgent,
        conversation: Conversation,
        message: InboundMessage,
        issuer: str,
        *,
        created: bool = False,
    ) -> SubFlow:
        context_id = conversation.context_id
        if agent.account is not None and conversation.account is None:
            # Once a signed-in Session used it, the conversation stays with that account.
            bound = yield store(
                self.store.bind_account, context_id=context_id, account=agent.account
            )
            if bound != agent.account:
                raise PoppyError(404, "conversation_not_found", "no such conversation")
        now = self._clock()
        claim: Claim = yield store(
            self.store.claim_turn,
            context_id=context_id,
            message_id=message.id,
            text=message.text or "",
            now=now,
            lease_seconds=self._turns.claim_lease_seconds,
        )
        status = 201 if created else 202
        if claim.kind == "reply":
            assert claim.reply is not None
            record = _TurnRecord.load(claim.reply)
            if record is None or record.message != message.content():
                raise PoppyError(409, "message_id_conflict", "the message id has other content")
            return _Receipt(context_id, closed=conversation.closed, status=status)
        if claim.kind == "conflict":
            raise PoppyError(409, "message_id_conflict", "the id is one of the company's")
        if conversation.closed:
            if claim.kind == "new":
                yield store(self.store.release_claim, context_id=context_id, message_id=message.id)
            raise PoppyError(
                409,
                "conversation_closed",
                "the conversation is closed",
                members={"conversation_id": _public_id(context_id)},
            )
        if claim.kind == "pending":
            # Another worker runs the bot for this message now: its answer will be an event.
            return _Receipt(context_id, closed=False, status=status, working=True)
        return (yield from self._answer(agent, conversation, message, claim, now, issuer, status))

    def _answer(
        self,
        agent: PoppyAgent,
        conversation: Conversation,
        message: InboundMessage,
        claim: Claim,
        claimed_at: float,
        issuer: str,
        status: int,
    ) -> SubFlow:
        """Run the Brand's bot once for a claimed message and store the turn's events."""
        brand = self._bots[agent.brand_id]
        context_id = conversation.context_id
        caller = _caller(agent, issuer)
        scopes = brand.delegation.scopes if brand.delegation is not None else None
        operations = self.operations
        if operations is not None and agent.brand_id not in operations.configs:
            operations = None
        supports = operations is not None and (yield from operations.negotiated(agent.client_id))
        # Negotiated, a write tool proposes instead of running (OPS-3-03).
        tools = BoundTools(brand.tools, caller, scopes=scopes, propose_writes=supports)
        turn = Turn(
            text=message.text or "",
            parts=tuple(_parts(message)),
            context_id=context_id,
            message_id=message.id,
            caller=caller,
            brand=brand,
            history=claim.history,
            tools=tools,
            supports_operations=supports,
        )
        release = store(self.store.release_claim, context_id=context_id, message_id=message.id)
        lease = self._turns.hold_lease(context_id, message.id, claimed_at=claimed_at)
        close = False
        try:
            try:
                result = yield NeedBot(brand.handler, turn, timeout=self._turns.turn_timeout)
            except ToolError as refused:
                result = Reply(text=refused.message)
            reply = as_reply(result)
            close = reply.close
            company = _company_message(context_id, message.id, reply.text, reply.data, tools)
            events: list[dict[str, Any]] = [{"type": "message", "message": company}]
            if operations is not None and supports:
                proposals = [tool_proposal(tool, args) for tool, args in tools.proposed]
                if reply.operation is not None:
                    proposals.insert(0, reply.operation)
                for index, proposal in enumerate(proposals):
                    # Proposed, never performed (OPS-3-03): the same open action proposed
                    # through the API is this very operation (OPS-4-01). A message carries
                    # one operation: a second one gets a message of its own.
                    document = yield from operations.propose(
                        brand_id=agent.brand_id,
                        client_id=agent.client_id,
                        user_id=agent.user_id,
                        account=agent.account,
                        proposal=proposal,
                    )
                    if index == 0:
                        company["operation"] = document
                        continue
                    extra = _company_message(
                        context_id, f"{message.id}\n{index}", proposal.summary, (), None
                    )
                    events.append({"type": "message", "message": {**extra, "operation": document}})
        except StepUpRequired as step_up:
            # Not a failure: the answer is the authorization the bot needs, and a message
            # that says so (PAP-7.11-01). Stored like any answer: a retry gets it again.
            wanted = " ".join(step_up.missing_scopes)
            error = "insufficient_scope" if agent.account is not None else "sign_in_required"
            company = _company_message(context_id, message.id, step_up.message, (), None)
            events = [
                {"type": "authorization", "error": error, "scope": wanted},
                {"type": "message", "message": company},
            ]
        except TurnTimedOut as timed_out:
            logger.warning("conversation turn of brand %r abandoned: %s", brand.id, timed_out)
            lease.release()
            yield release
            raise PoppyError(
                503, "temporarily_unavailable", "the turn took too long; send it again"
            ) from None
        except Exception:
            # The bot failed: logged here, nothing of it sent, and the message unanswered so
            # a retry runs the bot again.
            logger.exception("conversation turn of brand %r failed", brand.id)
            yield release
            raise PoppyError(
                503, "temporarily_unavailable", "the company's agent failed; send it again"
            ) from None
        finally:
            lease.release()
        now = self._clock()
        record = _TurnRecord.make(context_id, message, events, now)
        yield store(
            self.store.store_reply,
            context_id=context_id,
            message_id=message.id,
            reply_message_id=company["id"],
            reply_text=company.get("text", ""),
            reply=record.dump(),
            now=now,
        )
        if close:
            yield store(self.store.close_conversation, context_id=context_id)
        return _Receipt(context_id, closed=close, status=status)

    def _page(
        self,
        context_id: str,
        closed: bool,
        cursor: str | None,
        status: int = 200,
        working: bool = False,
    ) -> Flow:
        """One page of events after `cursor` (`cur_<events already read>`)."""
        start = 0
        if cursor is not None:
            matched = _CURSOR.fullmatch(cursor)
            if matched is None:
                raise PoppyError(400, "invalid_cursor", "not a cursor of this conversation")
            start = int(matched.group(1))
        replies = yield store(self.store.replies, context_id=context_id, limit=MAX_TURNS)
        events: list[dict[str, Any]] = []
        for _, stored in replies:
            record = _TurnRecord.load(stored)
            if record is not None:
                events.extend(record.events)
        if start > len(events):
            raise PoppyError(400, "invalid_cursor", "not a cursor of this conversation")
        page = events[start : start + PAGE_SIZE]
        end = start + len(page)
        body = {
            "conversation_id": _public_id(context_id),
            "events": page,
            "cursor": f"cur_{end}",
            "has_more": end < len(events),
            **_state(closed, working),
        }
        return json_response(body, status=status, extra=NO_STORE)


@frozen
class _TurnRecord:
    """What the store keeps as a Poppy turn's reply: the agent's message as received (to
    tell a replay from a conflict) and the turn's events, the agent's message first."""

    message: Mapping[str, Any]
    events: tuple[dict[str, Any], ...]

    @classmethod
    def make(
        cls,
        context_id: str,
        message: InboundMessage,
        company_events: list[dict[str, Any]],
        now: float,
    ) -> _TurnRecord:
        created_at = _now_text(now)
        received = {**message.content(), "role": "user"}
        events = [{"type": "message", "message": received}, *company_events]
        numbered = tuple(
            {"id": _event_id(context_id, message.id, index), "created_at": created_at, **event}
            for index, event in enumerate(events)
        )
        return cls(message=message.content(), events=numbered)

    def dump(self) -> bytes:
        return json_dumps(
            {"poppy": _RECORD_VERSION, "message": self.message, "events": self.events}
        )

    @classmethod
    def load(cls, stored: bytes) -> _TurnRecord | None:
        """The record, or None for a reply this module did not write (a PACT turn)."""
        try:
            document = json_loads(stored)
        except MalformedInput:
            return None
        if not isinstance(document, dict) or document.get("poppy") != _RECORD_VERSION:
            return None
        return cls(message=document["message"], events=tuple(document["events"]))


def _company_message(
    context_id: str,
    message_id: str,
    text: str,
    data: tuple[Mapping[str, Any], ...] | list[Any],
    tools: BoundTools | None,
) -> dict[str, Any]:
    """The company's message (PAP-7.7-02: `sender` agent, the bot speaks)."""
    digest = hashlib.sha256(f"{context_id}\n{message_id}\nreply".encode()).digest()
    company: dict[str, Any] = {
        "id": "msg_" + base64.urlsafe_b64encode(digest[:18]).decode("ascii"),
        "role": "company",
        "sender": "agent",
        "text": text,
    }
    members = [dict(item) for item in data]
    if tools is not None:
        # What the bot's write tools did, next to its text (as in PACT's reply).
        members.extend(dict(report) for report in tools.reports)
    if members:
        company["data"] = members[0] if len(members) == 1 else {"items": members}
    return company


def _parts(message: InboundMessage) -> list[Mapping[str, Any]]:
    """The message as A2A-style parts, the shape `turn.parts` has for PACT."""
    parts: list[Mapping[str, Any]] = []
    if message.text is not None:
        parts.append({"text": message.text})
    if message.data is not None:
        parts.append({"data": dict(message.data)})
    if message.context is not None:
        parts.append({"data": {"context": dict(message.context)}})
    return parts


def _state(closed: bool, working: bool = False) -> dict[str, str]:
    status = "closed" if closed else "working" if working else "idle"
    return {"status": status, "responder": "agent"}


@frozen
class _Receipt:
    """What a POST did to a conversation, answered as a receipt or, asked, as a page."""

    context_id: str
    closed: bool
    status: int
    working: bool = False

    def response(self) -> Response:
        body = {"conversation_id": _public_id(self.context_id), **_state(self.closed, self.working)}
        return json_response(body, status=self.status, extra=NO_STORE)


def _query(request: Request) -> dict[str, str]:
    """The query parameters; a repeated one is refused (which value would be meant?)."""
    values: dict[str, str] = {}
    for name, value in parse_qsl(request.query, keep_blank_values=True):
        if name in values:
            raise PoppyError(400, "invalid_request", f"{name} is repeated")
        values[name] = value
    return values
