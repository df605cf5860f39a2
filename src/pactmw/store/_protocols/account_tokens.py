"""Poppy Account Tokens (§4.8): the Store contract, its values and its one decision.

An Account Token is what a sign-in leaves the personal agent: it signs a Session of the same
agent and User ID in again, through the sign-in's grant (whose `pa_sub` is the User ID), for
the token's scopes or fewer. Unlike PACT's refresh tokens, presenting a rotated-away token is
refused (`reused`) without ending anything: its successor keeps working (the SDK's
`lifecycle.rotated-token`). Only hashes are stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from attrs import field, frozen

from pactmw.store._protocols.grants import GrantStore
from pactmw.store._protocols.tokens import RotationRequest
from pactmw.store.base import has_nul, reject_nul, scope_tuple

__all__ = [
    "AccountRefresh",
    "AccountRotation",
    "AccountRotationKind",
    "AccountToken",
    "AccountTokenStore",
    "decide_account_rotation",
]

AccountRotationKind = Literal["rotated", "unknown", "reused", "expired", "revoked", "invalid_scope"]


@frozen
class AccountToken:
    """One stored Account Token. `user_id` is its grant's `pa_sub` (the agent's User ID)."""

    grant_id: str
    brand_id: str
    client_id: str
    user_id: str
    scopes: tuple[str, ...]
    created_at: float
    expires_at: float
    used_at: float | None = None


@frozen
class AccountRotation:
    """What `rotate_account_token` did. `rotated` carries the grant, its account, the User ID
    and the scopes the new token (and the Session it signs in) hold."""

    kind: AccountRotationKind
    grant_id: str | None = None
    account: str | None = None
    user_id: str | None = None
    scopes: tuple[str, ...] = field(default=())


@frozen
class AccountRefresh(RotationRequest):
    """An Account Token rotation (`scopes` None: the token's own)."""

    scopes: tuple[str, ...] | None


def decide_account_rotation(
    token: AccountToken | None, *, grant_live: bool, refresh: AccountRefresh
) -> AccountRotationKind:
    """Whether a rotation may spend `token`, checked in this order: unknown, or another
    Brand's or agent's (`unknown`: nothing spent, PAP-4.8-02); spent before (`reused`:
    nothing else changes); expired; its grant revoked or expired (`revoked`); `scopes`
    wider than the token's (`invalid_scope`, PAP-4.4-02: nothing spent). Else `rotated`."""
    scopes, brand_id, client_id = refresh.scopes, refresh.brand_id, refresh.client_id
    if token is None or token.brand_id != brand_id or token.client_id != client_id:
        return "unknown"
    if token.used_at is not None:
        return "reused"
    if refresh.now >= token.expires_at:
        return "expired"
    if not grant_live:
        return "revoked"
    if scopes is not None and not set(scopes) <= set(token.scopes):
        return "invalid_scope"
    return "rotated"


class AccountTokenStore(GrantStore, Protocol):
    """Poppy Account Tokens: issued at sign-in, rotated on every use, read for sign-out."""

    def issue_account_token(
        self,
        *,
        token_hash: str,
        grant_id: str,
        brand_id: str,
        client_id: str,
        scopes: Sequence[str],
        now: float,
        expires_at: float,
    ) -> None:
        """Store a new Account Token of the grant for `scopes` (a subset of the grant's).

        Raises `NotFound` for an unknown grant; ValueError when `brand_id` or `client_id`
        differ from the grant's, a scope is not the grant's, or the hash is already stored.
        """
        reject_nul(token_hash=token_hash, grant_id=grant_id, brand_id=brand_id, client_id=client_id)
        wanted = scope_tuple("scopes", scopes)
        grant = self._token_grant(grant_id, client_id, brand_id)
        # A grant's scopes only widen, so they too are checked before the write.
        if not set(wanted) <= set(grant.scopes):
            raise ValueError("an Account Token's scopes must be its grant's")
        token = AccountToken(grant_id, brand_id, client_id, grant.pa_sub, wanted, now, expires_at)
        if not self._insert_account_token(token_hash, token):
            raise ValueError("Account Token hash is already stored")

    def rotate_account_token(
        self,
        *,
        token_hash: str,
        new_token_hash: str,
        brand_id: str,
        client_id: str,
        scopes: Sequence[str] | None,
        now: float,
        expires_at: float,
    ) -> AccountRotation:
        """Spend an Account Token and store its successor for `scopes` (None: the same
        scopes), atomically; see `decide_account_rotation` for the refusals. Of concurrent
        rotations of one token exactly one is `rotated`, the others `reused`, and the
        winner's new token keeps working."""
        reject_nul(new_token_hash=new_token_hash)
        wanted = None if scopes is None else scope_tuple("scopes", scopes)
        if has_nul(token_hash, brand_id, client_id):
            return AccountRotation("unknown")
        return self._rotate_account_token(
            AccountRefresh(token_hash, new_token_hash, client_id, brand_id, now, expires_at, wanted)
        )

    def account_token(self, token_hash: str) -> AccountToken | None:
        """The Account Token with this hash in any state (spent, expired), or None."""
        return None if has_nul(token_hash) else self._account_token(token_hash)

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _insert_account_token(self, token_hash: str, token: AccountToken) -> bool:
        """Store `token`; False, storing nothing, when the hash is stored."""
        ...

    def _rotate_account_token(self, refresh: AccountRefresh) -> AccountRotation:
        """Lock the token; `decide_account_rotation`; when `rotated`, spend it and store its
        successor (ValueError if the new hash is stored), atomically."""
        ...

    def _account_token(self, token_hash: str) -> AccountToken | None: ...
