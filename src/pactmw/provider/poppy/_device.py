"""Device Sign-In (§4.6, RFC 8628): the device authorization endpoint, and the device_code
grant that signs the polling Session in with what the person approved on the Brand's
consent pages."""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from pactmw.core.dpop import DpopProof
from pactmw.core.http import Request
from pactmw.protocols.poppy import PoppyError, VerifiedAssertion, parse_scope
from pactmw.provider.delegated._audit import Audit
from pactmw.provider.delegated._codes import (
    new_grant_id,
    new_secret,
    secret_hash,
)
from pactmw.provider.delegated._device import new_device_authorization
from pactmw.provider.delegated._responses import NO_STORE, json_response
from pactmw.provider.flow import Flow, store
from pactmw.provider.poppy._bounds import within_rate
from pactmw.provider.poppy._brands import PoppyBrand
from pactmw.provider.poppy._client_auth import authenticate_client, read_form
from pactmw.provider.poppy._companies import DeviceSignIn
from pactmw.provider.poppy._credentials import (
    ACCOUNT_TOKEN_SECONDS,
    new_account_token,
    token_hash,
)
from pactmw.provider.poppy._grant_steps import GrantSteps, is_agents
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.store.base import DeviceAuthorization, Grant, Poll

#: Device authorization requests per agent per minute: each makes a code a person may be
#: shown, so an agent asking in a loop is stopped here, far above what its users need.
DEVICE_RATE_LIMIT = RateLimit(per_agent=300, window=60.0)

#: The device_code grant's answers before an approval is collected (RFC 8628 §3.5), and
#: its refusals, by `Poll.kind`.
_POLL_ERRORS: Mapping[str, tuple[str, str]] = {
    "unknown": ("invalid_grant", "not a device code of this agent"),
    "expired": ("expired_token", "the device code has expired"),
    "denied": ("access_denied", "the person denied the request"),
    "consumed": ("invalid_grant", "the device code was already used"),
    "slow_down": ("slow_down", "poll less often"),
    "pending": ("authorization_pending", "the person has not decided yet"),
    "account_mismatch": ("account_mismatch", "this Session was signed in to another account"),
}


@frozen
class DeviceSignInEndpoint:
    """The two halves of a Device Sign-In: the code the agent shows, and its poll."""

    steps: GrantSteps
    #: Device authorization requests per agent.
    limiter: RateLimiter
    #: Where a Device Sign-In's grant is announced (as PACT's consent approvals are).
    audit: Audit

    def authorize(self, brand: PoppyBrand, request: Request) -> Flow:
        """A device code and the consent link for the requested scopes (RFC 8628 §3.2).

        The agent authenticates with its client assertion only (no DPoP, no Session), so
        the authorization names no user: the poll that collects it binds the User ID of
        the polling Session. Scopes must be among `auth.device.scopes` (`invalid_scope`).
        """
        sign_in = brand.sign_in
        assert sign_in is not None
        form = yield from read_form(request)
        client = yield from authenticate_client(brand, form)
        what = "device authorization requests"
        yield from within_rate(self.limiter, client.client_id, "", self.steps.clock(), what)
        requested = parse_scope(form.get("scope"))
        if not requested or any(scope not in sign_in.delegation.scopes for scope in requested):
            raise PoppyError(400, "invalid_scope", "ask for scopes of auth.device.scopes")
        document = yield from new_device_authorization(
            self.steps.store,
            sign_in.consent_url,
            sign_in.delegation,
            device_code=new_secret("dc_"),
            brand_id=brand.brand_id,
            client_id=client.client_id,
            pa_sub=None,
            scopes=requested,
            now=self.steps.clock(),
        )
        if document is None:  # pragma: no cover - 5 collisions in 2.6e10 codes
            raise PoppyError(503, "temporarily_unavailable", "no free user code")
        return json_response(document, extra=NO_STORE)

    def grant(
        self,
        brand: PoppyBrand,
        sign_in: DeviceSignIn,
        client: VerifiedAssertion,
        device_code: str,
        session_id: str,
        proof: DpopProof,
    ) -> Flow:
        """The device_code grant: collect the person's approval for the polling Session.

        The Session must be this agent's (`invalid_session`); its User ID is the one the
        authorization binds, and its grant is written by the same store operation. A
        Session ever signed in to another account than the approver's is
        `account_mismatch` (PAP-4.8-04). The Session is signed in with exactly the scopes
        the person approved (PAP-4.4-02) and the first Account Token is issued.
        """
        steps = self.steps
        session = yield store(steps.store.get_session, session_id=session_id)
        if not is_agents(session, brand, client):
            raise PoppyError(400, "invalid_session", "not a Session of this agent")
        yield from steps.admit(client.client_id, session.user_id)
        yield from steps.spend(proof)
        now = steps.clock()
        poll: Poll = yield store(
            steps.store.poll_device_code,
            device_code_hash=secret_hash(device_code),
            client_id=client.client_id,
            brand_id=brand.brand_id,
            pa_sub=session.user_id,
            now=now,
            new_grant_id=new_grant_id(now),
            grant_expires_at=now + sign_in.delegation.grant_lifetime,
            session_account=session.ever_account,
        )
        if poll.kind in _POLL_ERRORS:
            error, detail = _POLL_ERRORS[poll.kind]
            raise PoppyError(400, error, detail)
        authorization: DeviceAuthorization | None = poll.authorization
        assert authorization is not None
        assert authorization.grant_id is not None
        assert authorization.account is not None
        grant: Grant | None = yield store(steps.store.get_grant, grant_id=authorization.grant_id)
        if grant is None or not grant.is_live(now):
            # Revoked between the approval and this poll: nothing is issued for it.
            raise PoppyError(400, "invalid_grant", "the sign-in was revoked")
        scopes = authorization.granted_scopes
        account_token = new_account_token()
        yield store(
            steps.store.issue_account_token,
            token_hash=token_hash(account_token),
            grant_id=grant.grant_id,
            brand_id=brand.brand_id,
            client_id=client.client_id,
            scopes=scopes,
            now=now,
            expires_at=now + ACCOUNT_TOKEN_SECONDS,
        )
        answer = yield from steps.signed_in(
            brand,
            client,
            proof,
            session_id=session_id,
            user_id=session.user_id,
            account=authorization.account,
            grant_id=grant.grant_id,
            scopes=scopes,
            account_token=account_token,
            now=now,
        )
        # The person approved on the consent page; the grant exists from this poll on.
        self.audit.grant("agent.delegation_approved", grant, scopes=scopes)
        return answer


__all__ = [
    "DEVICE_RATE_LIMIT",
    "DeviceSignInEndpoint",
]
