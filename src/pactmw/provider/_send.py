"""`message:send` after authentication: one conversation turn (PACT §4, §5.5, §5.6).

The conversation (`contextId`) is owned by one Brand and one (agent, user); the `messageId`
is claimed in the store, so a retry is answered with the stored reply byte for byte and a
bot runs once per message across processes; the bot's answer (or its step-up, or a Parafé
refusal) becomes the stored reply, with a signed receipt under a delegation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from attrs import frozen

from pactmw.core.encoding import json_dumps, json_loads, uuid4_text
from pactmw.core.errors import A2AError, MalformedInput, RequestRefused
from pactmw.core.http import Response
from pactmw.protocols.delegation import receipt_claims, sign_receipt
from pactmw.protocols.identity import PersonalAgent
from pactmw.protocols.parafe import HandshakeChallenge, SessionClosed
from pactmw.provider._claims import (
    Lease,
    LeaseRenewer,
    give_up,
    leaving_nothing,
    release_refused,
)
from pactmw.provider.a2a import a2a_json
from pactmw.provider.brand import Brand, Reply, Turn
from pactmw.provider.delegated import AuthorizationServer
from pactmw.provider.flow import Flow, NeedBot, NeedStore, SubFlow, TurnTimedOut
from pactmw.provider.messages import SendMessage, is_uuid
from pactmw.provider.parafe import ParafeAgent, ParafeRefused, ParafeTurn, refusal_task
from pactmw.provider.tools import StepUpRequired, ToolError
from pactmw.provider.turn_tools import BoundTools
from pactmw.store.base import Claim, NotFound, Owner, Store

logger = logging.getLogger("pactmw.provider")

_UNKNOWN_CONTEXT = "Unknown contextId"
#: The message of the INTERNAL error a turn past `turn_timeout` gets (docs/configuration.md).
TURN_TIMED_OUT = "The turn took too long and was abandoned; send the message again"
#: The step-up message of a retry, without a delegation token, of a reply made under one.
REPLAY_STEP_UP = "This answer was made with access to your account: approve that access to see it"
#: The INVALID_PARAMS message of such a retry once the reply's grant has ended (revoked).
REPLAY_GRANT_ENDED = (
    "messageId was answered under a delegation that has ended; send it as a new message"
)

__all__ = [
    "REPLAY_GRANT_ENDED",
    "REPLAY_STEP_UP",
    "TURN_TIMED_OUT",
    "MessageSender",
    "as_reply",
    "bot_reply",
    "bound_tools",
]


class MessageSender:
    """Runs `message:send` turns for a Provider (which owns the settings it is built with)."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Callable[[], float],
        claim_lease_seconds: float,
        conversation_idle_timeout: float | None,
        oauth: AuthorizationServer | None,
        turn_timeout: float | None = None,
    ) -> None:
        self.store = store
        self._clock = clock
        self.claim_lease_seconds = claim_lease_seconds
        self.turn_timeout = turn_timeout
        self._leases = LeaseRenewer(store, clock, claim_lease_seconds)
        self.conversation_idle_timeout = conversation_idle_timeout
        self.oauth = oauth

    def hold_lease(self, context_id: str, message_id: str, *, claimed_at: float) -> Lease:
        """Keep renewing a claim while its bot runs (any protocol's turn); once the turn is
        over, `stop()` it (answered) or `yield from give_up(lease, kept)` (unanswered)."""
        return self._leases.hold(context_id, message_id, claimed_at=claimed_at)

    def send(
        self,
        brand: Brand,
        caller: PersonalAgent,
        message: SendMessage,
        parafe: ParafeAgent | None = None,
        activated: bool = False,
    ) -> Flow:
        """message:send after authentication: the conversation (`contextId`), the claim of
        the `messageId` (retries answered from the store), the bot, and the stored reply."""
        try:
            return (yield from self._turn(brand, caller, message, parafe, activated))
        except NotFound:
            # The operator's cleanup deleted the conversation while this turn used it (its
            # retention ran out): it is unknown now, as it is to every later request.
            raise A2AError("INVALID_PARAMS", _UNKNOWN_CONTEXT) from None

    def _turn(
        self,
        brand: Brand,
        caller: PersonalAgent,
        message: SendMessage,
        parafe: ParafeAgent | None,
        activated: bool,
    ) -> Flow:
        now = self._clock()
        store = self.store
        delegation = caller.delegation
        owner = Owner(brand.id, caller.issuer, caller.sub)
        if message.context_id is None:
            # A new conversation: created, bound to the Brand account (spec §5.5) and its
            # first message claimed in one store transaction; nothing else knows the id yet,
            # so the claim is new and the history empty.
            context_id: str = yield NeedStore(
                store.start_conversation,
                {
                    "brand_id": owner.brand_id,
                    "issuer": owner.issuer,
                    "sub": owner.sub,
                    "account": delegation.account if delegation is not None else None,
                    "message_id": message.message_id,
                    "text": message.text,
                    "now": now,
                },
            )
            answered = self._answer(
                brand, caller, message, context_id, _NEW_CLAIM, now, parafe, activated
            )
            # The agent learns the id only from the reply: a failed first turn leaves none.
            response: Response = yield from leaving_nothing(store, context_id, answered)
            return response
        context_id = message.context_id
        conversation = (
            (yield NeedStore(store.get_conversation, {"context_id": context_id}))
            if is_uuid(context_id)
            else None
        )
        # Unknown, another user's and another Brand's contexts look the same (PACT §4.2).
        if conversation is None or not conversation.owned_by(owner):
            raise A2AError("INVALID_PARAMS", _UNKNOWN_CONTEXT)
        closed = conversation.closed
        idle = self.conversation_idle_timeout
        if not closed and idle is not None and now - conversation.last_activity > idle:
            yield NeedStore(store.close_conversation, {"context_id": context_id})
            closed = True
        if delegation is not None:
            # Once a turn ran as one Brand account, the context stays with it (spec §5.5).
            bound = yield NeedStore(
                store.bind_account, {"context_id": context_id, "account": delegation.account}
            )
            if bound != delegation.account:
                raise A2AError("INVALID_PARAMS", "contextId already runs as a different Brand user")
        # The claim and, when it is new, the bot's history: one store transaction.
        claim = yield NeedStore(
            store.claim_turn,
            {
                "context_id": context_id,
                "message_id": message.message_id,
                "text": message.text,
                "now": now,
                "lease_seconds": self.claim_lease_seconds,
            },
        )
        # A retry is answered even in a closed conversation: the reply that closed it may be
        # the one the personal agent lost (PACT §4.3). Anything new there is refused (§4.2).
        if claim.kind == "reply":
            assert claim.reply is not None
            made_under = _reply_grant(claim.reply)
            if made_under is not None and (
                delegation is None or delegation.grant_id != made_under.grant_id
            ):
                return (yield from self._replay_refused(brand, caller, context_id, made_under))
            return a2a_json(200, claim.reply)
        if closed:
            yield from release_refused(store, claim, context_id, message.message_id, now)
            raise A2AError("UNSUPPORTED_OPERATION", "Conversation is closed")
        if claim.kind == "pending":
            raise A2AError(
                "INVALID_PARAMS",
                "messageId was already received in this context and has no reply yet",
            )
        if claim.kind == "conflict":
            raise A2AError("INVALID_PARAMS", "messageId is already in use in this context")
        return (
            yield from self._answer(
                brand, caller, message, context_id, claim, now, parafe, activated
            )
        )

    def _answer(
        self,
        brand: Brand,
        caller: PersonalAgent,
        message: SendMessage,
        context_id: str,
        claim: Claim,
        claimed_at: float,
        parafe: ParafeAgent | None,
        activated: bool,
    ) -> Flow:
        """Run the bot once for a message this turn claimed (`new`) at `claimed_at`, and store
        its reply; the value is the response."""
        store = self.store
        delegation = caller.delegation
        tools = bound_tools(brand, caller)
        parafe_turn = (
            parafe.turn(message.message, activated=activated)
            if parafe is not None
            else ParafeTurn(None)
        )
        turn = Turn(
            text=message.text,
            parts=message.parts,
            context_id=context_id,
            message_id=message.message_id,
            caller=caller,
            brand=brand,
            history=claim.history,
            tools=tools,
            parafe=parafe_turn,
        )
        # While the bot works, the claim stays ours: a retry is told the message is being
        # answered, however slow the bot (PACT §4.3). Only a crashed worker's lease runs out.
        lease = self._leases.hold(context_id, message.message_id, claimed_at=claimed_at)
        try:
            if parafe is not None:
                yield from _parafe_members(parafe, parafe_turn)
            reply = yield from bot_reply(brand, turn, self.turn_timeout)
            reply_text, close = reply.text, reply.close
            reply_id = uuid4_text()
            parts: list[dict[str, Any]] = [{"text": reply.text}]
            parts.extend({"data": data} for data in reply.data)
            # What the bot's write tools did, next to its text (AuthKit's agent's shape).
            parts.extend({"data": report} for report in tools.reports)
            agent_message: dict[str, Any] = {
                "messageId": reply_id,
                "contextId": context_id,
                "role": "ROLE_AGENT",
                "parts": parts,
            }
            if delegation is not None:
                # Every reply under a delegation token carries a signed receipt (spec §5.6),
                # stored with the reply so a retry returns the very same one.
                agent_message["metadata"] = {
                    "pact.receipt": _receipt(self.oauth, brand, turn, self._clock())
                }
            if parafe is not None:
                # The handshake answer and the turn's action receipts (stored with the reply,
                # so a retry returns the very same ones).
                agent_message = parafe_turn.decorate(agent_message)
            # Serialised here: data the bot returned that is not JSON (NaN, objects) is the
            # bot's failure too, and must release the claim like any other.
            body = json_dumps({"message": agent_message})
        except ParafeRefused as refused:
            # Not a failure: the reply is the refusal, with its Parafé error data and receipts.
            reply_text, refusal = parafe_turn.refusal(refused, context_id)
            reply_id, close = refusal["messageId"], False
            if parafe is not None and parafe.config.refusal == "task":
                body = json_dumps(refusal_task(refusal, refused))
                # Like a step-up: the message stays unanswered, so the personal agent can
                # send it again after a new handshake.
                unanswered = refused.task_state == "TASK_STATE_AUTH_REQUIRED"
            else:
                body = json_dumps({"message": refusal})
                unanswered = False
            # A broker outage is no answer to the message either (`refused_by_outage_alone`):
            # sent again once the broker is back, it is checked again. Not when the bot's
            # write tools acted: a retry would run them twice.
            if unanswered or (parafe_turn.refused_by_outage_alone(refused) and not tools.reports):
                yield from give_up(lease, _claim_kept)
                if parafe is not None:
                    parafe.file(parafe_turn.filings())
                return a2a_json(200, body)
        except StepUpRequired as step_up:
            # Not a failure: the turn needs more scopes. The message stays unanswered so the
            # personal agent can send it again once the user has approved (spec §5.5).
            yield from give_up(lease, _claim_kept)
            if self.oauth is None:
                logger.error(
                    "the bot of brand %r asked for step-up, but no Brand offers delegation",
                    brand.id,
                )
                raise A2AError("INTERNAL", "Internal error") from None
            return (
                yield from self.oauth.step_up(
                    brand, caller, context_id, step_up.missing_scopes, step_up.message
                )
            )
        except TurnTimedOut as timed_out:
            # Abandoned: whatever the bot still answers is dropped, and the message stays
            # unanswered so that a retry runs the bot again.
            logger.warning("turn handler of brand %r abandoned: %s", brand.id, timed_out)
            yield from give_up(lease, _claim_kept)
            raise A2AError("INTERNAL", TURN_TIMED_OUT) from None
        except Exception:
            # The bot failed: log it here, tell the caller nothing of it, and leave the message
            # unanswered so that a retry runs the bot again.
            logger.exception("turn handler of brand %r failed", brand.id)
            yield from give_up(lease, _claim_kept)
            raise A2AError("INTERNAL", "Internal error") from None
        finally:
            lease.stop()
        yield NeedStore(
            store.store_reply,
            {
                "context_id": context_id,
                "message_id": message.message_id,
                "reply_message_id": reply_id,
                "reply_text": reply_text,
                "reply": body,
                "now": self._clock(),
            },
        )
        if parafe is not None:
            parafe.file(parafe_turn.filings())  # in the background, after the reply is stored
        if close:
            yield NeedStore(store.close_conversation, {"context_id": context_id})
        return a2a_json(200, body)

    def _replay_refused(
        self, brand: Brand, caller: PersonalAgent, context_id: str, made_under: _ReplyGrant
    ) -> Flow:
        """The answer to a retry of a message answered under a delegation, from a caller
        without a delegation token of that grant. The stored reply holds account data (and a
        receipt naming the grant), so the caller gets what a new turn would get with the
        credentials it has, never the reply.

        While the grant is live, a caller without a delegation token gets the step-up a new
        turn would get (approving widens that same grant, whose token then gets the reply);
        once the grant has ended, no token will ever be of it again: INVALID_PARAMS says so.
        """
        grant = yield NeedStore(self.store.get_grant, {"grant_id": made_under.grant_id})
        live = grant is not None and grant.is_live(self._clock())
        if live and caller.delegation is None and self.oauth is not None:
            missing = made_under.scopes_used or tuple(grant.scopes)
            return (
                yield from self.oauth.step_up(brand, caller, context_id, missing, REPLAY_STEP_UP)
            )
        raise A2AError("INVALID_PARAMS", REPLAY_GRANT_ENDED)


def _receipt(
    oauth: AuthorizationServer | None, brand: Brand, turn: Turn, now: float
) -> dict[str, Any]:
    """The signed receipt (spec §5.6) of a turn run under a delegation token."""
    assert oauth is not None
    assert turn.caller.delegation is not None
    claims = receipt_claims(
        delegation=turn.caller.delegation,
        interface_url=oauth.interface(brand),
        scopes_used=turn.tools.scopes_used,
        actions=turn.tools.actions,
        now=now,
    )
    return sign_receipt(claims, oauth.keys.signer)


def _claim_kept(seconds: int) -> RequestRefused:
    """What A2A answers for a failed turn whose claim the store kept (`give_up`): A2A has no
    error reason for an unavailable service, so it is a store outage's bare 503
    (`pactmw.provider.errors`), with the `Retry-After` of the claim's lapse."""
    return RequestRefused(503, (("Retry-After", str(seconds)),))


#: The claim of a new conversation's first message: always new (nothing else knows the id).
_NEW_CLAIM = Claim(kind="new")


@frozen
class _ReplyGrant:
    """The grant a stored reply was made under, from its receipt, and the scopes it used."""

    grant_id: str
    scopes_used: tuple[str, ...]


def _reply_grant(reply: bytes) -> _ReplyGrant | None:
    """The grant named by the receipt of a stored reply (spec §5.6), None without a receipt.

    Read from the stored bytes, which this Provider wrote, so no schema change is needed;
    only retries of answered messages pay for it.
    """
    if b'"pact.receipt"' not in reply:  # cheap: most stored replies have no receipt
        return None
    try:
        claims = json_loads(reply)["message"]["metadata"]["pact.receipt"]["claims"]
        grant_id, scopes = claims["grantId"], claims["scopesUsed"]
    except (MalformedInput, KeyError, TypeError):
        return None
    if not isinstance(grant_id, str) or not isinstance(scopes, list):
        return None
    return _ReplyGrant(grant_id, tuple(str(scope) for scope in scopes))


def _parafe_members(parafe: ParafeAgent, turn: ParafeTurn) -> SubFlow:
    """Answer a `handshake_challenge` (with the broker) or take note of a `session_closed`
    before the bot runs; other Parafé data waits for `turn.parafe.require`."""
    data = turn.data()
    member = data.member if data is not None else None
    if isinstance(member, HandshakeChallenge):
        turn.handshake = yield NeedStore(parafe.answer_handshake, {"challenge": member})
    elif isinstance(member, SessionClosed):
        turn.session_closed = yield NeedStore(parafe.close_session, {"member": member})


def bound_tools(brand: Brand, caller: PersonalAgent, *, propose_writes: bool = False) -> BoundTools:
    """The Brand's tools for one turn of `caller`, in every protocol: with a delegation,
    its scope descriptions are what the request-permission tool offers."""
    scopes = brand.delegation.scopes if brand.delegation is not None else None
    return BoundTools(brand.tools, caller, scopes=scopes, propose_writes=propose_writes)


def bot_reply(brand: Brand, turn: Turn, timeout: float | None) -> SubFlow:
    """Run the Brand's bot once for `turn`, in every protocol; the value is its `Reply`
    (`as_reply`)."""
    try:
        result = yield NeedBot(brand.handler, turn, timeout=timeout)
    except ToolError as refused:
        # A tool refused and the bot let it through: the refusal (written for the caller) is
        # the answer, with its reports and receipt, never a 500.
        result = Reply(text=refused.message)
    return as_reply(result)


def as_reply(result: Any) -> Reply:
    """A bot's answer as a `Reply`; TypeError/ValueError for what no protocol can send."""
    if isinstance(result, str):
        result = Reply(text=result)
    if not isinstance(result, Reply):
        raise TypeError(f"a turn handler must return str or Reply, not {type(result).__name__}")
    if not isinstance(result.text, str):
        raise TypeError(f"Reply.text must be str, not {type(result.text).__name__}")
    if "\x00" in result.text:
        # Stores refuse NUL; refusing it here releases the claim like any bot failure.
        raise ValueError("a reply text must not contain NUL characters")
    return result
