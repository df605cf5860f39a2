"""Conversations and turns of the memory store."""

from __future__ import annotations

import uuid

from attrs import evolve

from pactmw.store._decisions import ClaimedMessage, decide_claim
from pactmw.store._memory.core import Context, MemoryCore, StoredMessage
from pactmw.store.base import Claim, Conversation, NotFound, StoredTurn, reject_nul

__all__ = ["ConversationsMixin"]


class ConversationsMixin(MemoryCore):
    """The conversation and turn operations of `Store`, on the in-memory state."""

    def _context(self, context_id: str) -> Context:
        ctx = self._contexts.get(context_id)
        if ctx is None:
            raise NotFound(f"unknown conversation {context_id!r}")
        return ctx

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id."""
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub)
        context_id = str(uuid.uuid4())
        conversation = Conversation(
            context_id=context_id,
            brand_id=brand_id,
            issuer=issuer,
            sub=sub,
            created_at=now,
            last_activity=now,
            closed=False,
            account=None,
        )
        with self._lock:
            self._check_open()
            self._contexts[context_id] = Context(conversation, {}, set())
        return context_id

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            return None if ctx is None else ctx.conversation

    def close_conversation(self, context_id: str) -> None:
        """Mark the conversation closed; unknown ids are ignored."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            if ctx is not None:
                ctx.conversation = evolve(ctx.conversation, closed=True)

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` if none is bound; return the account bound now."""
        reject_nul(context_id=context_id, account=account)
        with self._lock:
            self._check_open()
            ctx = self._context(context_id)
            if ctx.conversation.account is None:
                ctx.conversation = evolve(ctx.conversation, account=account)
            assert ctx.conversation.account is not None
            return ctx.conversation.account

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`."""
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        with self._lock:
            self._check_open()
            return self._claim(self._context(context_id), message_id, text, now, lease_seconds)

    def claim_turn(
        self,
        *,
        context_id: str,
        message_id: str,
        text: str,
        now: float,
        lease_seconds: float,
        history_limit: int = 50,
    ) -> Claim:
        """`claim_message`, with the turns before it when the claim is `new`."""
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        with self._lock:
            self._check_open()
            ctx = self._context(context_id)
            claim = self._claim(ctx, message_id, text, now, lease_seconds)
            if claim.kind != "new":
                return claim
            # The claimed message is unanswered, so it is not in its own history.
            return evolve(claim, history=tuple(_last_turns(ctx, history_limit)))

    def start_conversation(
        self,
        *,
        brand_id: str,
        issuer: str,
        sub: str,
        account: str | None,
        message_id: str,
        text: str,
        now: float,
        context_id: str | None = None,
    ) -> str:
        """Mint a conversation and claim its first user message, in one step."""
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub, message_id=message_id, text=text)
        if account is not None:
            reject_nul(account=account)
        derived = context_id is not None
        context_id = context_id if context_id is not None else str(uuid.uuid4())
        conversation = Conversation(
            context_id=context_id,
            brand_id=brand_id,
            issuer=issuer,
            sub=sub,
            created_at=now,
            last_activity=now,
            closed=False,
            account=account,
        )
        first = StoredMessage(text=text, claimed_at=now)
        context = Context(conversation, {message_id: first}, set())
        with self._lock:
            self._check_open()
            if derived and context_id in self._contexts:
                raise ValueError(f"conversation {context_id!r} already exists")
            self._contexts[context_id] = context
        return context_id

    def _claim(
        self, ctx: Context, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """The claim decision and its write; the caller holds the lock."""
        message = ctx.messages.get(message_id)
        decision = decide_claim(
            None if message is None else ClaimedMessage(message.claimed_at, message.reply),
            is_reply_id=message_id in ctx.agent_message_ids,
            now=now,
            lease_seconds=lease_seconds,
        )
        if decision.write == "insert":
            ctx.messages[message_id] = StoredMessage(text=text, claimed_at=now)
        elif decision.write == "take_over":
            # Keep the message's place in the history.
            assert message is not None
            ctx.messages[message_id] = evolve(message, text=text, claimed_at=now)
        if decision.write is not None:
            ctx.conversation = evolve(ctx.conversation, last_activity=now)
        return decision.claim

    def renew_claim(
        self, *, context_id: str, message_id: str, claimed_at: float, now: float
    ) -> bool:
        """Extend the lease of an unanswered claim the caller still holds."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            message = None if ctx is None else ctx.messages.get(message_id)
            if ctx is None or message is None:
                return False
            if message.reply is not None or message.claimed_at != claimed_at:
                return False
            ctx.messages[message_id] = evolve(message, claimed_at=now)
            return True

    def store_reply(
        self,
        *,
        context_id: str,
        message_id: str,
        reply_message_id: str,
        reply_text: str,
        reply: bytes,
        now: float,
    ) -> None:
        """Store the reply to a claimed user message; the first reply stored wins."""
        reject_nul(
            context_id=context_id,
            message_id=message_id,
            reply_message_id=reply_message_id,
            reply_text=reply_text,
        )
        with self._lock:
            self._check_open()
            ctx = self._context(context_id)
            message = ctx.messages.get(message_id)
            if message is None:
                raise NotFound(f"message {message_id!r} was not claimed in {context_id!r}")
            if message.reply is not None:
                return
            if reply_message_id in ctx.agent_message_ids:
                raise ValueError(f"reply message id {reply_message_id!r} is already used")
            ctx.messages[message_id] = evolve(
                message,
                reply_message_id=reply_message_id,
                reply_text=reply_text,
                reply=bytes(reply),
            )
            ctx.agent_message_ids.add(reply_message_id)
            ctx.conversation = evolve(ctx.conversation, last_activity=now)

    def release_claim(self, *, context_id: str, message_id: str) -> None:
        """Drop an unanswered claim so a retry runs the bot again."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            if ctx is None:
                return
            message = ctx.messages.get(message_id)
            if message is not None and message.reply is None:
                del ctx.messages[message_id]

    def history(self, context_id: str, *, limit: int = 50) -> list[StoredTurn]:
        """Return the last `limit` answered turns, oldest first."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            return [] if ctx is None else _last_turns(ctx, limit)

    def replies(self, context_id: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """Return `(message_id, stored reply)` of the first `limit` answered turns."""
        with self._lock:
            self._check_open()
            ctx = self._contexts.get(context_id)
            if ctx is None or limit <= 0:
                return []
            answered = [(mid, m.reply) for mid, m in ctx.messages.items() if m.reply is not None]
            return [(mid, reply) for mid, reply in answered[:limit] if reply is not None]


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
