"""The grant operations of the Store contract: the delegation behind refresh tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pactmw.store.base import Grant

__all__ = ["GrantStore"]


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
        ...

    def get_grant(self, grant_id: str) -> Grant | None:
        """Return the grant in any state, or None if the id is unknown."""
        ...

    def live_grant(
        self, *, brand_id: str, account: str, client_id: str, pa_sub: str, now: float
    ) -> Grant | None:
        """Return the live grant of the key at `now`, or None."""
        ...

    def revoke_grant(self, grant_id: str, *, now: float) -> bool:
        """Revoke the grant (`revoked_at = now`); True if it was live, else False (no change)."""
        ...

    def revoke_account_grants(
        self, account: str, *, now: float, brand_id: str | None = None
    ) -> list[str]:
        """Revoke every live grant of `account` (at one Brand only, if given).

        For "sign out everywhere", password resets and account deletion. Returns the ids
        revoked, newest grant first.
        """
        ...

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
        ...
