"""Poppy Account Tokens of the SQL stores (the contract, with its input checks:
store/_protocols/account_tokens.py).

`migration(types)` is part of schema version 6 (with the Sessions,
store/_sql/sessions.py); each backend class sets `_account_sql = AccountTokenStatements(its
dialect)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pactmw.store._protocols.account_tokens import (
    AccountRefresh,
    AccountRotation,
    AccountToken,
    decide_account_rotation,
)
from pactmw.store._sql.core import SqlCore
from pactmw.store._sql.dialect import ColumnTypes, Dialect, statement_builder
from pactmw.store._sql.rows import RowReader

__all__ = [
    "AccountTokenStatements",
    "AccountTokensMixin",
    "migration",
]

# One row per Account Token; `used_at` marks a rotated-away one (kept, so its replay reads
# `reused`). The User ID is the grant's `pa_sub`, read through the join.
_TABLE = """
        CREATE TABLE pactmw_poppy_account_tokens (
            token_hash TEXT PRIMARY KEY,
            grant_id TEXT NOT NULL REFERENCES pactmw_grants (grant_id),
            brand_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            scopes {scopes} NOT NULL,
            created_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            used_at {real}
        )
        """
_GRANT_INDEX = (
    "CREATE INDEX pactmw_poppy_act_tokens_grant ON pactmw_poppy_account_tokens (grant_id)"
)


def migration(types: ColumnTypes) -> tuple[str, ...]:
    """The Account Tokens' part of schema version 6 (with the Sessions), in an engine's
    column `types`."""
    return types.fill(_TABLE, _GRANT_INDEX)


# The token's columns in `AccountToken`'s order (the User ID is the grant's `pa_sub`), then
# what the rotation reads of the grant.
_ACCOUNT_TOKEN_ROW = RowReader.of(AccountToken)
_JOINED = (
    "SELECT t.grant_id, t.brand_id, t.client_id, g.pa_sub, t.scopes, t.created_at,"
    " t.expires_at, t.used_at, g.account, g.revoked_at, g.expires_at"
    " FROM pactmw_poppy_account_tokens t JOIN pactmw_grants g ON g.grant_id = t.grant_id"
    " WHERE t.token_hash = ?"
)


class AccountTokenStatements:
    """The Account Token statements in one dialect (built once per backend class)."""

    def __init__(self, dialect: Dialect) -> None:
        q = statement_builder(dialect)

        self.grant = q("SELECT brand_id, client_id, scopes FROM pactmw_grants WHERE grant_id = ?")
        self.insert = q(
            "INSERT INTO pactmw_poppy_account_tokens (token_hash, grant_id, brand_id, client_id,"
            " scopes, created_at, expires_at, used_at)"
            " VALUES (?, ?, ?, ?, {scopes}, ?, ?, NULL) ON CONFLICT DO NOTHING"
        )
        self.read = q(_JOINED)
        self.lock = q(_JOINED + "{lock_refresh}")
        # The refresh-token rule: a spent token of a live grant stays (revoking it still ends
        # its sign-in).
        self.cleanup = q(
            "DELETE FROM pactmw_poppy_account_tokens WHERE (used_at IS NULL AND expires_at <= ?)"
            " OR grant_id IN (SELECT grant_id FROM pactmw_grants"
            " WHERE revoked_at IS NOT NULL OR expires_at <= ?)"
        )
        self.spend = q("UPDATE pactmw_poppy_account_tokens SET used_at = ? WHERE token_hash = ?")


class AccountTokensMixin(SqlCore):
    """The Account Token primitives, over the dialect hooks and `_account_sql`."""

    _account_sql: ClassVar[AccountTokenStatements]

    def _account(self, row: Sequence[Any]) -> AccountToken:
        return _ACCOUNT_TOKEN_ROW.read(row, self._decode_scopes)

    def _insert_account_token(self, token_hash: str, token: AccountToken) -> bool:
        scopes = self._encode_scopes(token.scopes)
        params = (token_hash, token.grant_id, token.brand_id, token.client_id, scopes)
        with self._write() as ex:
            inserted = ex.execute(
                self._account_sql.insert, (*params, token.created_at, token.expires_at)
            )
            return inserted.rowcount > 0

    def _rotate_account_token(self, refresh: AccountRefresh) -> AccountRotation:
        sql, now, wanted = self._account_sql, refresh.now, refresh.scopes
        with self._write() as ex:
            row = ex.execute(sql.lock, (refresh.token_hash,)).fetchone()
            token = None if row is None else self._account(row)
            live = row is not None and row[9] is None and now < float(row[10])
            kind = decide_account_rotation(token, grant_live=live, refresh=refresh)
            if kind != "rotated" or token is None or row is None:
                return AccountRotation(kind)
            granted = token.scopes if wanted is None else wanted
            ex.execute(sql.spend, (now, refresh.token_hash))
            scopes = self._encode_scopes(granted)
            params = (refresh.new_token_hash, token.grant_id, refresh.brand_id, refresh.client_id)
            inserted = ex.execute(sql.insert, (*params, scopes, now, refresh.expires_at))
            if inserted.rowcount == 0:
                raise ValueError("new Account Token hash is already stored")
            return AccountRotation("rotated", token.grant_id, row[8], token.user_id, granted)

    def _account_token(self, token_hash: str) -> AccountToken | None:
        return self._read_one(self._account_sql.read, (token_hash,), self._account)
