"""Grants of the SQL stores: the delegation behind refresh tokens (the contract, with its
input checks: store/_protocols/grants.py)."""

from __future__ import annotations

from pactmw.store._decisions import decide_upsert
from pactmw.store._protocols.grants import GrantKey
from pactmw.store._sql.core import Executor, SqlCore
from pactmw.store.base import Grant

__all__ = ["GrantsMixin"]


class GrantsMixin(SqlCore):
    """The grant primitives of `GrantStore` (and `GrantUsageStore`), over the dialect hooks."""

    def _upsert_grant(
        self, grant_id: str, key: GrantKey, scopes: tuple[str, ...], now: float, expires_at: float
    ) -> Grant:
        with self._write() as ex:
            return self._upsert_grant_in(ex, grant_id, key, scopes, now, expires_at)

    def _upsert_grant_in(
        self,
        ex: Executor,
        grant_id: str,
        key: GrantKey,
        wanted: tuple[str, ...],
        now: float,
        expires_at: float,
    ) -> Grant:
        # Inside the caller's write transaction; `wanted` is already checked. The key lock
        # serializes upserts of one key even while it has no row to lock (two first
        # approvals); the row lock then holds revocations off until the commit.
        sql = self._sql
        self._lock_grant_key(ex, *key)
        row = ex.execute(sql.lock_unrevoked_grant_of_key, key).fetchone()
        decision = decide_upsert(
            None if row is None else self._grant(row),
            grant_id=grant_id,
            key=key,
            wanted=wanted,
            now=now,
            expires_at=expires_at,
        )
        grant = decision.grant
        if decision.kind == "widen":
            ex.execute(
                sql.widen_grant,
                (self._encode_scopes(grant.scopes), grant.expires_at, now, grant.grant_id),
            )
            return grant
        if ex.execute(sql.grant_id_taken, (grant_id,)).fetchone() is not None:
            raise ValueError(f"grant id {grant_id!r} is already used")
        if decision.retire is not None:
            ex.execute(sql.revoke_grant, (now, decision.retire))
        scopes = self._encode_scopes(wanted)
        ex.execute(sql.insert_grant, (grant_id, *key, scopes, now, now, expires_at))
        return grant

    def _get_grant(self, grant_id: str) -> Grant | None:
        return self._read_one(self._sql.grant, (grant_id,), self._grant)

    def _record_grant_use(self, grant_id: str, now: float, every: float) -> bool:
        with self._write() as ex:
            updated = ex.execute(self._sql.record_grant_use, (now, grant_id, now - every))
            return bool(updated.rowcount == 1)

    def _live_grant(self, key: GrantKey, now: float) -> Grant | None:
        return self._read_one(self._sql.live_grant_of_key, (*key, now), self._grant)

    def _revoke_grant(self, grant_id: str, now: float) -> bool:
        with self._write() as ex:
            return ex.execute(self._sql.revoke_live_grant, (now, grant_id, now)).rowcount == 1

    def _revoke_account_grants(self, account: str, now: float, brand_id: str | None) -> list[str]:
        sql = self._sql
        params = (account, now, brand_id, brand_id)
        with self._write() as ex:
            if self._returning:
                rows = ex.execute(sql.revoke_grants_of_account_returning, (now, *params))
                return [str(r[0]) for r in rows.fetchall()]
            ids = [str(r[0]) for r in ex.execute(sql.live_grant_ids_of_account, params).fetchall()]
            ex.execute(sql.revoke_grants_of_account, (now, *params))
        return ids

    def _list_grants(
        self, brand_id: str | None, account: str | None, include_inactive: bool, now: float
    ) -> list[Grant]:
        params = (brand_id, brand_id, account, account, include_inactive, now)
        with self._read() as ex:
            rows = ex.execute(self._sql.list_grants, params).fetchall()
        return [self._grant(r) for r in rows]
