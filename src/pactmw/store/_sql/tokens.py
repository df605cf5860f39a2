"""Refresh tokens and single-use values of the SQL stores (the contract, with its input
checks: store/_protocols/tokens.py)."""

from __future__ import annotations

from pactmw.store._decisions import RefreshTokenState, decide_rotation, is_unexpired, token_belongs
from pactmw.store._protocols.tokens import RefreshRequest
from pactmw.store._sql.core import SqlCore
from pactmw.store._sql.rows import RowReader
from pactmw.store.base import Grant, Rotation

__all__ = ["TokensMixin"]

# The locked token row, with its grant's `pa_sub` (`lock_refresh_token`).
_REFRESH_TOKEN_ROW = RowReader.of(RefreshTokenState)


class TokensMixin(SqlCore):
    """The refresh-token and single-use primitives of `TokenStore`, over the dialect hooks."""

    def _insert_refresh_token(
        self, token_hash: str, grant: Grant, now: float, expires_at: float
    ) -> bool:
        params = (token_hash, grant.grant_id, grant.client_id, grant.brand_id, now, expires_at)
        with self._write() as ex:
            return ex.execute(self._sql.insert_refresh_token, params).rowcount > 0

    def _rotate_refresh_token(self, request: RefreshRequest) -> Rotation:
        sql, now = self._sql, request.now
        with self._write() as ex:
            self._maybe_purge(ex, now)
            # Lock order everywhere: the token row, then its grant row.
            token = ex.execute(sql.lock_refresh_token, (request.token_hash,)).fetchone()
            if token is None:
                return Rotation(kind="unknown")
            state = _REFRESH_TOKEN_ROW.read(token)
            if not token_belongs(
                state, client_id=request.client_id, brand_id=request.brand_id, pa_sub=request.pa_sub
            ):
                return Rotation(kind="unknown")
            row = ex.execute(sql.lock_grant, (state.grant_id,)).fetchone()
            assert row is not None  # the foreign key keeps it
            grant = self._grant(row)
            ex.execute(sql.clear_successors, (grant.grant_id, now - request.reuse_interval))
            decision = decide_rotation(state, grant, now=now, reuse_interval=request.reuse_interval)
            if decision.update == "revoke_grant":
                ex.execute(sql.revoke_grant, (now, grant.grant_id))
            elif decision.update == "spend":
                ex.execute(sql.spend_refresh_token, (now, request.token_hash))
                successor = (request.new_token_hash, grant.grant_id, request.client_id)
                params = (*successor, request.brand_id, now, request.expires_at)
                if ex.execute(sql.insert_refresh_token, params).rowcount == 0:
                    raise ValueError("new refresh token hash is already stored")
            return decision.rotation

    def _seal_rotation(self, token_hash: str, successor: bytes) -> bool:
        with self._write() as ex:
            return ex.execute(self._sql.seal_rotation, (successor, token_hash)).rowcount == 1

    def _use_once(self, namespace: str, value: str, now: float, expires_at: float) -> bool:
        with self._write() as ex:
            self._maybe_purge(ex, now)
            recorded = ex.execute(self._sql.use_once, (namespace, value, expires_at, now))
            return recorded.rowcount == 1

    def _is_marked(self, namespace: str, value: str, now: float) -> bool:
        with self._read() as ex:
            row = ex.execute(self._sql.used_until, (namespace, value)).fetchone()
        return is_unexpired(None if row is None else float(row[0]), now)
