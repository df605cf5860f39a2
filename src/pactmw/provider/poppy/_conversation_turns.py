"""One message of a Poppy conversation answered (§7): bound to the account, claimed in the
store, the Brand's bot run once, its events stored as the turn's record.

The same `claim_turn`/`store_reply`/`release_claim` as PACT's `message:send`, with the same
lease renewal (`MessageSender.hold_lease`), so a retried message is answered from the store
and the bot runs once across processes. A bot that needs a scope answers with an
`authorization` event and a company message saying so (PAP-7.11-01); a bot that fails or
takes too long leaves the message unanswered, so the agent can send it again. A message
whose handling fails after its id was claimed was never received: its id is released
(`holding_message_id`), for this conversation or another of the User's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from attrs import define

from pactmw.protocols.delegation import Delegation
from pactmw.protocols.identity import PersonalAgent
from pactmw.protocols.poppy import InboundMessage, PoppyError
from pactmw.provider._claims import give_up, release_refused, undone_if_failed
from pactmw.provider._send import MessageSender, bot_reply, bound_tools
from pactmw.provider.brand import Brand, Turn
from pactmw.provider.flow import SubFlow, TurnTimedOut, store
from pactmw.provider.poppy._conversation_records import (
    Receipt,
    TurnRecord,
    company_message,
    message_parts,
    public_id,
)
from pactmw.provider.poppy._operations import (
    PoppyOperations,
    ProposalWithoutExecutor,
    tool_proposal,
)
from pactmw.provider.poppy._session_check import PoppyCaller
from pactmw.provider.tools import StepUpRequired
from pactmw.store.base import Claim, Conversation, Owner, Store

logger = logging.getLogger("pactmw.poppy")

__all__ = [
    "ConversationTurns",
]


def _no_executor(brand_id: str, mistake: ProposalWithoutExecutor) -> None:
    """Say at ERROR that a bot proposed an action nothing performs, and what to fix."""
    logger.error(
        "conversation turn of brand %r: the bot proposed the action %r, but no executor is "
        "registered for it (brands.%s.poppy.operations.executors); its reply was sent "
        "without the operation",
        brand_id,
        mistake.action,
        brand_id,
    )


def _caller(agent: PoppyCaller, audience: str) -> PersonalAgent:
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


def _message_id_key(owner: Owner, context_id: str, message_id: str) -> dict[str, str]:
    """The store's keywords naming `message_id` of `owner` in conversation `context_id`:
    what claiming and releasing the id both name."""
    return {
        "brand_id": owner.brand_id,
        "issuer": owner.issuer,
        "sub": owner.sub,
        "message_id": message_id,
        "context_id": context_id,
    }


class _ClaimKept(PoppyError):
    """A failed turn whose claim the store could not release (down): the message stays in
    progress until the claim's lease lapses, in `seconds` (`give_up`), so the
    agent is told to send it again then."""

    def __init__(self, seconds: int) -> None:
        super().__init__(
            503,
            "temporarily_unavailable",
            "the store could not release the message",
            headers=(("Retry-After", str(seconds)),),
        )


@define
class ConversationTurns:
    """The turns of every Poppy-enabled Brand's conversations; `PoppyConversations` hands
    each message here once it knows the conversation."""

    store: Store
    clock: Callable[[], float]
    bots: Mapping[str, Brand]
    #: PACT's `message:send` turns: their claim lease, its renewal and the turn timeout.
    sender: MessageSender
    #: Where a bot's `Reply(operation=...)` is proposed (None: no Brand enables them).
    operations: PoppyOperations | None = None

    def send(
        self,
        agent: PoppyCaller,
        conversation: Conversation,
        message: InboundMessage,
        issuer: str,
        *,
        created: bool = False,
    ) -> SubFlow:
        """Answer one message of a conversation the agent may use; the value is a `Receipt`
        (`201` for the first message, `created`, else `202`)."""
        context_id = conversation.context_id
        if agent.account is not None and conversation.account is None:
            # Once a signed-in Session used it, the conversation stays with that account.
            bound = yield store(
                self.store.bind_account, context_id=context_id, account=agent.account
            )
            if bound != agent.account:
                raise PoppyError(404, "conversation_not_found", "no such conversation")
        received = self._receive(agent, conversation, message, issuer, created)
        return (
            yield from self.holding_message_id(conversation.owner, context_id, message.id, received)
        )

    def _receive(
        self,
        agent: PoppyCaller,
        conversation: Conversation,
        message: InboundMessage,
        issuer: str,
        created: bool,
    ) -> SubFlow:
        """`send` once the message id is the conversation's."""
        context_id = conversation.context_id
        now = self.clock()
        claim: Claim = yield store(
            self.store.claim_turn,
            context_id=context_id,
            message_id=message.id,
            text=message.text or "",
            now=now,
            lease_seconds=self.sender.claim_lease_seconds,
        )
        status = 201 if created else 202
        if claim.kind == "reply":
            assert claim.reply is not None
            record = TurnRecord.load(claim.reply)
            if record is None or record.message != message.content():
                raise PoppyError(409, "message_id_conflict", "the message id has other content")
            return Receipt(context_id, closed=conversation.closed, status=status)
        if claim.kind == "conflict":
            raise PoppyError(409, "message_id_conflict", "the id is one of the company's")
        if conversation.closed:
            # Refused, so never received: with its turn released, `holding_message_id` frees
            # its id too, which may start another conversation.
            yield from release_refused(self.store, claim, context_id, message.id, now)
            raise PoppyError(
                409,
                "conversation_closed",
                "the conversation is closed",
                members={"conversation_id": public_id(context_id)},
            )
        if claim.kind == "pending":
            # Another worker runs the bot for this message now: its answer will be an event.
            return Receipt(context_id, closed=False, status=status, working=True)
        return (yield from self.answer(agent, conversation, message, claim, now, issuer, status))

    def claim_message_id(self, owner: Owner, context_id: str, message_id: str) -> SubFlow:
        """Record `message_id` as conversation `context_id`'s, or refuse it with `409
        message_id_conflict` when another conversation of the owner (Brand, agent, User ID)
        holds it, whatever its content.

        Why per User, not per conversation: the Personal Agent "chooses each message's id,
        and MUST make it unique for the User" (PAP-7.3-01, `personal_agent_protocol/
        protocol/requirements.yaml` of `personal-agent-protocol==0.26.0`), so an id names one
        message of the User, and the SDK's reference company records ids per (client_id,
        User ID) across conversations (`CompanyService._claim`). Sent to another
        conversation, the id is not a retry of that message there: the bot must not run for
        it again. The reference company answers a same-content one as a replay that adds
        nothing; pactmw refuses it instead, as the message is not in the conversation
        the request names."""
        holder = yield store(
            self.store.claim_message_id, **_message_id_key(owner, context_id, message_id)
        )
        if holder != context_id:
            raise PoppyError(409, "message_id_conflict", "the message id is another conversation's")

    def holding_message_id(
        self, owner: Owner, context_id: str, message_id: str, then: SubFlow
    ) -> SubFlow:
        """`then`, once `message_id` is conversation `context_id`'s (`claim_message_id`);
        its value is `then`'s.

        Whatever fails after the claim (the bot, the store, a refusal of the request), the
        id is released on the way out: a message whose turn nothing received or answered
        was never received, so the agent's next attempt with that id is a new message
        wherever it goes, not `409 message_id_conflict`. The store frees the id only while
        the conversation holds no turn of it, so a failure cannot free the id of a message
        answered there, or being answered by another request."""
        yield from self.claim_message_id(owner, context_id, message_id)
        # With the store down, the id stays the conversation's, where a retry finds it.
        release = store(
            self.store.release_message_id, **_message_id_key(owner, context_id, message_id)
        )
        return (yield from undone_if_failed(then, release))

    def answer(
        self,
        agent: PoppyCaller,
        conversation: Conversation,
        message: InboundMessage,
        claim: Claim,
        claimed_at: float,
        issuer: str,
        status: int,
    ) -> SubFlow:
        """Run the Brand's bot once for a claimed message and store the turn's events."""
        brand = self.bots[agent.brand_id]
        context_id = conversation.context_id
        caller = _caller(agent, issuer)
        operations = self.operations
        if operations is not None and agent.brand_id not in operations.configs:
            operations = None
        supports = operations is not None and (yield from operations.negotiated(agent.client_id))
        # Negotiated, a write tool proposes instead of running (OPS-3-03).
        tools = bound_tools(brand, caller, propose_writes=supports)
        turn = Turn(
            text=message.text or "",
            parts=tuple(message_parts(message)),
            context_id=context_id,
            message_id=message.id,
            caller=caller,
            brand=brand,
            history=claim.history,
            tools=tools,
            supports_operations=supports,
        )
        lease = self.sender.hold_lease(context_id, message.id, claimed_at=claimed_at)
        close = False
        try:
            reply = yield from bot_reply(brand, turn, self.sender.turn_timeout)
            close = reply.close
            company = company_message(context_id, message.id, reply.text, reply.data, tools)
            events: list[dict[str, Any]] = [{"type": "message", "message": company}]
            if operations is not None and supports:
                proposals = [tool_proposal(tool, args) for tool, args in tools.proposed]
                if reply.operation is not None:
                    proposals.insert(0, reply.operation)
                for index, proposal in enumerate(proposals):
                    # Proposed, never performed (OPS-3-03): the same open action proposed
                    # through the API is this very operation (OPS-4-01). A message carries
                    # one operation: a second one gets a message of its own.
                    try:
                        document = yield from operations.propose_for(agent, proposal)
                    except ProposalWithoutExecutor as mistake:
                        # The bot's mistake, the same on every retry: failing the turn made
                        # a 503 the agent retried for ever. The answer goes without the
                        # operation (as to an agent without the extension) and says nothing
                        # of it; the operator is told what to fix.
                        _no_executor(brand.id, mistake)
                        continue
                    if "operation" not in company:
                        company["operation"] = document
                        continue
                    extra = company_message(
                        context_id, f"{message.id}\n{index}", proposal.summary, (), None
                    )
                    events.append({"type": "message", "message": {**extra, "operation": document}})
        except StepUpRequired as step_up:
            # Not a failure: the answer is the authorization the bot needs, and a message
            # that says so (PAP-7.11-01). Stored like any answer: a retry gets it again.
            wanted = " ".join(step_up.missing_scopes)
            error = "insufficient_scope" if agent.account is not None else "sign_in_required"
            company = company_message(context_id, message.id, step_up.message, (), None)
            events = [
                {"type": "authorization", "error": error, "scope": wanted},
                {"type": "message", "message": company},
            ]
        except TurnTimedOut as timed_out:
            logger.warning("conversation turn of brand %r abandoned: %s", brand.id, timed_out)
            yield from give_up(lease, _ClaimKept)
            raise PoppyError(
                503, "temporarily_unavailable", "the turn took too long; send it again"
            ) from None
        except Exception:
            # The bot failed: logged here, nothing of it sent, and the message unanswered so
            # a retry runs the bot again.
            logger.exception("conversation turn of brand %r failed", brand.id)
            yield from give_up(lease, _ClaimKept)
            raise PoppyError(
                503, "temporarily_unavailable", "the company's agent failed; send it again"
            ) from None
        finally:
            lease.stop()
        now = self.clock()
        record = TurnRecord.make(context_id, message, events, now)
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
        return Receipt(context_id, closed=close, status=status)
