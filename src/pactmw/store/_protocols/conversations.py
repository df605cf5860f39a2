"""The conversation and turn operations of the Store contract."""

from __future__ import annotations

from typing import Protocol

from pactmw.core.encoding import uuid7_text
from pactmw.store.base import Claim, Conversation, StoredTurn, has_nul, reject_nul

__all__ = ["ConversationStore", "OwnedMessageId"]

#: A message id as its owner holds it across conversations: (brand_id, issuer, sub, id).
OwnedMessageId = tuple[str, str, str, str]


class ConversationStore(Protocol):
    """Conversations and their turns (claim, reply, release, history)."""

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id.

        The id is a time-ordered UUID (version 7, `uuid7_text`); the conversation starts
        open and unbound.
        """
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub)
        context_id = uuid7_text()
        self._create_conversation(context_id, brand_id, issuer, sub, now)
        return context_id

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown (any string is accepted)."""
        return None if has_nul(context_id) else self._get_conversation(context_id)

    def close_conversation(self, context_id: str) -> None:
        """Mark the conversation closed; unknown ids are ignored (closing is idempotent)."""
        if not has_nul(context_id):
            self._close_conversation(context_id)

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` to the conversation if none is bound; return the account bound now.

        The result may be another account bound earlier: the caller compares. Exactly one
        of several concurrent callers wins. Raises `NotFound` for an unknown conversation.
        """
        reject_nul(context_id=context_id, account=account)
        return self._bind_account(context_id, account)

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`.

        A claim without a reply older than `lease_seconds` (its worker died) is taken over:
        the taker gets `new` and a fresh lease. Exactly one of several concurrent callers
        gets `new`. Raises `NotFound` for an unknown conversation.
        """
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        return self._claim_turn(context_id, message_id, text, now, lease_seconds, 0)

    def renew_claim(
        self, *, context_id: str, message_id: str, claimed_at: float, now: float
    ) -> bool:
        """Extend the lease of an unanswered claim the caller still holds; return whether it did.

        The caller holds the claim while its lease still starts at `claimed_at`: the `now` it
        passed to the `claim_message` that answered `new`, or to its last successful renewal.
        The lease then starts again at `now`, so other callers get `pending` for another
        `lease_seconds`. False, and nothing changes, when the claim was taken over (a lease
        that started elsewhen), released, answered, or never made, or for an unknown
        conversation: the caller has lost the turn and must not renew it again.
        """
        if has_nul(context_id, message_id):
            return False
        return self._renew_claim(context_id, message_id, claimed_at, now)

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
        """Store the reply to a claimed user message, in one transaction.

        The first reply stored wins: a second `store_reply` for the same message (a worker
        whose lease was taken over) is ignored, so retries stay byte-identical. Raises
        `NotFound` when the message was never claimed (or was released), `ValueError` when
        `reply_message_id` is already an agent message id in the conversation.
        """
        if has_nul(context_id, message_id, reply_message_id, reply_text):
            reject_nul(
                context_id=context_id,
                message_id=message_id,
                reply_message_id=reply_message_id,
                reply_text=reply_text,
            )
        self._store_reply(context_id, message_id, reply_message_id, reply_text, bytes(reply), now)

    def release_claim(self, *, context_id: str, message_id: str, claimed_at: float) -> None:
        """Drop an unanswered claim the caller still holds (its bot failed) so a retry runs
        the bot again.

        The caller holds the claim while its lease still starts at `claimed_at`, as for
        `renew_claim`: the `now` of the claim that answered `new` (of `start_conversation`
        for a first message), or of its last successful renewal. A claim taken over after
        the caller's lease ran out is the taker's and is left alone, as are answered
        messages and unknown ids.
        """
        if not has_nul(context_id, message_id):
            self._release_claim(context_id, message_id, claimed_at)

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
        """Mint a conversation and claim its first user message, in one transaction.

        The same as `create_conversation`, then `bind_account(account)` when `account` is
        not None, then a `claim_message` that is always `new` (nothing else knows the id
        yet), but one store round trip instead of three. Returns the new conversation's id.

        `context_id`, when given, is the id to mint instead of a new UUID7 (a protocol
        whose retried "create" must find the conversation it made derives the id); when a
        conversation already has it, `ValueError` and nothing changes.
        """
        # Which value holds a NUL is looked for only when one does (every turn passes here).
        if has_nul(brand_id, issuer, sub, message_id, text, account or "", context_id or ""):
            reject_nul(brand_id=brand_id, issuer=issuer, sub=sub, message_id=message_id, text=text)
            reject_nul(account=account or "", context_id=context_id or "")
        started = Conversation(
            uuid7_text() if context_id is None else context_id,
            brand_id,
            issuer,
            sub,
            now,
            now,
            False,
            account,
        )
        if not self._start_conversation(started, message_id, text, context_id is not None):
            raise ValueError(f"conversation {context_id!r} already exists")
        return started.context_id

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
        """`claim_message`, and when the claim is `new`, the turns before it, atomically.

        The returned `Claim.history` is what `history(context_id, limit=history_limit)`
        returned just before the claim (the claimed message is unanswered, so never in it);
        it is empty for every other kind. One round trip instead of two.
        """
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        return self._claim_turn(context_id, message_id, text, now, lease_seconds, history_limit)

    def claim_message_id(
        self, *, brand_id: str, issuer: str, sub: str, message_id: str, context_id: str
    ) -> str:
        """Record `message_id` as a message of conversation `context_id`, unless one of the
        owner's conversations already holds it; return the conversation that holds it now.

        For a protocol whose message ids are unique per owner `(brand_id, issuer, sub)`
        across conversations (Poppy, PAP-7.3-01), where `claim_turn`'s per-conversation
        claim alone would take the id sent to another conversation as a new message. Exactly
        one of several concurrent callers records it. `context_id` need not exist yet (a
        conversation whose id derives from its first message claims the id first).
        """
        reject_nul(
            brand_id=brand_id, issuer=issuer, sub=sub, message_id=message_id, context_id=context_id
        )
        return self._claim_message_id((brand_id, issuer, sub, message_id), context_id)

    def release_message_id(
        self, *, brand_id: str, issuer: str, sub: str, message_id: str, context_id: str
    ) -> None:
        """Forget `message_id` of the owner if conversation `context_id` holds it and has
        no turn of it, claimed or answered (the message was refused or its turn released, so
        it was never received); otherwise nothing. Atomic, so a failed request may call it
        whatever happened: a message another request is answering keeps its id."""
        if not has_nul(brand_id, issuer, sub, message_id, context_id):
            self._release_message_id((brand_id, issuer, sub, message_id), context_id)

    def delete_empty_conversation(self, *, context_id: str) -> bool:
        """Delete conversation `context_id` if it holds no turn, claimed or answered (its
        first message was given up: never received), with the message ids it holds; True if
        it was deleted. Atomic: a turn claimed there meanwhile keeps it."""
        if has_nul(context_id):
            return False
        return self._delete_empty_conversation(context_id)

    def history(self, context_id: str, *, limit: int = 50) -> list[StoredTurn]:
        """Return the last `limit` answered turns, oldest first.

        Turns are in the order their user messages were claimed (a takeover keeps the
        message's place; a released and re-claimed one moves to the end). Unanswered claims
        are left out. An unknown conversation has an empty history.
        """
        if limit <= 0 or has_nul(context_id):
            return []
        return self._history(context_id, limit)

    def replies(self, context_id: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """Return `(message_id, stored reply)` of the first `limit` answered turns, in
        history order (oldest first); empty for an unknown conversation.

        The stored bytes are the ones a retry gets back: a protocol that keeps its own record
        of a turn in them (Poppy's events) reads the conversation back from here.
        """
        if limit <= 0 or has_nul(context_id):
            return []
        return self._replies(context_id, limit)

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _create_conversation(
        self, context_id: str, brand_id: str, issuer: str, sub: str, now: float
    ) -> None:
        """Store a new open, unbound conversation."""
        ...

    def _get_conversation(self, context_id: str) -> Conversation | None: ...

    def _close_conversation(self, context_id: str) -> None: ...

    def _bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` unless one is bound; the account bound now (`NotFound` if unknown)."""
        ...

    def _claim_turn(
        self, context_id: str, message_id: str, text: str, now: float, lease: float, limit: int
    ) -> Claim:
        """Claim the message (`decide_claim`); a `new` claim carries the last `limit` turns
        before it (none when `limit` is 0). `NotFound` for an unknown conversation."""
        ...

    def _renew_claim(
        self, context_id: str, message_id: str, claimed_at: float, now: float
    ) -> bool: ...

    def _store_reply(
        self, context_id: str, message_id: str, reply_id: str, text: str, reply: bytes, now: float
    ) -> None:
        """Store the first reply to a claimed message (`NotFound` when unclaimed, ValueError
        when `reply_id` is an agent message id of the conversation already)."""
        ...

    def _release_claim(self, context_id: str, message_id: str, claimed_at: float) -> None: ...

    def _start_conversation(
        self, conversation: Conversation, message_id: str, text: str, derived: bool
    ) -> bool:
        """Store the conversation with its first message claimed at its `created_at`; False,
        storing nothing, when a `derived` id is already taken."""
        ...

    def _claim_message_id(self, key: OwnedMessageId, context_id: str) -> str:
        """Record `key` for `context_id` unless it is recorded; the conversation holding it."""
        ...

    def _release_message_id(self, key: OwnedMessageId, context_id: str) -> None:
        """Drop `key` if `context_id` holds it and has no turn of message `key[3]`."""
        ...

    def _delete_empty_conversation(self, context_id: str) -> bool:
        """Delete the conversation and its message ids if it holds no turn; whether it did."""
        ...

    def _history(self, context_id: str, limit: int) -> list[StoredTurn]:
        """The last `limit` (at least 1) answered turns, oldest first."""
        ...

    def _replies(self, context_id: str, limit: int) -> list[tuple[str, bytes]]: ...
