"""Conversations and turns of the memory store (the contract, with its input checks:
store/_protocols/conversations.py)."""

from __future__ import annotations

from pactmw.store._decisions import ClaimedMessage, decide_claim
from pactmw.store._memory.core import Context, MemoryCore, StoredMessage
from pactmw.store._protocols.conversations import OwnedMessageId
from pactmw.store.base import Claim, Conversation, NotFound, StoredTurn

__all__ = ["ConversationsMixin"]


class ConversationsMixin(MemoryCore):
    """The conversation and turn primitives of `ConversationStore`, on the in-memory state."""

    def _context(self, context_id: str) -> Context:
        ctx = self._contexts.get(context_id)
        if ctx is None:
            raise NotFound(f"unknown conversation {context_id!r}")
        return ctx

    def _create_conversation(
        self, context_id: str, brand_id: str, issuer: str, sub: str, now: float
    ) -> None:
        conversation = Conversation(context_id, brand_id, issuer, sub, now, now, False, None)
        with self._open:
            self._contexts[context_id] = Context(conversation, {}, set())

    def _get_conversation(self, context_id: str) -> Conversation | None:
        with self._open:
            ctx = self._contexts.get(context_id)
            return None if ctx is None else ctx.conversation

    def _close_conversation(self, context_id: str) -> None:
        with self._open:
            ctx = self._contexts.get(context_id)
            if ctx is not None:
                ctx.conversation = _updated(ctx.conversation, closed=True)

    def _bind_account(self, context_id: str, account: str) -> str:
        with self._open:
            ctx = self._context(context_id)
            bound = ctx.conversation.account
            if bound is None:
                ctx.conversation = _updated(ctx.conversation, account=account)
                return account
            return bound

    def _claim_turn(
        self, context_id: str, message_id: str, text: str, now: float, lease: float, limit: int
    ) -> Claim:
        with self._open:
            ctx = self._context(context_id)
            message = ctx.messages.get(message_id)
            decision = decide_claim(
                None if message is None else ClaimedMessage(message.claimed_at, message.reply),
                is_reply_id=message_id in ctx.agent_message_ids,
                now=now,
                lease_seconds=lease,
            )
            if decision.write == "insert":
                ctx.messages[message_id] = StoredMessage(text=text, claimed_at=now)
            elif decision.write == "take_over":
                # Keep the message's place in the history.
                assert message is not None
                ctx.messages[message_id] = _claimed_again(message, text, now)
            if decision.write is not None:
                ctx.conversation = _updated(ctx.conversation, last_activity=now)
            if decision.claim.kind != "new" or limit <= 0:
                return decision.claim
            # The claimed message is unanswered, so it is not in its own history.
            return Claim("new", None, tuple(_last_turns(ctx, limit)))

    def _start_conversation(
        self, conversation: Conversation, message_id: str, text: str, derived: bool
    ) -> bool:
        first = StoredMessage(text=text, claimed_at=conversation.created_at)
        context = Context(conversation, {message_id: first}, set())
        with self._open:
            if derived and conversation.context_id in self._contexts:
                return False
            self._contexts[conversation.context_id] = context
            return True

    def _renew_claim(self, context_id: str, message_id: str, claimed_at: float, now: float) -> bool:
        with self._open:
            ctx = self._contexts.get(context_id)
            message = None if ctx is None else ctx.messages.get(message_id)
            if ctx is None or message is None:
                return False
            if message.reply is not None or message.claimed_at != claimed_at:
                return False
            ctx.messages[message_id] = _claimed_again(message, message.text, now)
            return True

    def _store_reply(
        self, context_id: str, message_id: str, reply_id: str, text: str, reply: bytes, now: float
    ) -> None:
        with self._open:
            ctx = self._context(context_id)
            message = ctx.messages.get(message_id)
            if message is None:
                raise NotFound(f"message {message_id!r} was not claimed in {context_id!r}")
            if message.reply is not None:
                return
            if reply_id in ctx.agent_message_ids:
                raise ValueError(f"reply message id {reply_id!r} is already used")
            ctx.messages[message_id] = StoredMessage(
                message.text, message.claimed_at, reply_id, text, reply
            )
            ctx.agent_message_ids.add(reply_id)
            ctx.conversation = _updated(ctx.conversation, last_activity=now)

    def _release_claim(self, context_id: str, message_id: str, claimed_at: float) -> None:
        with self._open:
            ctx = self._contexts.get(context_id)
            if ctx is None:
                return
            message = ctx.messages.get(message_id)
            if message is not None and message.reply is None and message.claimed_at == claimed_at:
                del ctx.messages[message_id]

    def _claim_message_id(self, key: OwnedMessageId, context_id: str) -> str:
        with self._open:
            return self._message_ids.setdefault(key, context_id)

    def _release_message_id(self, key: OwnedMessageId, context_id: str) -> None:
        with self._open:
            ctx = self._contexts.get(context_id)
            if ctx is not None and key[3] in ctx.messages:
                return  # the conversation holds a turn of it: received
            if self._message_ids.get(key) == context_id:
                del self._message_ids[key]

    def _delete_empty_conversation(self, context_id: str) -> bool:
        with self._open:
            ctx = self._contexts.get(context_id)
            if ctx is None or ctx.messages:
                return False
            del self._contexts[context_id]
            held = [key for key, holder in self._message_ids.items() if holder == context_id]
            for key in held:
                del self._message_ids[key]
            return True

    def _history(self, context_id: str, limit: int) -> list[StoredTurn]:
        with self._open:
            ctx = self._contexts.get(context_id)
            return [] if ctx is None else _last_turns(ctx, limit)

    def _replies(self, context_id: str, limit: int) -> list[tuple[str, bytes]]:
        with self._open:
            ctx = self._contexts.get(context_id)
            if ctx is None:
                return []
            answered = [(mid, m.reply) for mid, m in ctx.messages.items() if m.reply is not None]
            return [(mid, reply) for mid, reply in answered[:limit] if reply is not None]


def _updated(
    conversation: Conversation,
    *,
    last_activity: float | None = None,
    closed: bool | None = None,
    account: str | None = None,
) -> Conversation:
    """`conversation` with the given fields changed, built directly: `attrs.evolve`
    introspects the class on every call, and a turn changes its conversation twice."""
    c = conversation
    return Conversation(
        c.context_id,
        c.brand_id,
        c.issuer,
        c.sub,
        c.created_at,
        c.last_activity if last_activity is None else last_activity,
        c.closed if closed is None else closed,
        c.account if account is None else account,
    )


def _claimed_again(message: StoredMessage, text: str, now: float) -> StoredMessage:
    """`message` with `text`, claimed at `now`; its reply fields kept. Built directly, as
    `_updated` is (a turn claims on its hot path)."""
    m = message
    return StoredMessage(text, now, m.reply_message_id, m.reply_text, m.reply)


def _last_turns(ctx: Context, limit: int) -> list[StoredTurn]:
    """The last `limit` answered turns of `ctx`, oldest first; the caller holds the lock.

    Walks the messages from the newest and stops at `limit`: a turn costs the same at any
    position in a long conversation (dicts keep insertion order, and iterate backwards).
    """
    turns: list[StoredTurn] = []
    if limit <= 0:
        return turns
    for message_id in reversed(ctx.messages):
        m = ctx.messages[message_id]
        if m.reply_message_id is not None and m.reply_text is not None:
            turns.append(
                StoredTurn(
                    message_id=message_id,
                    text=m.text,
                    reply_message_id=m.reply_message_id,
                    reply_text=m.reply_text,
                )
            )
            if len(turns) == limit:
                break
    turns.reverse()
    return turns
