"""The refresh-token and single-use-value operations of the Store contract."""

from __future__ import annotations

from typing import Protocol

from attrs import field, frozen

from pactmw.store._protocols.grants import GrantStore
from pactmw.store.base import Grant, Rotation, has_nul, reject_nul

__all__ = ["RefreshRequest", "RotationRequest", "TokenStore"]


@frozen
class RotationRequest:
    """A token rotation whose ids hold no NUL: the token to spend, its successor's hash,
    who presents it, when, and until when the successor lasts."""

    token_hash: str = field(repr=False)
    new_token_hash: str = field(repr=False)
    client_id: str
    brand_id: str
    now: float
    expires_at: float


@frozen
class RefreshRequest(RotationRequest):
    """A refresh-token rotation (see `TokenStore.rotate_refresh_token`)."""

    pa_sub: str
    reuse_interval: float


class TokenStore(GrantStore, Protocol):
    """Refresh tokens (issued, rotated) and single-use values (`use_once`, `is_marked`)."""

    def issue_refresh_token(
        self,
        *,
        token_hash: str,
        grant_id: str,
        client_id: str,
        brand_id: str,
        now: float,
        expires_at: float,
    ) -> None:
        """Store a new, unused refresh token (only its hash) for the grant.

        Raises `NotFound` for an unknown grant, ValueError when `client_id` or `brand_id`
        differ from the grant's or the hash is already stored.
        """
        reject_nul(token_hash=token_hash, grant_id=grant_id, client_id=client_id, brand_id=brand_id)
        grant = self._token_grant(grant_id, client_id, brand_id)
        if not self._insert_refresh_token(token_hash, grant, now, expires_at):
            raise ValueError("refresh token hash is already stored")

    def rotate_refresh_token(
        self,
        *,
        token_hash: str,
        new_token_hash: str,
        client_id: str,
        brand_id: str,
        pa_sub: str,
        now: float,
        expires_at: float,
        reuse_interval: float = 0.0,
    ) -> Rotation:
        """Spend a refresh token and store its successor, atomically; see `Rotation`.

        Checked in order: unknown hash, or issued to another client, Brand or agent user
        (`pa_sub`, the grant's: a token belongs to its grant's agent user) gives `unknown`;
        the token is not spent, nothing is revoked, so nobody can burn another's token and a
        mismatch never counts as reuse; already spent
        (`reused`: the whole grant is revoked, RFC 9700 §4.14, which kills the successor
        tokens too); token expired (`expired`); grant not live (`revoked`). Otherwise the
        token is marked used at `now`, `new_token_hash` is stored for the same grant with
        `expires_at`, and the result is `rotated`.

        A spent token presented again less than `reuse_interval` seconds after it was spent
        (capped at `MAX_REFRESH_REUSE_INTERVAL`; 0 disables) while its grant is live is
        `repeated` instead of `reused`: nothing changes, and the result carries what the
        spending rotation stored with `seal_rotation`, so the caller answers the same again
        (Okta's and Auth0's reuse interval). Sealed answers older than the interval are
        cleared here for the token's grant (and by the opportunistic purge after the cap).

        Of concurrent rotations of one token exactly one is `rotated`; within the reuse
        interval every other one is `repeated`, otherwise `reused`, which revokes the grant,
        the winner's new token included (a replay cannot be told from theft).
        """
        reject_nul(new_token_hash=new_token_hash)
        if has_nul(token_hash, client_id, brand_id, pa_sub):
            return Rotation(kind="unknown")
        request = (token_hash, new_token_hash, client_id, brand_id, now, expires_at)
        return self._rotate_refresh_token(RefreshRequest(*request, pa_sub, reuse_interval))

    def seal_rotation(self, *, token_hash: str, successor: bytes) -> bool:
        """Keep `successor` (the sealed answer of the rotation that spent `token_hash`) for
        repeats within the reuse interval; True when stored.

        Only a spent token without a sealed answer takes one: a second seal, an unknown or
        unspent token leave everything as it was (False).
        """
        return not has_nul(token_hash) and self._seal_rotation(token_hash, bytes(successor))

    # --- single-use values -------------------------------------------------------------------

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record `value` in `namespace` until `expires_at`; True only the first time.

        For single-use ids (a Brand login assertion's `jti`, a proof's `jti`): True when
        `(namespace, value)` was not seen, or its record expired (`now >= expires_at` of the
        record); False while an earlier record is unexpired. Of concurrent callers exactly one
        gets True. Expired records are purged now and then, so the table stays bounded.
        """
        reject_nul(namespace=namespace, value=value)
        return self._use_once(namespace, value, now, expires_at)

    def is_marked(self, *, namespace: str, value: str, now: float) -> bool:
        """Tell whether `use_once` recorded `value` in `namespace` and the record is unexpired.

        A pure read: nothing is recorded or renewed. True exactly when `use_once` would now
        return False. A value holding NUL was never recorded (False).
        """
        return not has_nul(namespace, value) and self._is_marked(namespace, value, now)

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _insert_refresh_token(
        self, token_hash: str, grant: Grant, now: float, expires_at: float
    ) -> bool:
        """Store an unused token of `grant` (its client and Brand); False if the hash is stored."""
        ...

    def _rotate_refresh_token(self, request: RefreshRequest) -> Rotation:
        """Lock the token, then its grant; `token_belongs`, then `decide_rotation` (clearing
        the grant's sealed answers older than the reuse interval), purging now and then."""
        ...

    def _seal_rotation(self, token_hash: str, successor: bytes) -> bool: ...

    def _use_once(self, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record the value unless an unexpired record holds it; whether it did (purging)."""
        ...

    def _is_marked(self, namespace: str, value: str, now: float) -> bool: ...
