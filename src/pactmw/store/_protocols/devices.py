"""The device-authorization operations (RFC 8628) of the Store contract."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pactmw.store.base import Approval, DeviceAuthorization, Poll

__all__ = ["DeviceStore"]


class DeviceStore(Protocol):
    """Device authorizations: created, looked up, denied or approved into a grant, polled."""

    def create_device_authorization(
        self,
        *,
        device_code_hash: str,
        user_code: str,
        brand_id: str,
        client_id: str,
        pa_sub: str | None,
        scopes: tuple[str, ...],
        now: float,
        expires_at: float,
        interval: float,
    ) -> None:
        """Store a new `pending` device authorization.

        `pa_sub` None makes one that names no user yet (a Poppy agent asks with its client
        assertion only): the poll that collects it binds the polling user (see
        `poll_device_code`).

        `user_code` is unique among unexpired authorizations: when another one holds it,
        raise `UserCodeTaken` so the caller draws another code. An expired holder of the code
        is deleted to free it (a poll of its device code then reads `unknown`). A
        `device_code_hash` already stored raises ValueError. Authorizations expired longer
        than a day are purged now and then.
        """
        ...

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code` in any state, expired or not, or None.

        The caller checks status and expiry; the code is matched exactly as stored.
        """
        ...

    def decide_device_authorization(
        self,
        *,
        user_code: str,
        approved: bool,
        account: str | None,
        granted_scopes: tuple[str, ...],
        grant_id: str | None,
        now: float,
    ) -> DeviceAuthorization | None:
        """Record the user's denial of a `pending`, unexpired authorization; return it.

        Denials only: `approved=True` raises ValueError, since an approval must write its
        grant in the same transaction (`approve_device_authorization`). Records `account`
        (may be None) and ignores `granted_scopes` and `grant_id`. Returns None, changing
        nothing, when the code is unknown, expired or already decided: of several concurrent
        deciders (denials and approvals) exactly one wins.
        """
        ...

    def approve_device_authorization(
        self,
        *,
        user_code: str,
        brand_id: str,
        account: str,
        granted_scopes: tuple[str, ...],
        new_grant_id: str,
        now: float,
        grant_expires_at: float,
    ) -> Approval | None:
        """Approve a `pending`, unexpired authorization of `brand_id` and grant it, atomically.

        In one transaction: the grant of `(brand_id, account, client_id, pa_sub)` (the last
        two from the authorization) is created under `new_grant_id` or widened exactly as
        `upsert_grant` does (scope union, later expiry, never reviving a revoked or expired
        grant), and the authorization turns `approved` with `account`, `granted_scopes` (kept
        as given) and the grant's id. Returns both. An authorization without a user
        (`pa_sub` None) turns `approved` with no grant (`Approval.grant` None): its grant
        needs the user, which the poll binds (`new_grant_id` and `grant_expires_at` unused).

        Returns None and changes NOTHING (no grant written or widened) when the code is
        unknown, belongs to another Brand, is expired or was already decided: of concurrent
        approvals and denials of one code exactly one wins, and a losing approval leaves the
        grants as they were. Empty `granted_scopes` raise ValueError, and so does a
        `new_grant_id` already used when a new grant is needed (nothing changes then either).
        """
        ...

    def poll_device_code(
        self,
        *,
        device_code_hash: str,
        client_id: str,
        brand_id: str,
        pa_sub: str,
        now: float,
        new_grant_id: str | None = None,
        grant_expires_at: float | None = None,
        session_account: str | None = None,
    ) -> Poll:
        """Answer one device-code token request, atomically; see `Poll`.

        Checked in order: unknown (or issued to another client, Brand or agent user
        `pa_sub`: then nothing changes, not even `last_polled_at`), expired, denied,
        consumed; pending records `last_polled_at = now` and reads `slow_down` when the
        previous poll was less than `interval` seconds before, else `pending`; approved
        turns `consumed`. Of concurrent polls of an approved code exactly one reads
        `approved`, the others `consumed`.

        An authorization made without a user is polled by any `pa_sub` of its client and
        Brand, through polls that give `new_grant_id` (any other, such as PACT's token
        endpoint, reads `unknown`). When approved, the poll binds it in one transaction:
        the grant of `(brand_id, account, client_id, pa_sub)` is created under
        `new_grant_id` (expiring at `grant_expires_at`) or widened as `upsert_grant` does,
        and the authorization turns `consumed` with `pa_sub` and the grant's id.
        `session_account` is the account the polling Poppy Session was ever signed in to:
        an approval by another account reads `account_mismatch` and changes nothing
        (PAP-4.8-04). Binding with `new_grant_id` but
        no `grant_expires_at` raises ValueError, changing nothing.
        """
        ...
