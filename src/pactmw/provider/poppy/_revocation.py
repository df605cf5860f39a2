"""Sign-out (§4.9): the revocation endpoint, and the operator's revocations of a Provider
whose Brands offer no PACT delegation (with one, its authorization server revokes)."""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from pactmw.core.http import Request
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.delegated._responses import NO_STORE, json_response
from pactmw.provider.flow import Flow, store
from pactmw.provider.poppy._brands import PoppyBrand
from pactmw.provider.poppy._client_auth import authenticate_client, read_form
from pactmw.provider.poppy._credentials import token_hash
from pactmw.provider.poppy._grant_steps import is_agents
from pactmw.store.base import Store


@frozen
class PoppyRevocation:
    """Ends sign-ins: a grant revoked, every Session signed in through it signed out."""

    store: Store
    clock: Callable[[], float]

    def endpoint(self, brand: PoppyBrand, request: Request) -> Flow:
        """`POST {issuer}/revoke`: revoking an Account Token ends its sign-in (its grant:
        every token of it, before or after rotation) and signs out every Session signed in
        with it; those Sessions go on signed out (§4.9). Any other token, or another agent's,
        is answered alike (RFC 7009 §2.2: no oracle). A blocked agent may still revoke its
        own: that only removes access (`agent_refusal`)."""
        form = yield from read_form(request)
        client = yield from authenticate_client(brand, form, revoking=True)
        presented = form.get("token")
        if not presented:
            raise PoppyError(400, "invalid_request", "token is required")
        token = yield store(self.store.account_token, token_hash=token_hash(presented))
        if is_agents(token, brand, client):
            now = self.clock()
            yield store(self.store.revoke_grant, grant_id=token.grant_id, now=now)
            yield store(self.store.sign_out_sessions, grant_id=token.grant_id, now=now)
        return json_response({}, extra=NO_STORE)

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke a grant and sign out its Sessions (blocking); True if it was live."""
        now = self.clock()
        revoked = bool(self.store.revoke_grant(grant_id, now=now))
        if revoked:
            self.store.sign_out_sessions(grant_id=grant_id, now=now)
        return revoked

    def revoke_account(self, account: str, *, brand_id: str | None = None) -> list[str]:
        """Revoke every live grant of an account and sign out their Sessions (blocking)."""
        now = self.clock()
        revoked = self.store.revoke_account_grants(account, now=now, brand_id=brand_id)
        for grant_id in revoked:
            self.store.sign_out_sessions(grant_id=grant_id, now=now)
        return list(revoked)


__all__ = [
    "PoppyRevocation",
]
