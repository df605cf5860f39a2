"""The Store contract: what every backend guarantees, and the values it returns.

Every operation is atomic on its own and safe to call from many threads; the sqlite and
PostgreSQL backends are also safe across processes and (PostgreSQL) machines. Times are
float epoch seconds passed in by the caller, so tests drive the clock.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from attrs import frozen

__all__ = [
    "Claim",
    "ClaimKind",
    "Conversation",
    "NotFound",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Turn",
]

ClaimKind = Literal["new", "reply", "pending", "conflict"]


class StoreError(Exception):
    """A store operation could not be carried out.

    The base of the store's own exceptions, so a caller can map all of them at once.
    """


class StoreUnavailable(StoreError):
    """The backend cannot be reached or used right now (down, locked, closed).

    Callers should answer "try again later" (HTTP 503). If the connection died during a
    commit the write may or may not have happened; the keyed operations make the client's
    retry safe either way. The message never contains a password.
    """


class NotFound(StoreError, LookupError):
    """The conversation (or the claimed message) an operation names does not exist."""


def reject_nul(**values: str) -> None:
    """Raise ValueError if a string to be stored holds a NUL character.

    PostgreSQL text cannot hold NUL, and ids come from clients (JSON allows "\\u0000"), so
    every backend refuses them the same way instead of failing deep in a driver.
    """
    for name, value in values.items():
        if "\x00" in value:
            raise ValueError(f"{name} must not contain NUL characters")


def has_nul(*values: str) -> bool:
    """Tell whether any of the strings holds NUL (so a lookup by it can find nothing)."""
    return any("\x00" in value for value in values)


@frozen
class Conversation:
    """One conversation (`contextId`) and who owns it.

    A conversation continues only for the same `brand_id` and the same `(issuer, sub)`;
    the store records the owner, the caller checks it.
    """

    context_id: str
    brand_id: str
    issuer: str
    sub: str
    created_at: float
    last_activity: float
    closed: bool
    account: str | None


@frozen
class Turn:
    """One answered exchange: the user's message and the agent's reply."""

    message_id: str
    text: str
    reply_message_id: str
    reply_text: str


@frozen
class Claim:
    """The outcome of `Store.claim_message`.

    - `new`: the caller owns the turn; run the bot, then `store_reply` (or `release_claim`).
    - `reply`: answered before; `reply` holds the stored bytes, to be sent back unchanged.
    - `pending`: another worker holds a live claim on this message and has not answered.
    - `conflict`: the message id is the id of an agent reply in this conversation.
    """

    kind: ClaimKind
    reply: bytes | None = None


@runtime_checkable
class Store(Protocol):
    """Persistent state of a Provider, with atomic operations named for their guarantee.

    Implementations: `MemoryStore` (one process), `SqliteStore` (one machine, many
    processes), `PostgresStore` (many machines). All share one behaviour, proven by the
    same contract tests. Operations that write refuse any string holding NUL with
    `ValueError`; lookups by an id holding NUL find nothing.
    """

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

    def history(self, context_id: str, *, limit: int = 50) -> list[Turn]:
        """Return the last `limit` answered turns, oldest first.

        Turns are in the order their user messages were claimed (a takeover keeps the
        message's place; a released and re-claimed one moves to the end). Unanswered claims
        are left out. An unknown conversation has an empty history.
        """
        ...

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist an enable/disable override for the personal agent `issuer`."""
        ...

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none (use the config)."""
        ...

    def close(self) -> None:
        """Release connections; later calls raise `StoreUnavailable`. Idempotent."""
        ...
