"""Revoking grants on the Provider's own initiative (an operator, a disabled account)."""

from __future__ import annotations

from attrs import frozen

from pactmw.provider.delegated._context import ServerContext


@frozen
class Revocation:
    """Blocking revocations, outside any request flow; each revoked grant is audited."""

    ctx: ServerContext

    def revoke_grant(self, grant_id: str, *, reason: str = "revoked") -> bool:
        """Revoke one grant: its tokens fail on their next request, its Poppy Sessions go on
        signed out, and the revocation is audited with `reason`. The one way every path
        (the operator, the admin, the person's connected agents page) revokes a grant."""
        grant = self.ctx.store.get_grant(grant_id)
        now = self.ctx.clock()
        revoked = bool(self.ctx.store.revoke_grant(grant_id, now=now))
        if revoked and grant is not None:
            # A Poppy grant's Sessions go on signed out (§4.9, GUIDE-co-account-01); a PACT
            # grant has none.
            self.ctx.store.sign_out_sessions(grant_id=grant_id, now=now)
            self.ctx.audit.grant("agent.grant_revoked", grant, reason=reason)
        return revoked

    def revoke_account(
        self, account: str, *, brand_id: str | None = None, reason: str = "revoked"
    ) -> list[str]:
        now = self.ctx.clock()
        revoked = self.ctx.store.revoke_account_grants(account, now=now, brand_id=brand_id)
        for grant_id in revoked:
            self.ctx.store.sign_out_sessions(grant_id=grant_id, now=now)
            grant = self.ctx.store.get_grant(grant_id)
            if grant is not None:
                self.ctx.audit.grant("agent.grant_revoked", grant, reason=reason)
        return list(revoked)


__all__ = [
    "Revocation",
]
