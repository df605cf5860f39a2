"""Conversations and turns of the SQL stores."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from attrs import evolve

from pactmw.store._decisions import ClaimedMessage, decide_claim
from pactmw.store._sql.core import Executor, SqlCore, conversation_from_row, opt_bytes
from pactmw.store.base import Claim, Conversation, NotFound, StoredTurn, has_nul, reject_nul

__all__ = ["ConversationsMixin"]


class ConversationsMixin(SqlCore):
    """The conversation and turn operations of `Store`, over the dialect hooks."""

    def create_conversation(self, *, brand_id: str, issuer: str, sub: str, now: float) -> str:
        """Mint a new conversation owned by `(brand_id, issuer, sub)`; return its id."""
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub)
        context_id = str(uuid.uuid4())
        with self._write() as ex:
            ex.execute(self._sql.insert_conversation, (context_id, brand_id, issuer, sub, now, now))
        return context_id

    def get_conversation(self, context_id: str) -> Conversation | None:
        """Return the conversation, or None if the id is unknown."""
        if has_nul(context_id):
            return None
        with self._read() as ex:
            row = ex.execute(self._sql.conversation, (context_id,)).fetchone()
        return None if row is None else conversation_from_row(row)

    def close_conversation(self, context_id: str) -> None:
        """Mark the conversation closed; unknown ids are ignored."""
        if has_nul(context_id):
            return
        with self._write() as ex:
            ex.execute(self._sql.close_conversation, (context_id,))

    def bind_account(self, context_id: str, account: str) -> str:
        """Bind `account` if none is bound; return the account bound now."""
        reject_nul(context_id=context_id, account=account)
        with self._write() as ex:
            if self._returning:
                # One statement: a concurrent binder blocks on the row, then re-evaluates
                # COALESCE against the committed winner (READ COMMITTED re-check).
                row = ex.execute(self._sql.bind_account_returning, (account, context_id)).fetchone()
            else:
                ex.execute(self._sql.bind_account, (account, context_id))
                row = ex.execute(self._sql.bound_account, (context_id,)).fetchone()
        if row is None:
            raise NotFound(f"unknown conversation {context_id!r}")
        return str(row[0])

    def _lock_conversation(self, ex: Executor, context_id: str) -> None:
        # Where rows are locked, every turn write takes this row lock first, so claims and
        # replies of one conversation serialize, and each later statement (READ COMMITTED)
        # sees the winner's committed rows.
        if ex.execute(self._sql.lock_conversation, (context_id,)).fetchone() is None:
            raise NotFound(f"unknown conversation {context_id!r}")

    def claim_message(
        self, *, context_id: str, message_id: str, text: str, now: float, lease_seconds: float
    ) -> Claim:
        """Atomically decide who answers the user message `message_id`; see `Claim`."""
        reject_nul(context_id=context_id, message_id=message_id, text=text)
        with self._write() as ex:
            return self._claim(ex, context_id, message_id, text, now, lease_seconds)

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
        with self._write() as ex:
            claim = self._claim(ex, context_id, message_id, text, now, lease_seconds)
            if claim.kind != "new" or history_limit <= 0:
                return claim
            # The claimed message is unanswered, so it is not in its own history.
            rows = ex.execute(self._sql.history, (context_id, history_limit)).fetchall()
        return evolve(claim, history=_turns(rows))

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
        """Mint a conversation and claim its first user message, in one transaction."""
        reject_nul(brand_id=brand_id, issuer=issuer, sub=sub, message_id=message_id, text=text)
        if account is not None:
            reject_nul(account=account)
        sql = self._sql
        with self._write() as ex:
            if context_id is None:
                context_id = str(uuid.uuid4())
                ex.execute(
                    sql.start_conversation, (context_id, brand_id, issuer, sub, now, now, account)
                )
            else:
                reject_nul(context_id=context_id)
                inserted = ex.execute(
                    sql.start_conversation_with_id,
                    (context_id, brand_id, issuer, sub, now, now, account),
                )
                if inserted.rowcount == 0:
                    raise ValueError(f"conversation {context_id!r} already exists")
            ex.execute(sql.insert_claim, (context_id, message_id, text, now))
        return context_id

    def _claim(
        self,
        ex: Executor,
        context_id: str,
        message_id: str,
        text: str,
        now: float,
        lease_seconds: float,
    ) -> Claim:
        """The claim decision and its writes, inside the caller's write transaction."""
        sql = self._sql
        self._lock_conversation(ex, context_id)
        reply_id = ex.execute(sql.is_reply_id, (context_id, message_id)).fetchone()
        row = ex.execute(sql.claim, (context_id, message_id)).fetchone()
        decision = decide_claim(
            None if row is None else ClaimedMessage(float(row[0]), opt_bytes(row[1])),
            is_reply_id=reply_id is not None,
            now=now,
            lease_seconds=lease_seconds,
        )
        if decision.write == "insert":
            inserted = ex.execute(sql.insert_claim, (context_id, message_id, text, now))
            if inserted.rowcount == 0:
                # Unreachable while the locks hold; the constraint is the backstop.
                return Claim(kind="pending")
        elif decision.write == "take_over":
            # Keep the row (and its place in the history).
            ex.execute(sql.take_over_claim, (text, now, context_id, message_id))
        if decision.write is not None:
            ex.execute(sql.touch_conversation, (now, context_id))
        return decision.claim

    def renew_claim(
        self, *, context_id: str, message_id: str, claimed_at: float, now: float
    ) -> bool:
        """Extend the lease of an unanswered claim the caller still holds."""
        if has_nul(context_id, message_id):
            return False
        with self._write() as ex:
            # The lock `claim_message` takes first: a takeover that read the old lease cannot
            # then overwrite this renewal (or be overwritten by it).
            locked = (
                not self._locks_rows
                or ex.execute(self._sql.lock_conversation, (context_id,)).fetchone()
            )
            if not locked:
                return False
            renewed = ex.execute(self._sql.renew_claim, (now, context_id, message_id, claimed_at))
            return renewed.rowcount == 1

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
        sql = self._sql
        with self._write() as ex:
            if self._locks_rows:
                self._lock_conversation(ex, context_id)
            row = ex.execute(sql.is_replied, (context_id, message_id)).fetchone()
            if row is None:
                raise NotFound(f"message {message_id!r} was not claimed in {context_id!r}")
            if row[0]:
                return
            if ex.execute(sql.is_reply_id, (context_id, reply_message_id)).fetchone() is not None:
                raise ValueError(f"reply message id {reply_message_id!r} is already used")
            ex.execute(
                sql.store_reply,
                (reply_message_id, reply_text, bytes(reply), now, context_id, message_id),
            )
            ex.execute(sql.touch_conversation, (now, context_id))

    def release_claim(self, *, context_id: str, message_id: str) -> None:
        """Drop an unanswered claim so a retry runs the bot again."""
        if has_nul(context_id, message_id):
            return
        with self._write() as ex:
            ex.execute(self._sql.release_claim, (context_id, message_id))

    def history(self, context_id: str, *, limit: int = 50) -> list[StoredTurn]:
        """Return the last `limit` answered turns, oldest first."""
        if limit <= 0 or has_nul(context_id):
            return []
        with self._read() as ex:
            rows = ex.execute(self._sql.history, (context_id, limit)).fetchall()
        return list(_turns(rows))

    def replies(self, context_id: str, *, limit: int = 1000) -> list[tuple[str, bytes]]:
        """Return `(message_id, stored reply)` of the first `limit` answered turns."""
        if limit <= 0 or has_nul(context_id):
            return []
        with self._read() as ex:
            rows = ex.execute(self._sql.replies, (context_id, limit)).fetchall()
        return [(str(row[0]), bytes(row[1])) for row in rows]


def _turns(rows: Sequence[Sequence[Any]]) -> tuple[StoredTurn, ...]:
    """History rows (newest first, as the index serves them) as turns, oldest first."""
    return tuple(
        StoredTurn(message_id=r[0], text=r[1], reply_message_id=r[2], reply_text=r[3])
        for r in reversed(rows)
    )
