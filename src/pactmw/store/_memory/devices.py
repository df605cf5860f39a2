"""Device authorizations (RFC 8628) of the memory store, and their approval into grants (the
contract, with its input checks: store/_protocols/devices.py)."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._decisions import (
    PollDecision,
    approved_device,
    binding,
    decide_poll,
    denied_device,
    is_decidable,
)
from pactmw.store._memory.grants import GrantsMixin
from pactmw.store._protocols.devices import DeviceApproval, DevicePoll
from pactmw.store.base import Approval, DeviceAuthorization, Poll, UserCodeTaken

__all__ = ["DevicesMixin"]


class DevicesMixin(GrantsMixin):
    """The device-authorization primitives of `DeviceStore`, on the in-memory state."""

    def _create_device_authorization(self, device: DeviceAuthorization) -> None:
        user_code = device.user_code
        with self._open:
            self._maybe_purge(device.created_at)
            holder = self._user_codes.get(user_code)
            if holder is not None and device.created_at < self._devices[holder].expires_at:
                raise UserCodeTaken(f"user code {user_code!r} is in use")
            if device.device_code_hash in self._devices:
                raise ValueError("device code hash is already stored")
            if holder is not None:
                self._drop_device(holder)
            self._devices[device.device_code_hash] = device
            self._user_codes[user_code] = device.device_code_hash

    def _device_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        with self._open:
            code_hash = self._user_codes.get(user_code)
            return None if code_hash is None else self._devices[code_hash]

    def _deny_device(
        self, user_code: str, account: str | None, now: float
    ) -> DeviceAuthorization | None:
        with self._open:
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

    def _approve_device(self, approval: DeviceApproval) -> Approval | None:
        account, granted = approval.account, approval.granted
        with self._open:
            device = self._pending_device(approval.user_code, approval.now, approval.brand_id)
            if device is None:
                return None
            grant = None
            if device.pa_sub is not None:  # else (Poppy) the poll that binds a user writes it
                # _upsert raises before changing anything, so a refusal leaves the code pending.
                grant = self._upsert(*approval.grant_upsert(device))
            grant_id = None if grant is None else grant.grant_id
            device = approved_device(device, account=account, granted=granted, grant_id=grant_id)
            self._devices[device.device_code_hash] = device
            return Approval(authorization=device, grant=grant)

    def _poll_device_code(self, poll: DevicePoll) -> Poll:
        with self._open:
            decision = decide_poll(self._devices.get(poll.device_code_hash), poll)
            polled = decision.poll.authorization
            if decision.update == "bind":
                assert polled is not None
                # _upsert raises before changing anything, so a refusal leaves it approved.
                grant = self._upsert(*binding(polled, poll))
                polled = evolve(polled, grant_id=grant.grant_id)
                decision = PollDecision(Poll(kind="approved", authorization=polled), "bind")
            if decision.update is not None:
                assert polled is not None
                self._devices[poll.device_code_hash] = polled
            return decision.poll
