"""Refresh tokens and single-use values of the memory store."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._decisions import RefreshTokenState, decide_rotation, is_unexpired, token_belongs
from pactmw.store._memory.core import MemoryCore, RefreshToken
from pactmw.store.base import NotFound, Rotation, check_token_owner, reject_nul

__all__ = ["TokensMixin"]


class TokensMixin(MemoryCore):
    """The refresh-token and single-use operations of `Store`, on the in-memory state."""

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
        with self._lock:
            self._check_open()
            grant = self._grants.get(grant_id)
            if grant is None:
                raise NotFound(f"unknown grant {grant_id!r}")
            check_token_owner(grant, client_id, brand_id)
            if token_hash in self._refresh:
                raise ValueError("refresh token hash is already stored")
            self._refresh[token_hash] = RefreshToken(grant_id, client_id, brand_id, expires_at)

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
        with self._lock:
            self._check_open()
            self._maybe_purge(now)
            token = self._refresh.get(token_hash)
            state = None
            if token is not None:
                state = RefreshTokenState(
                    grant_id=token.grant_id,
                    client_id=token.client_id,
                    brand_id=token.brand_id,
                    pa_sub=self._grants[token.grant_id].pa_sub,
                    expires_at=token.expires_at,
                    used_at=token.used_at,
                    successor=token.successor,
                )
            if (
                token is None
                or state is None
                or not token_belongs(state, client_id=client_id, brand_id=brand_id, pa_sub=pa_sub)
            ):
                return Rotation(kind="unknown")
            grant = self._grants[token.grant_id]
            self._clear_successors(now - reuse_interval, grant.grant_id)
            decision = decide_rotation(state, grant, now=now, reuse_interval=reuse_interval)
            if decision.update == "revoke_grant":
                self._revoke(grant, now)
            elif decision.update == "spend":
                if new_token_hash in self._refresh:
                    raise ValueError("new refresh token hash is already stored")
                self._refresh[token_hash] = evolve(token, used_at=now)
                self._refresh[new_token_hash] = RefreshToken(
                    grant.grant_id, client_id, brand_id, expires_at
                )
            return decision.rotation

    def seal_rotation(self, *, token_hash: str, successor: bytes) -> bool:
        """Keep the sealed answer of the rotation that spent `token_hash`; see `Store`."""
        with self._lock:
            self._check_open()
            token = self._refresh.get(token_hash)
            if token is None or token.used_at is None or token.successor is not None:
                return False
            self._refresh[token_hash] = evolve(token, successor=bytes(successor))
            return True

    def use_once(self, *, namespace: str, value: str, now: float, expires_at: float) -> bool:
        """Record `value` in `namespace` until `expires_at`; True only the first time."""
        reject_nul(namespace=namespace, value=value)
        with self._lock:
            self._check_open()
            self._maybe_purge(now)
            if is_unexpired(self._used.get((namespace, value)), now):
                return False
            self._used[(namespace, value)] = expires_at
            return True

    def is_marked(self, *, namespace: str, value: str, now: float) -> bool:
        """Tell whether an unexpired `use_once` record holds `value`; records nothing."""
        with self._lock:
            self._check_open()
            return is_unexpired(self._used.get((namespace, value)), now)
