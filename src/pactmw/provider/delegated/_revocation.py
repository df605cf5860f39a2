"""Revoking grants on the Provider's own initiative (an operator, a disabled account)."""

from __future__ import annotations

from attrs import frozen

from pactmw.provider.delegated._context import ServerContext


@frozen
class Revocation:
    """Blocking revocations, outside any request flow; each revoked grant is audited."""

    ctx: ServerContext

    def revoke_grant(self, grant_id: str) -> bool:
        grant = self.ctx.store.get_grant(grant_id)
        revoked = bool(self.ctx.store.revoke_grant(grant_id, now=self.ctx.clock()))
        if revoked and grant is not None:
            self.ctx.audit.grant("agent.grant_revoked", grant, reason="revoked")
        return revoked

    def revoke_account(
        self, account: str, *, brand_id: str | None = None, reason: str = "revoked"
    ) -> list[str]:
        revoked = self.ctx.store.revoke_account_grants(
            account, now=self.ctx.clock(), brand_id=brand_id
        )
        for grant_id in revoked:
            grant = self.ctx.store.get_grant(grant_id)
            if grant is not None:
                self.ctx.audit.grant("agent.grant_revoked", grant, reason=reason)
        return list(revoked)


__all__ = [
    "Revocation",
]
