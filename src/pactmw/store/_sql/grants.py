"""Grants of the SQL stores: the delegation behind refresh tokens."""

from __future__ import annotations

from pactmw.store._decisions import decide_upsert
from pactmw.store._sql.core import Executor, SqlCore
from pactmw.store.base import Grant, check_grant_scopes, has_nul, reject_nul

__all__ = ["GrantsMixin"]


class GrantsMixin(SqlCore):
    """The grant operations of `Store`, over the dialect hooks."""

    def upsert_grant(
        self,
        *,
        grant_id: str,
        brand_id: str,
        account: str,
        client_id: str,
        pa_sub: str,
        scopes: tuple[str, ...],
        now: float,
        expires_at: float,
    ) -> Grant:
        """Create the live grant of the key or widen it; see `Store`."""
        reject_nul(
            grant_id=grant_id,
            brand_id=brand_id,
            account=account,
            client_id=client_id,
            pa_sub=pa_sub,
        )
        wanted = check_grant_scopes(scopes)
        with self._write() as ex:
            return self._upsert_grant(
                ex,
                grant_id=grant_id,
                brand_id=brand_id,
                account=account,
                client_id=client_id,
                pa_sub=pa_sub,
                wanted=wanted,
                now=now,
                expires_at=expires_at,
            )

    def _upsert_grant(
        self,
        ex: Executor,
        *,
        grant_id: str,
        brand_id: str,
        account: str,
        client_id: str,
        pa_sub: str,
        wanted: tuple[str, ...],
        now: float,
        expires_at: float,
    ) -> Grant:
        # Inside the caller's write transaction; `wanted` is already checked. The key lock
        # serializes upserts of one key even while it has no row to lock (two first
        # approvals); the row lock then holds revocations off until the commit.
        sql = self._sql
        self._lock_grant_key(ex, brand_id, account, client_id, pa_sub)
        row = ex.execute(
            sql.lock_unrevoked_grant_of_key, (brand_id, account, client_id, pa_sub)
        ).fetchone()
        decision = decide_upsert(
            None if row is None else self._grant(row),
            grant_id=grant_id,
            key=(brand_id, account, client_id, pa_sub),
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
        ex.execute(
            sql.insert_grant,
            (
                grant_id,
                brand_id,
                account,
                client_id,
                pa_sub,
                self._encode_scopes(wanted),
                now,
                now,
                expires_at,
            ),
        )
        return grant

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None."""
        if has_nul(grant_id):
            return None
        with self._read() as ex:
            row = ex.execute(self._sql.grant, (grant_id,)).fetchone()
        return None if row is None else self._grant(row)

    def record_grant_use(self, grant_id: str, *, now: float, every: float) -> bool:
        """Set `last_used_at` unless set within `every` seconds; see `GrantUsageStore`."""
        if has_nul(grant_id):
            return False
        with self._write() as ex:
            updated = ex.execute(self._sql.record_grant_use, (now, grant_id, now - every))
            return bool(updated.rowcount == 1)

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        if has_nul(brand_id, account, client_id, pa_sub):
            return None
        with self._read() as ex:
            row = ex.execute(
                self._sql.live_grant_of_key, (brand_id, account, client_id, pa_sub, now)
            ).fetchone()
        return None if row is None else self._grant(row)

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant; True if it was live."""
        if has_nul(grant_id):
            return False
        with self._write() as ex:
            return ex.execute(self._sql.revoke_live_grant, (now, grant_id, now)).rowcount == 1

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand, if given); return their ids."""
        if has_nul(account, brand_id or ""):
            return []
        sql = self._sql
        params = (account, now, brand_id, brand_id)
        with self._write() as ex:
            if self._returning:
                rows = ex.execute(sql.revoke_grants_of_account_returning, (now, *params))
                return [str(r[0]) for r in rows.fetchall()]
            ids = [str(r[0]) for r in ex.execute(sql.live_grant_ids_of_account, params).fetchall()]
            ex.execute(sql.revoke_grants_of_account, (now, *params))
        return ids

    def list_grants(
        self,
        *,
        brand_id: str | None = None,
        account: str | None = None,
        include_inactive: bool = False,
        now: float,
    ) -> list[Grant]:
        """Return the matching grants, newest first; live ones only unless asked."""
        if has_nul(brand_id or "", account or ""):
            return []
        with self._read() as ex:
            rows = ex.execute(
                self._sql.list_grants,
                (brand_id, brand_id, account, account, bool(include_inactive), now),
            ).fetchall()
        return [self._grant(r) for r in rows]
