"""Grants of the memory store: the delegation behind refresh tokens (the contract, with its
input checks: store/_protocols/grants.py)."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import evolve

from pactmw.store._decisions import decide_upsert
from pactmw.store._memory.core import MemoryCore
from pactmw.store._protocols.grants import GrantKey
from pactmw.store.base import Grant

__all__ = ["GrantsMixin"]


class GrantsMixin(MemoryCore):
    """The grant primitives of `GrantStore` (and `GrantUsageStore`), on the in-memory state."""

    def _upsert_grant(
        self, grant_id: str, key: GrantKey, scopes: tuple[str, ...], now: float, expires_at: float
    ) -> Grant:
        with self._open:
            return self._upsert(grant_id, key, scopes, now, expires_at)

    def _upsert(
        self, grant_id: str, key: GrantKey, wanted: tuple[str, ...], now: float, expires_at: float
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

    def _get_grant(self, grant_id: str) -> Grant | None:
        with self._open:
            return self._grants.get(grant_id)

    def _record_grant_use(self, grant_id: str, now: float, every: float) -> bool:
        with self._open:
            grant = self._grants.get(grant_id)
            if grant is None or (
                grant.last_used_at is not None and grant.last_used_at > now - every
            ):
                return False
            self._grants[grant_id] = evolve(grant, last_used_at=now)
            return True

    def _live_grant(self, key: GrantKey, now: float) -> Grant | None:
        with self._open:
            grant_id = self._unrevoked.get(key)
            if grant_id is None:
                return None
            grant = self._grants[grant_id]
            return grant if grant.is_live(now) else None

    def _revoke_grant(self, grant_id: str, now: float) -> bool:
        with self._open:
            grant = self._grants.get(grant_id)
            if grant is None or not grant.is_live(now):
                return False
            self._revoke(grant, now)
            return True

    def _revoke_account_grants(self, account: str, now: float, brand_id: str | None) -> list[str]:
        with self._open:
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

    def _list_grants(
        self, brand_id: str | None, account: str | None, include_inactive: bool, now: float
    ) -> list[Grant]:
        with self._open:
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
