"""Device authorizations (RFC 8628) of the SQL stores, and their approval into grants (the
contract, with its input checks: store/_protocols/devices.py)."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._decisions import (
    approved_device,
    binding,
    decide_poll,
    denied_device,
    is_decidable,
)
from pactmw.store._protocols.devices import DeviceApproval, DevicePoll
from pactmw.store._sql.core import Executor
from pactmw.store._sql.grants import GrantsMixin
from pactmw.store.base import Approval, DeviceAuthorization, Poll, UserCodeTaken

__all__ = ["DevicesMixin"]


class DevicesMixin(GrantsMixin):
    """The device-authorization primitives of `DeviceStore`, over the dialect hooks.

    Each transaction first locks the authorization row it decides on (where rows are
    locked): a concurrent decider or poller of the code waits for this commit and then
    finds the new state.
    """

    def _create_device_authorization(self, device: DeviceAuthorization) -> None:
        sql = self._sql
        user_code, now = device.user_code, device.created_at
        with self._write() as ex:
            self._maybe_purge(ex, now)
            holder = ex.execute(sql.user_code_holder, (user_code,)).fetchone()
            if holder is not None:
                if now < float(holder[1]):
                    raise UserCodeTaken(f"user code {user_code!r} is in use")
                if holder[0] == device.device_code_hash:
                    raise ValueError("device code hash is already stored")
                # The expired holder goes, to free the code (a refusal below rolls it back).
                ex.execute(sql.delete_device, (holder[0],))
            inserted = ex.execute(
                sql.insert_device,
                (
                    device.device_code_hash,
                    user_code,
                    device.brand_id,
                    device.client_id,
                    device.pa_sub,
                    self._encode_scopes(device.scopes),
                    now,
                    device.expires_at,
                    device.interval,
                ),
            )
            if inserted.rowcount == 0:
                taken = ex.execute(sql.device_hash_taken, (device.device_code_hash,)).fetchone()
                if taken is not None:
                    raise ValueError("device code hash is already stored")
                raise UserCodeTaken(f"user code {user_code!r} is in use")

    def _device_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        return self._read_one(self._sql.device_by_user_code, (user_code,), self._device)

    def _decidable_device(
        self, ex: Executor, user_code: str, now: float, brand_id: str | None = None
    ) -> DeviceAuthorization | None:
        # Inside a write transaction: the authorization, locked, if the user may decide it.
        row = ex.execute(self._sql.lock_device_by_user_code, (user_code,)).fetchone()
        device = None if row is None else self._device(row)
        return device if is_decidable(device, now=now, brand_id=brand_id) else None

    def _deny_device(
        self, user_code: str, account: str | None, now: float
    ) -> DeviceAuthorization | None:
        with self._write() as ex:
            if self._returning:
                # One conditional UPDATE: a concurrent decider blocks on the row, then
                # re-checks `status = 'pending'` against the winner's commit.
                row = ex.execute(
                    self._sql.deny_pending_returning, (account, user_code, now)
                ).fetchone()
                return None if row is None else self._device(row)
            device = self._decidable_device(ex, user_code, now)
            if device is None:
                return None
            ex.execute(self._sql.deny_device, (account, device.device_code_hash))
            return denied_device(device, account)

    def _approve_device(self, approval: DeviceApproval) -> Approval | None:
        # The authorization is read (and locked) first: a concurrent denial or approval of the
        # code either commits first, and this one returns None before touching any grant, or
        # waits and then finds the code decided. Then the grant, as in `upsert_grant`.
        account, granted = approval.account, approval.granted
        with self._write() as ex:
            device = self._decidable_device(ex, approval.user_code, approval.now, approval.brand_id)
            if device is None:
                return None
            grant = None
            if device.pa_sub is not None:  # else (Poppy) the poll that binds a user writes it
                grant = self._upsert_grant_in(ex, *approval.grant_upsert(device))
            grant_id = None if grant is None else grant.grant_id
            ex.execute(
                self._sql.approve_device,
                (account, self._encode_scopes(granted), grant_id, device.device_code_hash),
            )
            device = approved_device(device, account=account, granted=granted, grant_id=grant_id)
            return Approval(authorization=device, grant=grant)

    def _poll_device_code(self, poll: DevicePoll) -> Poll:
        sql = self._sql
        with self._write() as ex:
            # Polls of one code serialize; each sees the previous one's commit.
            row = ex.execute(sql.lock_device_by_hash, (poll.device_code_hash,)).fetchone()
            decision = decide_poll(None if row is None else self._device(row), poll)
            if decision.update == "touch":
                ex.execute(sql.touch_device, (poll.now, poll.device_code_hash))
            elif decision.update == "consume":
                ex.execute(sql.consume_device, (poll.device_code_hash,))
            elif decision.update == "bind":
                return self._bind(ex, decision.poll, poll)
            return decision.poll

    def _bind(self, ex: Executor, polled: Poll, poll: DevicePoll) -> Poll:
        # Inside the poll's transaction: the grant of the user the poll bound, then the
        # authorization consumed naming both (a refusal raises and rolls both back).
        device = polled.authorization
        assert device is not None
        grant = self._upsert_grant_in(ex, *binding(device, poll))
        ex.execute(self._sql.bind_device, (device.pa_sub, grant.grant_id, device.device_code_hash))
        return Poll(kind="approved", authorization=evolve(device, grant_id=grant.grant_id))
