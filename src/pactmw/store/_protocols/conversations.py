"""The conversation and turn operations of the Store contract."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pactmw.store.base import Claim, Conversation, StoredTurn

__all__ = ["ConversationStore"]


class ConversationStore(Protocol):
    """Conversations and their turns (claim, reply, release, history)."""

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id.

        The id is a random UUID4 string; the conversation starts open and unbound.
        """
        ...

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown (any string is accepted)."""
        ...

    def close_conversation(self, context_id: str) -> None:
        """Mark the conversation closed; unknown ids are ignored (closing is idempotent)."""
        ...

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` to the conversation if none is bound; return the account bound now.

        The result may be another account bound earlier: the caller compares. Exactly one
        of several concurrent callers wins. Raises `NotFound` for an unknown conversation.
        """
        ...

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`.

        A claim without a reply older than `lease_seconds` (its worker died) is taken over:
        the taker gets `new` and a fresh lease. Exactly one of several concurrent callers
        gets `new`. Raises `NotFound` for an unknown conversation.
        """
        ...

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
        ...

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
        ...

    def release_claim(self, *, context_id: str, message_id: str) -> None:
        """Drop an unanswered claim (the bot failed) so a retry runs the bot again.

        Answered messages and unknown ids are left alone.
        """
        ...

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

        `context_id`, when given, is the id to mint instead of a random UUID4 (a protocol
        whose retried "create" must find the conversation it made derives the id); when a
        conversation already has it, `ValueError` and nothing changes.
        """
        ...

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
        ...

    def history(self, context_id: str, *, limit: int = 50) -> list[StoredTurn]:
        """Return the last `limit` answered turns, oldest first.

        Turns are in the order their user messages were claimed (a takeover keeps the
        message's place; a released and re-claimed one moves to the end). Unanswered claims
        are left out. An unknown conversation has an empty history.
        """
        ...

    def replies(self, context_id: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """Return `(message_id, stored reply)` of the first `limit` answered turns, in
        history order (oldest first); empty for an unknown conversation.

        The stored bytes are the ones a retry gets back: a protocol that keeps its own record
        of a turn in them (Poppy's events) reads the conversation back from here.
        """
        ...
