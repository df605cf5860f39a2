"""Refresh tokens and single-use values of the memory store (the contract, with its input
checks: store/_protocols/tokens.py)."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._decisions import RefreshTokenState, decide_rotation, is_unexpired, token_belongs
from pactmw.store._memory.core import MemoryCore
from pactmw.store._protocols.tokens import RefreshRequest
from pactmw.store.base import Grant, Rotation

__all__ = ["TokensMixin"]


class TokensMixin(MemoryCore):
    """The refresh-token and single-use primitives of `TokenStore`, on the in-memory state."""

    def _insert_refresh_token(
        self, token_hash: str, grant: Grant, now: float, expires_at: float
    ) -> bool:
        with self._open:
            if token_hash in self._refresh:
                return False
            self._refresh[token_hash] = RefreshTokenState(
                grant.grant_id, grant.client_id, grant.brand_id, grant.pa_sub, expires_at, None
            )
            return True

    def _rotate_refresh_token(self, request: RefreshRequest) -> Rotation:
        now = request.now
        with self._open:
            self._maybe_purge(now)
            state = self._refresh.get(request.token_hash)
            if not token_belongs(
                state, client_id=request.client_id, brand_id=request.brand_id, pa_sub=request.pa_sub
            ):
                return Rotation(kind="unknown")
            assert state is not None  # it belongs
            grant = self._grants[state.grant_id]
            self._clear_successors(now - request.reuse_interval, grant.grant_id)
            decision = decide_rotation(state, grant, now=now, reuse_interval=request.reuse_interval)
            if decision.update == "revoke_grant":
                self._revoke(grant, now)
            elif decision.update == "spend":
                if request.new_token_hash in self._refresh:
                    raise ValueError("new refresh token hash is already stored")
                self._refresh[request.token_hash] = evolve(state, used_at=now)
                self._refresh[request.new_token_hash] = RefreshTokenState(
                    grant.grant_id,
                    request.client_id,
                    request.brand_id,
                    grant.pa_sub,
                    request.expires_at,
                    None,
                )
            return decision.rotation

    def _seal_rotation(self, token_hash: str, successor: bytes) -> bool:
        with self._open:
            token = self._refresh.get(token_hash)
            if token is None or token.used_at is None or token.successor is not None:
                return False
            self._refresh[token_hash] = evolve(token, successor=successor)
            return True

    def _use_once(self, namespace: str, value: str, now: float, expires_at: float) -> bool:
        with self._open:
            self._maybe_purge(now)
            if is_unexpired(self._used.get((namespace, value)), now):
                return False
            self._used[(namespace, value)] = expires_at
            return True

    def _is_marked(self, namespace: str, value: str, now: float) -> bool:
        with self._open:
            return is_unexpired(self._used.get((namespace, value)), now)
