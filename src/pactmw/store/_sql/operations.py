"""Poppy operations of the SQL stores (the contract: store/_protocols/operations.py).

`migration(types)` is schema version 11 (store/_sql/migrations.py);
each backend class gets its `_operation_sql` from its dialect (`SqlStore.__init_subclass__`).
The compare-and-set is one conditional `UPDATE` (`WHERE state = 'proposed' AND
revision = ?`): the database lets exactly one of concurrent confirmations change the row,
on every backend, without reading it first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pactmw.store._protocols.operations import (
    HELD_STATUS,
    KeyedProposal,
    OperationChange,
    OperationResult,
    RememberedAnswer,
    StoredOperation,
    decide_confirmation,
)
from pactmw.store._sql.core import Executor, SqlCore
from pactmw.store._sql.dialect import ColumnTypes, Dialect, statement_builder
from pactmw.store._sql.rows import RowReader
from pactmw.store.base import StoreError

__all__ = [
    "OperationStatements",
    "OperationsMixin",
    "migration",
]

# One row per operation, its latest revision. `open_key` is set while the operation is open
# (proposed or in progress) and NULL once final or expired: its unique index is what makes
# two proposals of the same action one operation (OPS-4-01). `terms` and `result_data` are
# JSON texts; `user_approval_required` is 0 or 1.
_TABLE = """
        CREATE TABLE pactmw_poppy_operations (
            operation_id TEXT PRIMARY KEY,
            brand_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            account TEXT,
            action TEXT NOT NULL,
            revision INTEGER NOT NULL,
            state TEXT NOT NULL,
            summary TEXT NOT NULL,
            terms TEXT,
            scopes {scopes} NOT NULL,
            user_approval_required INTEGER NOT NULL,
            url TEXT,
            open_key TEXT,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            confirmed_revision INTEGER,
            approved_by TEXT,
            confirmed_at {real},
            result_summary TEXT,
            result_data TEXT
        )
        """
_OPEN_INDEX = (
    "CREATE UNIQUE INDEX pactmw_poppy_operations_open ON pactmw_poppy_operations (open_key)"
)
# An API write's answer under its Idempotency-Key, one row per (Session, key) digest.
_ANSWERS = """
        CREATE TABLE pactmw_poppy_idempotency (
            record_key TEXT PRIMARY KEY,
            fingerprint TEXT NOT NULL,
            status INTEGER NOT NULL,
            body TEXT NOT NULL,
            expires_at {real} NOT NULL
        )
        """


def migration(types: ColumnTypes) -> tuple[str, ...]:
    """This concern's part of schema version 11, in an engine's column `types`."""
    return types.fill(_TABLE, _OPEN_INDEX, _ANSWERS)


_OPERATION_ROW = RowReader.of(StoredOperation)
_ANSWER_ROW = RowReader.of(RememberedAnswer)
_COLUMNS = _OPERATION_ROW.columns()


class OperationStatements:
    """The operation statements in one dialect (built once per backend class)."""

    def __init__(self, dialect: Dialect) -> None:
        q = statement_builder(dialect, columns=_COLUMNS, answer_columns=_ANSWER_ROW.columns())

        self.insert = q(
            "INSERT INTO pactmw_poppy_operations ({columns}) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {scopes}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING"
        )
        self.read = q("SELECT {columns} FROM pactmw_poppy_operations WHERE operation_id = ?")
        self.read_open = q("SELECT {columns} FROM pactmw_poppy_operations WHERE open_key = ?")
        self.release_expired = q(
            "UPDATE pactmw_poppy_operations SET open_key = NULL"
            " WHERE open_key = ? AND state = 'proposed' AND expires_at <= ?"
        )
        self.revise = q(
            "UPDATE pactmw_poppy_operations SET revision = revision + 1, summary = ?, terms = ?,"
            " expires_at = ?, updated_at = ?"
            " WHERE operation_id = ? AND state = 'proposed' AND expires_at > ?"
        )
        # The compare-and-set of OPS-6-02.
        self.confirm = q(
            "UPDATE pactmw_poppy_operations SET state = 'in_progress', confirmed_revision = ?,"
            " approved_by = ?, confirmed_at = ?, updated_at = ?"
            " WHERE operation_id = ? AND state = 'proposed' AND revision = ? AND expires_at > ?"
        )
        self.cancel = q(
            "UPDATE pactmw_poppy_operations SET state = 'cancelled', open_key = NULL,"
            " result_summary = ?, updated_at = ?"
            " WHERE operation_id = ? AND state = 'proposed' AND expires_at > ?"
        )
        # A live record stays; an expired one is replaced (the key is free again). The
        # unique key is the hold: of concurrent inserts the database lets one through.
        upsert = (
            "INSERT INTO pactmw_poppy_idempotency"
            " (record_key, fingerprint, status, body, expires_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (record_key) DO UPDATE SET fingerprint = excluded.fingerprint,"
            " status = excluded.status, body = excluded.body, expires_at = excluded.expires_at"
            " WHERE pactmw_poppy_idempotency.expires_at <= ?"
        )
        self.hold = q(upsert)
        # An answer also replaces the hold its own request took (the same fingerprint).
        self.remember = q(
            upsert + f" OR (pactmw_poppy_idempotency.status = {HELD_STATUS}"
            " AND pactmw_poppy_idempotency.fingerprint = excluded.fingerprint)"
        )
        self.remembered = q(
            "SELECT {answer_columns} FROM pactmw_poppy_idempotency"
            " WHERE record_key = ? AND expires_at > ?"
        )
        self.purge_answers = q("DELETE FROM pactmw_poppy_idempotency WHERE expires_at <= ?")
        # Past retention: final ones, and proposals that expired; never one in progress.
        self.purge_operations = q(
            "DELETE FROM pactmw_poppy_operations WHERE updated_at < ?"
            " AND (state IN ('succeeded', 'failed', 'cancelled')"
            " OR (state = 'proposed' AND expires_at <= ?))"
        )
        self.settle = q(
            "UPDATE pactmw_poppy_operations SET state = ?, open_key = NULL, result_summary = ?,"
            " result_data = ?, updated_at = ? WHERE operation_id = ? AND state = 'in_progress'"
        )


class OperationsMixin(SqlCore):
    """The operation records over the dialect hooks and `_operation_sql`."""

    _operation_sql: ClassVar[OperationStatements]

    def _operation_row(self, row: Sequence[Any]) -> StoredOperation:
        return _OPERATION_ROW.read(row, self._decode_scopes)

    def _read_operation(self, ex: Executor, operation_id: str) -> StoredOperation | None:
        row = ex.execute(self._operation_sql.read, (operation_id,)).fetchone()
        return None if row is None else self._operation_row(row)

    def _propose_operation(self, operation: StoredOperation, now: float) -> StoredOperation:
        with self._write() as ex:
            return self._insert_proposal(ex, operation, now)

    def _propose_operation_once(
        self, operation: StoredOperation, hold: RememberedAnswer, now: float
    ) -> KeyedProposal:
        sql, h = self._operation_sql, hold
        with self._write() as ex:
            # The hold first, in the proposal's transaction: a concurrent request with the
            # key waits here for this commit (PostgreSQL's unique index, sqlite's write
            # lock), then finds the hold instead of proposing too.
            held = ex.execute(
                sql.hold, (h.record_key, h.fingerprint, h.status, h.body, h.expires_at, now)
            ).rowcount
            if held != 1:
                row = ex.execute(sql.remembered, (h.record_key, now)).fetchone()
                if row is not None:
                    return KeyedProposal(kept=_answer(row))
                # Not inserted yet no live record: the database broke its own constraint.
                raise StoreError("the idempotency key is neither held nor free")
            return KeyedProposal(operation=self._insert_proposal(ex, operation, now))

    def _insert_proposal(
        self, ex: Executor, operation: StoredOperation, now: float
    ) -> StoredOperation:
        sql, o = self._operation_sql, operation
        if o.open_key is not None:
            ex.execute(sql.release_expired, (o.open_key, now))
        inserted = ex.execute(
            sql.insert,
            (
                o.operation_id,
                o.brand_id,
                o.client_id,
                o.user_id,
                o.account,
                o.action,
                o.revision,
                o.state,
                o.summary,
                o.terms,
                self._encode_scopes(o.scopes),
                int(o.user_approval_required),
                o.url,
                o.open_key,
                o.created_at,
                o.updated_at,
                o.expires_at,
                None,
                None,
                None,
                None,
                None,
            ),
        )
        if inserted.rowcount == 1:
            return o
        # The key is taken by an open operation (a concurrent proposal waited for it
        # here, then found it), or the id is.
        if o.open_key is not None:
            row = ex.execute(sql.read_open, (o.open_key,)).fetchone()
            if row is not None:
                return self._operation_row(row)
        raise ValueError("operation id is already stored")

    def _operation(self, operation_id: str) -> StoredOperation | None:
        with self._read() as ex:
            return self._read_operation(ex, operation_id)

    def _revise_operation(
        self, operation_id: str, summary: str, terms: str | None, expires_at: float, now: float
    ) -> StoredOperation | None:
        with self._write() as ex:
            changed = ex.execute(
                self._operation_sql.revise,
                (summary, terms, expires_at, now, operation_id, now),
            )
            if changed.rowcount == 0:
                return None
            return self._read_operation(ex, operation_id)

    def _confirm_operation(
        self, operation_id: str, revision: int, approved_by: str, now: float
    ) -> OperationChange:
        with self._write() as ex:
            # Read the count before the next statement: a Django cursor is one object.
            won = ex.execute(
                self._operation_sql.confirm,
                (revision, approved_by, now, now, operation_id, revision, now),
            ).rowcount
            found = self._read_operation(ex, operation_id)
            if won == 1:
                return OperationChange("confirmed", found)
            kind = decide_confirmation(found, revision=revision, now=now)
            # The update lost, so the record is no longer confirmable at `revision`.
            return OperationChange("unchanged" if kind == "confirmed" else kind, found)

    def _cancel_operation(
        self, operation_id: str, summary: str, now: float
    ) -> StoredOperation | None:
        with self._write() as ex:
            ex.execute(self._operation_sql.cancel, (summary, now, operation_id, now))
            return self._read_operation(ex, operation_id)

    def _settle_operation(
        self, operation_id: str, result: OperationResult, now: float
    ) -> StoredOperation | None:
        outcome = (result.state, result.summary, result.data)
        with self._write() as ex:
            ex.execute(self._operation_sql.settle, (*outcome, now, operation_id))
            return self._read_operation(ex, operation_id)

    def _remember_answer(self, answer: RememberedAnswer, now: float) -> RememberedAnswer:
        a = answer
        sql = self._operation_sql
        with self._write() as ex:
            ex.execute(
                sql.remember, (a.record_key, a.fingerprint, a.status, a.body, a.expires_at, now)
            )
            row = ex.execute(sql.remembered, (a.record_key, now)).fetchone()
        return answer if row is None else _answer(row)

    def _remembered_answer(self, record_key: str, now: float) -> RememberedAnswer | None:
        return self._read_one(self._operation_sql.remembered, (record_key, now), _answer)


def _answer(row: Sequence[Any]) -> RememberedAnswer:
    return _ANSWER_ROW.read(row)
