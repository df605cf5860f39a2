"""Conversations and turns of the SQL stores (the contract, with its input checks:
store/_protocols/conversations.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import evolve

from pactmw.store._decisions import ClaimedMessage, decide_claim
from pactmw.store._protocols.conversations import OwnedMessageId
from pactmw.store._sql.core import Executor, SqlCore, conversation_from_row, opt_bytes
from pactmw.store.base import (
    Claim,
    Conversation,
    NotFound,
    StoredTurn,
    StoreError,
    StoreUnavailable,
)

__all__ = ["ConversationsMixin"]


class ConversationsMixin(SqlCore):
    """The conversation and turn primitives of `ConversationStore`, over the dialect hooks."""

    def _create_conversation(
        self, context_id: str, brand_id: str, issuer: str, sub: str, now: float
    ) -> None:
        with self._write() as ex:
            ex.execute(self._sql.insert_conversation, (context_id, brand_id, issuer, sub, now, now))

    def _get_conversation(self, context_id: str) -> Conversation | None:
        return self._read_one(self._sql.conversation, (context_id,), conversation_from_row)

    def _close_conversation(self, context_id: str) -> None:
        with self._write() as ex:
            ex.execute(self._sql.close_conversation, (context_id,))

    def _bind_account(self, context_id: str, account: str) -> str:
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

    def _claim_turn(
        self, context_id: str, message_id: str, text: str, now: float, lease: float, limit: int
    ) -> Claim:
        sql = self._sql
        with self._write() as ex:
            self._lock_conversation(ex, context_id)
            reply_id = ex.execute(sql.is_reply_id, (context_id, message_id)).fetchone()
            row = ex.execute(sql.claim, (context_id, message_id)).fetchone()
            decision = decide_claim(
                None if row is None else ClaimedMessage(float(row[0]), opt_bytes(row[1])),
                is_reply_id=reply_id is not None,
                now=now,
                lease_seconds=lease,
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
            if decision.claim.kind != "new" or limit <= 0:
                return decision.claim
            # The claimed message is unanswered, so it is not in its own history.
            rows = ex.execute(sql.history, (context_id, limit)).fetchall()
        return evolve(decision.claim, history=_turns(rows))

    def _start_conversation(
        self, conversation: Conversation, message_id: str, text: str, derived: bool
    ) -> bool:
        sql = self._sql
        context_id, now = conversation.context_id, conversation.created_at
        params = (context_id, conversation.brand_id, conversation.issuer, conversation.sub)
        if self._returning:  # data-modifying WITH: one statement, one round trip
            start = sql.start_turn_with_id if derived else sql.start_turn
            values = (*params, now, now, conversation.account, message_id, text, now)
            with self._one_statement() as ex:
                return ex.execute(start, values).rowcount > 0
        with self._write() as ex:
            # A derived id may be taken: its statement then inserts nothing.
            insert = sql.start_conversation_with_id if derived else sql.start_conversation
            if ex.execute(insert, (*params, now, now, conversation.account)).rowcount == 0:
                return False
            ex.execute(sql.insert_claim, (context_id, message_id, text, now))
        return True

    def _renew_claim(self, context_id: str, message_id: str, claimed_at: float, now: float) -> bool:
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

    def _store_reply(
        self, context_id: str, message_id: str, reply_id: str, text: str, reply: bytes, now: float
    ) -> None:
        sql = self._sql
        free = (reply_id, text, reply, now, context_id, message_id, context_id, reply_id)
        if self._returning:
            # One statement (PostgreSQL: one round trip instead of four): the conversation's
            # row lock, the reply if nothing stands in its way, and the touch.
            try:
                with self._one_statement() as ex:
                    touched = ex.execute(sql.store_free_reply_touching, (context_id, *free, now))
                    if touched.rowcount == 1:
                        return
            except StoreUnavailable:
                raise
            except StoreError:
                # Another message's reply took the reply id after this statement's snapshot
                # (the unique index refused it): the transaction below says so.
                pass
        with self._write() as ex:
            if self._locks_rows:
                self._lock_conversation(ex, context_id)
            if not self._returning and ex.execute(sql.store_free_reply, free).rowcount == 1:
                ex.execute(sql.touch_conversation, (now, context_id))
                return
            # Nothing changed: find out why, under the lock.
            row = ex.execute(sql.is_replied, (context_id, message_id)).fetchone()
            if row is None:
                raise NotFound(f"message {message_id!r} was not claimed in {context_id!r}")
            if row[0]:
                return
            if ex.execute(sql.is_reply_id, (context_id, reply_id)).fetchone() is not None:
                raise ValueError(f"reply message id {reply_id!r} is already used")
            # Free by now (what stood in the way was rolled back): store it under the lock.
            ex.execute(sql.store_reply, (reply_id, text, reply, now, context_id, message_id))
            ex.execute(sql.touch_conversation, (now, context_id))

    def _release_claim(self, context_id: str, message_id: str, claimed_at: float) -> None:
        with self._write() as ex:
            # The lock `claim_message` takes first, as `_renew_claim` does: a takeover that
            # read the old lease cannot then find its row deleted by the old holder.
            if (
                self._locks_rows
                and not ex.execute(self._sql.lock_conversation, (context_id,)).fetchone()
            ):
                return
            ex.execute(self._sql.release_claim, (context_id, message_id, claimed_at))

    def _claim_message_id(self, key: OwnedMessageId, context_id: str) -> str:
        for _ in range(3):
            with self._write() as ex:
                # A concurrent insert of the same key waits for the first to commit
                # (PostgreSQL) or for the write lock (sqlite), then inserts nothing; the read
                # (a statement of its own under READ COMMITTED) sees the winner's row.
                ex.execute(self._sql.insert_message_id, (*key, context_id))
                row = ex.execute(self._sql.message_id_holder, key).fetchone()
            if row is not None:
                return str(row[0])
            # The winner's row was released in between (its conversation refused the
            # message): the id is free again, so try again.
        raise StoreError(f"message id {key[3]!r} kept changing hands")

    def _release_message_id(self, key: OwnedMessageId, context_id: str) -> None:
        with self._write() as ex:
            ex.execute(self._sql.release_message_id, (*key, context_id))

    def _delete_empty_conversation(self, context_id: str) -> bool:
        sql = self._sql
        with self._write() as ex:
            # The lock every turn write takes first: a claim waiting for it then finds the
            # conversation gone (NotFound), never a conversation deleted under its turn.
            if self._locks_rows and not ex.execute(sql.lock_conversation, (context_id,)).fetchone():
                return False
            if ex.execute(sql.delete_empty_conversation, (context_id, context_id)).rowcount == 0:
                return False
            ex.execute(sql.delete_message_ids_of, (context_id,))
            return True

    def _history(self, context_id: str, limit: int) -> list[StoredTurn]:
        with self._read() as ex:
            rows = ex.execute(self._sql.history, (context_id, limit)).fetchall()
        return list(_turns(rows))

    def _replies(self, context_id: str, limit: int) -> list[tuple[str, bytes]]:
        with self._read() as ex:
            rows = ex.execute(self._sql.replies, (context_id, limit)).fetchall()
        return [(str(row[0]), bytes(row[1])) for row in rows]


def _turns(rows: Sequence[Sequence[Any]]) -> tuple[StoredTurn, ...]:
    """History rows (newest first, as the index serves them) as turns, oldest first."""
    return tuple(
        StoredTurn(message_id=r[0], text=r[1], reply_message_id=r[2], reply_text=r[3])
        for r in reversed(rows)
    )
