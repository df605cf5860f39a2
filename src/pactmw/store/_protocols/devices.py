"""The device-authorization operations (RFC 8628) of the Store contract."""

from __future__ import annotations

from typing import Protocol

from attrs import frozen

from pactmw.store._protocols.grants import GrantKey
from pactmw.store.base import (
    Approval,
    DeviceAuthorization,
    Poll,
    check_approval,
    check_denial,
    has_nul,
    reject_nul,
    scope_tuple,
)

__all__ = ["DeviceApproval", "DevicePoll", "DeviceStore"]


@frozen
class DeviceApproval:
    """An approval whose inputs are checked: `granted` as given, `wanted` the grant's form."""

    user_code: str
    brand_id: str
    account: str
    granted: tuple[str, ...]
    wanted: tuple[str, ...]
    new_grant_id: str
    now: float
    grant_expires_at: float

    def grant_upsert(
        self, device: DeviceAuthorization
    ) -> tuple[str, GrantKey, tuple[str, ...], float, float]:
        """The grant this approval of `device` (which names its user) creates or widens, as
        a backend's upsert takes it: the new grant's id, the key, the scopes, now, expiry."""
        assert device.pa_sub is not None
        key = (self.brand_id, self.account, device.client_id, device.pa_sub)
        return self.new_grant_id, key, self.wanted, self.now, self.grant_expires_at


@frozen
class DevicePoll:
    """A device-code poll whose ids hold no NUL (see `DeviceStore.poll_device_code`)."""

    device_code_hash: str
    client_id: str
    brand_id: str
    pa_sub: str
    now: float
    new_grant_id: str | None
    grant_expires_at: float | None
    session_account: str | None


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
        reject_nul(
            device_code_hash=device_code_hash,
            user_code=user_code,
            brand_id=brand_id,
            client_id=client_id,
            pa_sub=pa_sub or "",
        )
        device = DeviceAuthorization(
            device_code_hash=device_code_hash,
            user_code=user_code,
            brand_id=brand_id,
            client_id=client_id,
            pa_sub=pa_sub,
            scopes=scope_tuple("scopes", scopes),
            created_at=now,
            expires_at=expires_at,
            interval=float(interval),
            last_polled_at=None,
            status="pending",
            account=None,
            granted_scopes=(),
            grant_id=None,
        )
        self._create_device_authorization(device)

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code` in any state, expired or not, or None.

        The caller checks status and expiry; the code is matched exactly as stored.
        """
        return None if has_nul(user_code) else self._device_by_user_code(user_code)

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
        account = check_denial(approved, account)
        return None if has_nul(user_code) else self._deny_device(user_code, account, now)

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
        granted, wanted = check_approval(account, granted_scopes, new_grant_id)
        if has_nul(user_code, brand_id):
            return None
        return self._approve_device(
            DeviceApproval(
                user_code, brand_id, account, granted, wanted, new_grant_id, now, grant_expires_at
            )
        )

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
        if has_nul(device_code_hash, client_id, brand_id, pa_sub, session_account or ""):
            return Poll(kind="unknown")
        return self._poll_device_code(
            DevicePoll(
                device_code_hash,
                client_id,
                brand_id,
                pa_sub,
                now,
                new_grant_id,
                grant_expires_at,
                session_account,
            )
        )

    # --- what a backend implements (inputs already checked) ------------------------------------

    def _create_device_authorization(self, device: DeviceAuthorization) -> None:
        """Store `device` (made at its `created_at`), purging now and then: `UserCodeTaken`
        while an unexpired authorization holds its user code (an expired holder is deleted),
        ValueError when its device code hash is stored."""
        ...

    def _device_by_user_code(self, user_code: str) -> DeviceAuthorization | None: ...

    def _deny_device(
        self, user_code: str, account: str | None, now: float
    ) -> DeviceAuthorization | None:
        """Deny the authorization if `is_decidable`; it, denied, or None."""
        ...

    def _approve_device(self, approval: DeviceApproval) -> Approval | None:
        """Approve the authorization if `is_decidable` for the Brand, with its grant upserted
        in the same transaction (none while it names no user); None, changing nothing, else."""
        ...

    def _poll_device_code(self, poll: DevicePoll) -> Poll:
        """Apply `decide_poll`, binding (`check_binding`, then the grant upserted) when it
        says so, in one transaction."""
        ...
