"""The grant operations of the Store contract: the delegation behind refresh tokens."""

from __future__ import annotations

from typing import Protocol

from pactmw.store.base import (
    Grant,
    NotFound,
    check_grant_scopes,
    check_token_owner,
    has_nul,
    reject_nul,
)

__all__ = ["GrantKey", "GrantStore"]

#: `(brand_id, account, client_id, pa_sub)`: what one live grant is kept per.
GrantKey = tuple[str, str, str, str]


class GrantStore(Protocol):
    """Grants: one live grant per key, upserted, read, listed and revoked."""

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
        """Create the live grant of `(brand_id, account, client_id, pa_sub)` or widen it.

        If the key has a live grant, its scopes become the union with `scopes`, its expiry
        the later of the two, `updated_at` becomes `now`, and it keeps its id (`grant_id` is
        unused). Otherwise a new grant is inserted under `grant_id`: a revoked or expired
        grant is never revived (an expired one still unrevoked is retired with
        `revoked_at = now`). Concurrent upserts of one key end in one live grant holding the
        union of their scopes. Empty `scopes` raise ValueError; a `grant_id` already used
        raises ValueError.
        """
        reject_nul(
            grant_id=grant_id,
            brand_id=brand_id,
            account=account,
            client_id=client_id,
            pa_sub=pa_sub,
        )
        wanted = check_grant_scopes(scopes)
        key = (brand_id, account, client_id, pa_sub)
        return self._upsert_grant(grant_id, key, wanted, now, expires_at)

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None if the id is unknown."""
        return None if has_nul(grant_id) else self._get_grant(grant_id)

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        if has_nul(brand_id, account, client_id, pa_sub):
            return None
        return self._live_grant((brand_id, account, client_id, pa_sub), now)

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant (`revoked_at = now`); True if it was live, else False (no change)."""
        return not has_nul(grant_id) and self._revoke_grant(grant_id, now)

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand only, if given).

        For "sign out everywhere", password resets and account deletion. Returns the ids
        revoked, newest grant first.
        """
        if has_nul(account, brand_id or ""):
            return []
        return self._revoke_account_grants(account, now, brand_id)

    def list_grants(
        self,
        *,
        brand_id: str | None = None,
        account: str | None = None,
        include_inactive: bool = False,
        now: float,
    ) -> list[Grant]:
        """Return the grants matching the filters, newest (`created_at`) first.

        Live ones only unless `include_inactive` (then revoked and expired ones too).
        """
        if has_nul(brand_id or "", account or ""):
            return []
        return self._list_grants(brand_id, account, bool(include_inactive), now)

    def _token_grant(self, grant_id: str, client_id: str, brand_id: str) -> Grant:
        """The grant a new token (refresh or Account Token) is issued under: `NotFound` when
        `grant_id` is unknown, ValueError when it is another client's or Brand's. A grant's
        client and Brand never change, so this read before the write still holds at it."""
        grant = self._get_grant(grant_id)
        if grant is None:
            raise NotFound(f"unknown grant {grant_id!r}")
        check_token_owner(grant, client_id, brand_id)
        return grant

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _upsert_grant(
        self, grant_id: str, key: GrantKey, scopes: tuple[str, ...], now: float, expires_at: float
    ) -> Grant:
        """Apply `decide_upsert` to the key's unrevoked grant, atomically; ValueError, changing
        nothing, when a new grant's `grant_id` is used. `scopes` are in the grant's form."""
        ...

    def _get_grant(self, grant_id: str) -> Grant | None: ...

    def _live_grant(self, key: GrantKey, now: float) -> Grant | None: ...

    def _revoke_grant(self, grant_id: str, now: float) -> bool:
        """Revoke the grant if it is live at `now`; whether it was."""
        ...

    def _revoke_account_grants(self, account: str, now: float, brand_id: str | None) -> list[str]:
        """Revoke the account's live grants (at one Brand if given); their ids, newest first."""
        ...

    def _list_grants(
        self, brand_id: str | None, account: str | None, include_inactive: bool, now: float
    ) -> list[Grant]:
        """The matching grants by `created_at`, then id by code point, both descending."""
        ...
