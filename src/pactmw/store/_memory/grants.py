"""Grants of the memory store: the delegation behind refresh tokens."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import evolve

from pactmw.store._decisions import decide_upsert
from pactmw.store._memory.core import GrantKey, MemoryCore
from pactmw.store.base import Grant, check_grant_scopes, reject_nul

__all__ = ["GrantsMixin"]


class GrantsMixin(MemoryCore):
    """The grant operations of `Store`, on the in-memory state."""

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
        with self._lock:
            self._check_open()
            return self._upsert(
                grant_id, (brand_id, account, client_id, pa_sub), wanted, now, expires_at
            )

    def _upsert(
        self,
        grant_id: str,
        key: GrantKey,
        wanted: tuple[str, ...],
        now: float,
        expires_at: float,
    ) -> Grant:
        # Called with the lock held; raises (ValueError) before changing anything.
        current_id = self._unrevoked.get(key)
        decision = decide_upsert(
            None if current_id is None else self._grants[current_id],
            grant_id=grant_id,
            key=key,
            wanted=wanted,
            now=now,
            expires_at=expires_at,
        )
        if decision.kind == "widen":
            self._grants[decision.grant.grant_id] = decision.grant
            return decision.grant
        if grant_id in self._grants:
            raise ValueError(f"grant id {grant_id!r} is already used")
        if decision.retire is not None:
            self._grants[decision.retire] = evolve(self._grants[decision.retire], revoked_at=now)
        self._grants[grant_id] = decision.grant
        self._unrevoked[key] = grant_id
        return decision.grant

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None."""
        with self._lock:
            self._check_open()
            return self._grants.get(grant_id)

    def record_grant_use(self, grant_id: str, *, now: float, every: float) -> bool:
        """Set `last_used_at` unless set within `every` seconds; see `GrantUsageStore`."""
        with self._lock:
            self._check_open()
            grant = self._grants.get(grant_id)
            if grant is None or (
                grant.last_used_at is not None and grant.last_used_at > now - every
            ):
                return False
            self._grants[grant_id] = evolve(grant, last_used_at=now)
            return True

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        with self._lock:
            self._check_open()
            grant_id = self._unrevoked.get((brand_id, account, client_id, pa_sub))
            if grant_id is None:
                return None
            grant = self._grants[grant_id]
            return grant if grant.is_live(now) else None

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant; True if it was live."""
        with self._lock:
            self._check_open()
            grant = self._grants.get(grant_id)
            if grant is None or not grant.is_live(now):
                return False
            self._revoke(grant, now)
            return True

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand, if given); return their ids."""
        with self._lock:
            self._check_open()
            doomed = [
                g
                for g in self._grants.values()
                if g.account == account
                and (brand_id is None or g.brand_id == brand_id)
                and g.is_live(now)
            ]
            for grant in doomed:
                self._revoke(grant, now)
            return [g.grant_id for g in _newest_first(doomed)]

    def list_grants(
        self,
        *,
        brand_id: str | None = None,
        account: str | None = None,
        include_inactive: bool = False,
        now: float,
    ) -> list[Grant]:
        """Return the matching grants, newest first; live ones only unless asked."""
        with self._lock:
            self._check_open()
            return _newest_first(
                g
                for g in self._grants.values()
                if (brand_id is None or g.brand_id == brand_id)
                and (account is None or g.account == account)
                and (include_inactive or g.is_live(now))
            )


def _newest_first(grants: Iterable[Grant]) -> list[Grant]:
    # The SQL backends order the same way: created_at, then id by code point, descending.
    return sorted(grants, key=lambda g: (g.created_at, g.grant_id), reverse=True)
