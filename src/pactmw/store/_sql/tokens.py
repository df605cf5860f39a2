"""Refresh tokens and single-use values of the SQL stores."""

from __future__ import annotations

from pactmw.store._decisions import RefreshTokenState, decide_rotation, is_unexpired, token_belongs
from pactmw.store._sql.core import Executor, SqlCore, opt_bytes, opt_float
from pactmw.store.base import NotFound, Rotation, check_token_owner, has_nul, reject_nul

__all__ = ["TokensMixin"]


class TokensMixin(SqlCore):
    """The refresh-token and single-use operations of `Store`, over the dialect hooks."""

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
        """Store a new, unused refresh token for the grant; see `Store`."""
        reject_nul(token_hash=token_hash, grant_id=grant_id, client_id=client_id, brand_id=brand_id)
        with self._write() as ex:
            row = ex.execute(self._sql.grant, (grant_id,)).fetchone()
            if row is None:
                raise NotFound(f"unknown grant {grant_id!r}")
            check_token_owner(self._grant(row), client_id, brand_id)
            self._insert_refresh_token(
                ex, token_hash, grant_id, client_id, brand_id, now, expires_at
            )

    def _insert_refresh_token(
        self,
        ex: Executor,
        token_hash: str,
        grant_id: str,
        client_id: str,
        brand_id: str,
        now: float,
        expires_at: float,
    ) -> None:
        inserted = ex.execute(
            self._sql.insert_refresh_token,
            (token_hash, grant_id, client_id, brand_id, now, expires_at),
        )
        if inserted.rowcount == 0:
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
        """Spend a refresh token and store its successor, atomically; see `Store`.

        Concurrent rotations of one token: one `rotated`, the rest `reused`, which revokes
        the grant (a replay cannot be told from theft; RFC 9700 §4.14).
        """
        reject_nul(new_token_hash=new_token_hash)
        if has_nul(token_hash, client_id, brand_id, pa_sub):
            return Rotation(kind="unknown")
        sql = self._sql
        with self._write() as ex:
            self._maybe_purge(ex, now)
            # Lock order everywhere: the token row, then its grant row.
            token = ex.execute(sql.lock_refresh_token, (token_hash,)).fetchone()
            state = None
            if token is not None:
                state = RefreshTokenState(
                    grant_id=token[0],
                    client_id=token[1],
                    brand_id=token[2],
                    pa_sub=token[5],
                    expires_at=float(token[3]),
                    used_at=opt_float(token[4]),
                    successor=opt_bytes(token[6]),
                )
            if state is None or not token_belongs(
                state, client_id=client_id, brand_id=brand_id, pa_sub=pa_sub
            ):
                return Rotation(kind="unknown")
            row = ex.execute(sql.lock_grant, (state.grant_id,)).fetchone()
            assert row is not None  # the foreign key keeps it
            grant = self._grant(row)
            ex.execute(sql.clear_successors, (grant.grant_id, now - reuse_interval))
            decision = decide_rotation(state, grant, now=now, reuse_interval=reuse_interval)
            if decision.update == "revoke_grant":
                ex.execute(sql.revoke_grant, (now, grant.grant_id))
            elif decision.update == "spend":
                ex.execute(sql.spend_refresh_token, (now, token_hash))
                self._insert_refresh_token(
                    ex, new_token_hash, grant.grant_id, client_id, brand_id, now, expires_at
                )
            return decision.rotation

    def seal_rotation(self, *, token_hash: str, successor: bytes) -> bool:
        """Keep the sealed answer of the rotation that spent `token_hash`; see `Store`."""
        if has_nul(token_hash):
            return False
        with self._write() as ex:
            sealed = ex.execute(self._sql.seal_rotation, (bytes(successor), token_hash))
            return sealed.rowcount == 1

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record `value` in `namespace` until `expires_at`; True only the first time."""
        reject_nul(namespace=namespace, value=value)
        with self._write() as ex:
            self._maybe_purge(ex, now)
            recorded = ex.execute(self._sql.use_once, (namespace, value, expires_at, now))
            return recorded.rowcount == 1

    def is_marked(self, *, namespace: str, value: str, now: float) -> bool:
        """Tell whether an unexpired `use_once` record holds `value`; records nothing."""
        if has_nul(namespace, value):
            return False
        with self._read() as ex:
            row = ex.execute(self._sql.used_until, (namespace, value)).fetchone()
        return is_unexpired(None if row is None else float(row[0]), now)
