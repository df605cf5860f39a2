"""Poppy Account Tokens of the memory store (the contract, with its input checks:
store/_protocols/account_tokens.py)."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._memory.core import MemoryCore
from pactmw.store._protocols.account_tokens import (
    AccountRefresh,
    AccountRotation,
    AccountToken,
    decide_account_rotation,
)

__all__ = ["AccountTokensMixin"]


class AccountTokensMixin(MemoryCore):
    """The Account Token primitives, on `MemoryCore`'s dict behind the store's one lock."""

    def _insert_account_token(self, token_hash: str, token: AccountToken) -> bool:
        with self._open:
            if token_hash in self._account_tokens:
                return False
            self._account_tokens[token_hash] = token
            return True

    def _rotate_account_token(self, refresh: AccountRefresh) -> AccountRotation:
        now, wanted = refresh.now, refresh.scopes
        with self._open:
            token = self._account_tokens.get(refresh.token_hash)
            grant = None if token is None else self._grants.get(token.grant_id)
            kind = decide_account_rotation(
                token, grant_live=grant is not None and grant.is_live(now), refresh=refresh
            )
            if kind != "rotated" or token is None or grant is None:
                return AccountRotation(kind)
            if refresh.new_token_hash in self._account_tokens:
                raise ValueError("new Account Token hash is already stored")
            granted = token.scopes if wanted is None else wanted
            self._account_tokens[refresh.token_hash] = evolve(token, used_at=now)
            self._account_tokens[refresh.new_token_hash] = evolve(
                token, scopes=granted, created_at=now, expires_at=refresh.expires_at, used_at=None
            )
            return AccountRotation("rotated", grant.grant_id, grant.account, grant.pa_sub, granted)

    def _account_token(self, token_hash: str) -> AccountToken | None:
        with self._open:
            return self._account_tokens.get(token_hash)
