"""The delegation token (`X-A2A-User-Delegation`) sent with a verified identity, checked the
same way wherever it is sent: the Provider's own routes, the guard on the app's own routes,
and `Provider.verify_delegation` on a custom endpoint."""

from __future__ import annotations

from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import PersonalAgent, log_refusal
from pactmw.provider.brand import Brand
from pactmw.provider.delegated import AuthorizationServer
from pactmw.provider.flow import SubFlow

__all__ = [
    "checked_delegation",
]


def checked_delegation(
    oauth: AuthorizationServer | None,
    brand: Brand | None,
    caller: PersonalAgent,
    header: str | None,
    *,
    brand_id: str | None,
) -> SubFlow:
    """Verify the delegation `header` that the verified `caller` sent to `brand` (the flow's
    value is a `Delegation`); `oauth` or `brand` None: none is offered there (`not_offered`).

    A refusal (`DelegationRejected`, 401 `invalid_token`) is logged before it is raised, with
    its reason, the caller's issuer and `brand_id` (None: no Brand was named), never the
    token: the identity passed, so the verifier logged nothing, and the log is all that
    tells an operator why an agent with a good identity is refused.
    """
    try:
        if oauth is None or brand is None:
            raise DelegationRejected("not_offered", "this Brand offers no delegation")
        return (yield from oauth.verify_delegation(brand, caller, header))
    except DelegationRejected as refused:
        # Verified with the identity, unlike the issuer an identity refusal logs.
        refused.issuer = caller.issuer
        log_refusal(refused, brand_id)
        raise
