"""Poppy Sessions of the SQL stores (the contract, with its input checks:
store/_protocols/sessions.py).

`migration(types)` is part of schema version 6 (store/_sql/migrations.py); `SessionsMixin`
is part of `SqlStore`, and each backend class sets
`_session_sql = SessionStatements(_DIALECT)` (built once per dialect, as `Statements` are).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pactmw.store._protocols.sessions import (
    PoppySession,
    SessionChange,
    SessionUpdate,
    change_session,
)
from pactmw.store._sql.core import SqlCore
from pactmw.store._sql.dialect import ColumnTypes, Dialect, statement_builder
from pactmw.store._sql.rows import RowReader

__all__ = ["SessionStatements", "SessionsMixin", "migration"]

# One row per Session: its one live token's hash sits in the row, so replacing the token is
# one UPDATE and the old hash stops matching at once. `ever_account` survives sign-out.
_TABLE = """
        CREATE TABLE pactmw_poppy_sessions (
            session_id TEXT PRIMARY KEY,
            brand_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            jkt TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            token_expires_at {real} NOT NULL,
            created_at {real} NOT NULL,
            account TEXT,
            grant_id TEXT,
            scopes {scopes} NOT NULL,
            ever_account TEXT,
            signed_in_at {real}
        )
        """
_GRANT_INDEX = "CREATE INDEX pactmw_poppy_sessions_grant ON pactmw_poppy_sessions (grant_id)"


def migration(types: ColumnTypes) -> tuple[str, ...]:
    """This concern's part of schema version 6, in an engine's column `types`."""
    return types.fill(_TABLE, _GRANT_INDEX)


_SESSION_ROW = RowReader.of(PoppySession)
_COLUMNS = _SESSION_ROW.columns()


class SessionStatements:
    """The Session statements in one dialect (built once per backend class)."""

    def __init__(self, dialect: Dialect) -> None:
        q = statement_builder(dialect, columns=_COLUMNS)

        self.insert = q(
            "INSERT INTO pactmw_poppy_sessions (session_id, brand_id, client_id, user_id, jkt,"
            " token_hash, token_expires_at, created_at, account, grant_id, scopes,"
            " ever_account, signed_in_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, {no_scopes}, NULL, NULL)"
            " ON CONFLICT DO NOTHING"
        )
        self.lock = q("SELECT {columns} FROM pactmw_poppy_sessions WHERE session_id = ?{lock}")
        self.token_taken = q("SELECT 1 FROM pactmw_poppy_sessions WHERE token_hash = ?")
        self.update = q(
            "UPDATE pactmw_poppy_sessions SET jkt = ?, token_hash = ?, token_expires_at = ?,"
            " account = ?, grant_id = ?, scopes = {scopes}, ever_account = ?, signed_in_at = ?"
            " WHERE session_id = ?"
        )
        self.by_id = q("SELECT {columns} FROM pactmw_poppy_sessions WHERE session_id = ?")
        self.by_token = q("SELECT {columns} FROM pactmw_poppy_sessions WHERE token_hash = ?")
        self.purge = q("DELETE FROM pactmw_poppy_sessions WHERE token_expires_at <= ?")
        # The operators' listing (`agents list`, the Django admin's agent filters) scans the
        # table, which cleanup keeps to the Sessions live now or within the last day. No
        # index for it: every Session start and renewal would pay to keep one up to date,
        # for a rare operator read.
        self.clients = q(
            "SELECT DISTINCT brand_id, client_id FROM pactmw_poppy_sessions"
            " WHERE token_expires_at > ?"
        )
        self.sign_out = q(
            "UPDATE pactmw_poppy_sessions SET account = NULL, grant_id = NULL,"
            " scopes = {no_scopes}, signed_in_at = NULL WHERE grant_id = ?"
        )


class SessionsMixin(SqlCore):
    """The Session primitives, over the dialect hooks and `_session_sql`."""

    _session_sql: ClassVar[SessionStatements]

    def _session(self, row: Sequence[Any]) -> PoppySession:
        return _SESSION_ROW.read(row, self._decode_scopes)

    def _insert_session(self, session: PoppySession, token_hash: str) -> None:
        with self._write() as ex:
            inserted = ex.execute(
                self._session_sql.insert,
                (
                    session.session_id,
                    session.brand_id,
                    session.client_id,
                    session.user_id,
                    session.jkt,
                    token_hash,
                    session.token_expires_at,
                    session.created_at,
                ),
            )
            if inserted.rowcount == 0:
                raise ValueError("session_id or Session Token hash is already stored")

    def _change(self, update: SessionUpdate) -> SessionChange:
        sql = self._session_sql
        with self._write() as ex:
            row = ex.execute(sql.lock, (update.session_id,)).fetchone()
            change = change_session(None if row is None else self._session(row), update)
            changed = change.session
            if changed is None:
                return change
            if ex.execute(sql.token_taken, (update.token_hash,)).fetchone() is not None:
                raise ValueError("Session Token hash is already stored")
            token = (changed.jkt, update.token_hash, changed.token_expires_at)
            sign_in = (changed.account, changed.grant_id, self._encode_scopes(changed.scopes))
            signed = (changed.ever_account, changed.signed_in_at, update.session_id)
            ex.execute(sql.update, (*token, *sign_in, *signed))
            return change

    def _get_session(self, session_id: str) -> PoppySession | None:
        return self._read_one(self._session_sql.by_id, (session_id,), self._session)

    def _session_for_token(self, token_hash: str) -> PoppySession | None:
        return self._read_one(self._session_sql.by_token, (token_hash,), self._session)

    def _sign_out_sessions(self, grant_id: str) -> int:
        with self._write() as ex:
            return ex.execute(self._session_sql.sign_out, (grant_id,)).rowcount

    def _session_clients(self, now: float) -> list[tuple[str, str]]:
        with self._read() as ex:
            rows = ex.execute(self._session_sql.clients, (now,)).fetchall()
        return [(str(brand_id), str(client_id)) for brand_id, client_id in rows]
