"""Device authorizations (RFC 8628) of the memory store, and their approval into grants."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._decisions import (
    PollDecision,
    approved_device,
    decide_poll,
    denied_device,
    is_decidable,
)
from pactmw.store._memory.grants import GrantsMixin
from pactmw.store.base import (
    Approval,
    DeviceAuthorization,
    Poll,
    UserCodeTaken,
    check_approval,
    check_binding,
    check_denial,
    grant_scopes,
    has_nul,
    reject_nul,
    scope_tuple,
)

__all__ = ["DevicesMixin"]


class DevicesMixin(GrantsMixin):
    """The device-authorization operations of `Store`, on the in-memory state."""

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
        """Store a new `pending` device authorization; see `Store`."""
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
        with self._lock:
            self._check_open()
            self._maybe_purge(now)
            holder = self._user_codes.get(user_code)
            if holder is not None and now < self._devices[holder].expires_at:
                raise UserCodeTaken(f"user code {user_code!r} is in use")
            if device_code_hash in self._devices:
                raise ValueError("device code hash is already stored")
            if holder is not None:
                self._drop_device(holder)
            self._devices[device_code_hash] = device
            self._user_codes[user_code] = device_code_hash

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code`, or None."""
        with self._lock:
            self._check_open()
            code_hash = self._user_codes.get(user_code)
            return None if code_hash is None else self._devices[code_hash]

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
        """Record the user's denial of a pending, unexpired authorization; see `Store`."""
        account = check_denial(approved, account)
        with self._lock:
            self._check_open()
            device = self._pending_device(user_code, now)
            if device is None:
                return None
            device = denied_device(device, account)
            self._devices[device.device_code_hash] = device
            return device

    def _pending_device(
        self, user_code: str, now: float, brand_id: str | None = None
    ) -> DeviceAuthorization | None:
        # Called with the lock held: the authorization holding the code, if still decidable.
        code_hash = self._user_codes.get(user_code)
        device = None if code_hash is None else self._devices[code_hash]
        return device if is_decidable(device, now=now, brand_id=brand_id) else None

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
        """Approve a pending authorization and create or widen its grant, atomically."""
        granted, wanted = check_approval(account, granted_scopes, new_grant_id)
        with self._lock:
            self._check_open()
            device = self._pending_device(user_code, now, brand_id)
            if device is None:
                return None
            if device.pa_sub is None:
                # No user yet (Poppy): the poll that binds one writes the grant.
                device = approved_device(device, account=account, granted=granted, grant_id=None)
                self._devices[device.device_code_hash] = device
                return Approval(authorization=device, grant=None)
            # _upsert raises before changing anything, so a refusal leaves the code pending.
            grant = self._upsert(
                new_grant_id,
                (brand_id, account, device.client_id, device.pa_sub),
                wanted,
                now,
                grant_expires_at,
            )
            device = approved_device(
                device, account=account, granted=granted, grant_id=grant.grant_id
            )
            self._devices[device.device_code_hash] = device
            return Approval(authorization=device, grant=grant)

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
        """Answer one device-code token request, atomically; see `Store`."""
        if has_nul(pa_sub, session_account or ""):
            return Poll(kind="unknown")  # as the SQL stores: a NUL id finds nothing
        with self._lock:
            self._check_open()
            decision = decide_poll(
                self._devices.get(device_code_hash),
                client_id=client_id,
                brand_id=brand_id,
                pa_sub=pa_sub,
                now=now,
                can_bind=new_grant_id is not None,
                session_account=session_account,
            )
            polled = decision.poll.authorization
            if decision.update == "bind":
                assert polled is not None
                assert polled.account is not None
                new_grant_id, grant_expires_at = check_binding(new_grant_id, grant_expires_at)
                # _upsert raises before changing anything, so a refusal leaves it approved.
                grant = self._upsert(
                    new_grant_id,
                    (brand_id, polled.account, client_id, pa_sub),
                    grant_scopes(polled.granted_scopes),
                    now,
                    grant_expires_at,
                )
                polled = evolve(polled, grant_id=grant.grant_id)
                decision = PollDecision(Poll(kind="approved", authorization=polled), "bind")
            if decision.update is not None:
                assert polled is not None
                self._devices[device_code_hash] = polled
            return decision.poll
