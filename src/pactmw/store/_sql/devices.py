"""Device authorizations (RFC 8628) of the SQL stores, and their approval into grants."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._decisions import approved_device, decide_poll, denied_device, is_decidable
from pactmw.store._sql.core import Executor
from pactmw.store._sql.grants import GrantsMixin
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
    """The device-authorization operations of `Store`, over the dialect hooks.

    Each transaction first locks the authorization row it decides on (where rows are
    locked): a concurrent decider or poller of the code waits for this commit and then
    finds the new state.
    """

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
        requested = self._encode_scopes(scope_tuple("scopes", scopes))
        sql = self._sql
        with self._write() as ex:
            self._maybe_purge(ex, now)
            holder = ex.execute(sql.user_code_holder, (user_code,)).fetchone()
            if holder is not None:
                if now < float(holder[1]):
                    raise UserCodeTaken(f"user code {user_code!r} is in use")
                if holder[0] == device_code_hash:
                    raise ValueError("device code hash is already stored")
                # The expired holder goes, to free the code (a refusal below rolls it back).
                ex.execute(sql.delete_device, (holder[0],))
            inserted = ex.execute(
                sql.insert_device,
                (
                    device_code_hash,
                    user_code,
                    brand_id,
                    client_id,
                    pa_sub,
                    requested,
                    now,
                    expires_at,
                    float(interval),
                ),
            )
            if inserted.rowcount == 0:
                if ex.execute(sql.device_hash_taken, (device_code_hash,)).fetchone() is not None:
                    raise ValueError("device code hash is already stored")
                raise UserCodeTaken(f"user code {user_code!r} is in use")

    def device_authorization_by_user_code(self, user_code: str) -> DeviceAuthorization | None:
        """Return the authorization holding `user_code`, or None."""
        if has_nul(user_code):
            return None
        with self._read() as ex:
            row = ex.execute(self._sql.device_by_user_code, (user_code,)).fetchone()
        return None if row is None else self._device(row)

    def _decidable_device(
        self, ex: Executor, user_code: str, now: float, brand_id: str | None = None
    ) -> DeviceAuthorization | None:
        # Inside a write transaction: the authorization, locked, if the user may decide it.
        row = ex.execute(self._sql.lock_device_by_user_code, (user_code,)).fetchone()
        device = None if row is None else self._device(row)
        return device if is_decidable(device, now=now, brand_id=brand_id) else None

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
        if has_nul(user_code):
            return None
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
        """Approve a pending authorization and create or widen its grant, atomically.

        The authorization is read (and locked) first: a concurrent denial or approval of the
        code either commits first, and this one returns None before touching any grant, or
        waits and then finds the code decided. Then the grant, as in `upsert_grant`.
        """
        granted, wanted = check_approval(account, granted_scopes, new_grant_id)
        if has_nul(user_code, brand_id):
            return None
        with self._write() as ex:
            device = self._decidable_device(ex, user_code, now, brand_id)
            if device is None:
                return None
            if device.pa_sub is None:
                # No user yet (Poppy): the poll that binds one writes the grant.
                ex.execute(
                    self._sql.approve_device,
                    (account, self._encode_scopes(granted), None, device.device_code_hash),
                )
                device = approved_device(device, account=account, granted=granted, grant_id=None)
                return Approval(authorization=device, grant=None)
            grant = self._upsert_grant(
                ex,
                grant_id=new_grant_id,
                brand_id=brand_id,
                account=account,
                client_id=device.client_id,
                pa_sub=device.pa_sub,
                wanted=wanted,
                now=now,
                expires_at=grant_expires_at,
            )
            ex.execute(
                self._sql.approve_device,
                (
                    account,
                    self._encode_scopes(granted),
                    grant.grant_id,
                    device.device_code_hash,
                ),
            )
            device = approved_device(
                device, account=account, granted=granted, grant_id=grant.grant_id
            )
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
        if has_nul(device_code_hash, client_id, brand_id, pa_sub, session_account or ""):
            return Poll(kind="unknown")
        sql = self._sql
        with self._write() as ex:
            # Polls of one code serialize; each sees the previous one's commit.
            row = ex.execute(sql.lock_device_by_hash, (device_code_hash,)).fetchone()
            decision = decide_poll(
                None if row is None else self._device(row),
                client_id=client_id,
                brand_id=brand_id,
                pa_sub=pa_sub,
                now=now,
                can_bind=new_grant_id is not None,
                session_account=session_account,
            )
            if decision.update == "touch":
                ex.execute(sql.touch_device, (now, device_code_hash))
            elif decision.update == "consume":
                ex.execute(sql.consume_device, (device_code_hash,))
            elif decision.update == "bind":
                return self._bind(ex, decision.poll, new_grant_id, grant_expires_at, now)
            return decision.poll

    def _bind(
        self,
        ex: Executor,
        poll: Poll,
        new_grant_id: str | None,
        grant_expires_at: float | None,
        now: float,
    ) -> Poll:
        # Inside the poll's transaction: the grant of the user the poll bound, then the
        # authorization consumed naming both (a refusal raises and rolls both back).
        device = poll.authorization
        assert device is not None
        assert device.account is not None
        assert device.pa_sub is not None
        new_grant_id, grant_expires_at = check_binding(new_grant_id, grant_expires_at)
        grant = self._upsert_grant(
            ex,
            grant_id=new_grant_id,
            brand_id=device.brand_id,
            account=device.account,
            client_id=device.client_id,
            pa_sub=device.pa_sub,
            wanted=grant_scopes(device.granted_scopes),
            now=now,
            expires_at=grant_expires_at,
        )
        ex.execute(self._sql.bind_device, (device.pa_sub, grant.grant_id, device.device_code_hash))
        return Poll(kind="approved", authorization=evolve(device, grant_id=grant.grant_id))
