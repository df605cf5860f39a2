"""Spec §5.5: the delegation token (`X-A2A-User-Delegation`) on an agent's A2A request."""

from __future__ import annotations

from attrs import Factory, frozen

from pactmw.core.tokencache import VerifiedTokenCache, token_key
from pactmw.protocols.delegation import Delegation, DelegationRejected, verify_access_token
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.brand import Brand
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.flow import SubFlow, store
from pactmw.store import GrantUsageStore
from pactmw.store.base import Grant

#: "Last used" on the connected agents page is to the minute: one write per grant per minute.
USE_RECORD_INTERVAL = 60.0


def _token_cache() -> VerifiedTokenCache[Delegation]:
    return VerifiedTokenCache(max_age=3600)


@frozen
class DelegationCheck:
    """The resource server's side: a delegation token is valid and its grant still live."""

    ctx: ServerContext
    #: Verified delegation tokens (an agent reuses one for up to an hour): a hit skips the
    #: signature check only; client, expiry and the live grant are checked every time.
    token_cache: VerifiedTokenCache[Delegation] = Factory(_token_cache)
    #: Whether the store records grant use (checked once: a Protocol isinstance is not free).
    records_use: bool = Factory(
        lambda self: isinstance(self.ctx.store, GrantUsageStore), takes_self=True
    )

    def verify_delegation(self, brand: Brand, caller: PersonalAgent, header: str | None) -> SubFlow:
        if brand.delegation is None:
            raise DelegationRejected("not_offered", "this Brand offers no delegation")
        now = self.ctx.clock()
        key = token_key(f"{brand.id}\n{header}")
        entry = self.token_cache.get(key, now)
        if entry is None:
            delegation = verify_access_token(
                header,
                keys=self.ctx.keys.public,
                interface_url=self.ctx.interface(brand),
                client_id=caller.issuer,
                now=now,
            )
            self.token_cache.put(key, (delegation,), expires_at=delegation.claims["exp"], now=now)
        else:
            delegation = entry[1]
            if delegation.client_id != caller.issuer:
                # A cached token skips only its signature check: every other check runs again.
                raise DelegationRejected("wrong_client")
        grant: Grant | None = yield store(self.ctx.store.get_grant, grant_id=delegation.grant_id)
        if (
            grant is None
            or grant.revoked_at is not None
            or grant.expires_at <= self.ctx.clock()
            or grant.brand_id != brand.id
            or grant.client_id != caller.issuer
            or grant.account != delegation.account
            or grant.pa_sub != caller.sub
        ):
            raise DelegationRejected("grant_not_live", "the grant is revoked, expired or foreign")
        if self.records_use and (
            grant.last_used_at is None or now - grant.last_used_at >= USE_RECORD_INTERVAL
        ):
            usage: GrantUsageStore = self.ctx.store  # type: ignore[assignment]
            yield store(
                usage.record_grant_use,
                grant_id=grant.grant_id,
                now=now,
                every=USE_RECORD_INTERVAL,
            )
        return delegation


__all__ = [
    "USE_RECORD_INTERVAL",
    "DelegationCheck",
]
