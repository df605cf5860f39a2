"""Poppy Account Tokens of the memory store (the contract: store/_protocols/account_tokens.py)."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve

from pactmw.store._memory.core import MemoryCore
from pactmw.store._protocols.account_tokens import (
    AccountRotation,
    AccountToken,
    decide_account_rotation,
)
from pactmw.store.base import NotFound, check_token_owner, reject_nul, scope_tuple

__all__ = ["AccountTokensMixin"]


class AccountTokensMixin(MemoryCore):
    """The Account Token operations, on `MemoryCore`'s dict behind the store's one lock."""

    def issue_account_token(
        self,
        *,
        token_hash: str,
        grant_id: str,
        brand_id: str,
        client_id: str,
        scopes: Sequence[str],
        now: float,
        expires_at: float,
    ) -> None:
        """Store a new Account Token of the grant; see `AccountTokenStore`."""
        reject_nul(token_hash=token_hash, grant_id=grant_id, brand_id=brand_id, client_id=client_id)
        wanted = scope_tuple("scopes", scopes)
        with self._lock:
            self._check_open()
            grant = self._grants.get(grant_id)
            if grant is None:
                raise NotFound(f"unknown grant {grant_id!r}")
            check_token_owner(grant, client_id, brand_id)
            if not set(wanted) <= set(grant.scopes):
                raise ValueError("an Account Token's scopes must be its grant's")
            if token_hash in self._account_tokens:
                raise ValueError("Account Token hash is already stored")
            self._account_tokens[token_hash] = AccountToken(
                grant_id, brand_id, client_id, grant.pa_sub, wanted, now, expires_at
            )

    def rotate_account_token(
        self,
        *,
        token_hash: str,
        new_token_hash: str,
        brand_id: str,
        client_id: str,
        scopes: Sequence[str] | None,
        now: float,
        expires_at: float,
    ) -> AccountRotation:
        """Spend an Account Token and store its successor; see `AccountTokenStore`."""
        reject_nul(new_token_hash=new_token_hash)
        wanted = None if scopes is None else scope_tuple("scopes", scopes)
        with self._lock:
            self._check_open()
            token = self._account_tokens.get(token_hash)
            grant = None if token is None else self._grants.get(token.grant_id)
            kind = decide_account_rotation(
                token,
                grant_live=grant is not None and grant.is_live(now),
                brand_id=brand_id,
                client_id=client_id,
                scopes=wanted,
                now=now,
            )
            if kind != "rotated" or token is None or grant is None:
                return AccountRotation(kind)
            if new_token_hash in self._account_tokens:
                raise ValueError("new Account Token hash is already stored")
            granted = token.scopes if wanted is None else wanted
            self._account_tokens[token_hash] = evolve(token, used_at=now)
            self._account_tokens[new_token_hash] = evolve(
                token, scopes=granted, created_at=now, expires_at=expires_at, used_at=None
            )
            return AccountRotation("rotated", grant.grant_id, grant.account, grant.pa_sub, granted)

    def account_token(self, token_hash: str) -> AccountToken | None:
        """The Account Token with this hash, or None; see `AccountTokenStore`."""
        with self._lock:
            self._check_open()
            return self._account_tokens.get(token_hash)
