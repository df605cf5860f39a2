"""The token endpoint (§4.2, §4.3, §4.8): jwt-bearer Session start and renewal, refresh_token
sign-in with an Account Token (rotated), and the device_code grant of a Device Sign-In.

The checks follow the SDK's order: the client assertion (`401 invalid_client`), the DPoP
proof for the endpoint's public URL (`400 invalid_dpop_proof`), then the grant; the proof is
spent in the store last, so a refused grant costs the agent nothing."""

from __future__ import annotations

from functools import partial

from attrs import frozen

from pactmw.core.dpop import DpopError, DpopProof, check_dpop_proof
from pactmw.core.http import Request
from pactmw.protocols.poppy import (
    DEVICE_CODE_GRANT,
    JWT_BEARER_GRANT,
    REFRESH_TOKEN_GRANT,
    PoppyError,
    VerifiedAssertion,
    dpop_refusal,
    parse_scope,
    parse_token_request,
)
from pactmw.provider.flow import Flow, NeedKeys, store
from pactmw.provider.poppy._brands import PoppyBrand
from pactmw.provider.poppy._client_auth import authenticate_client, read_form
from pactmw.provider.poppy._credentials import (
    ACCOUNT_TOKEN_SECONDS,
    new_account_token,
    new_session_id,
    new_session_token,
    token_hash,
)
from pactmw.provider.poppy._device import DeviceSignInEndpoint
from pactmw.provider.poppy._grant_steps import GrantSteps, is_agents, token_response
from pactmw.provider.ratelimit import RateLimit
from pactmw.store._protocols.sessions import decide_session_change

#: Token requests per (agent, User ID) per minute, as PACT's token endpoint allows.
TOKEN_RATE_LIMIT = RateLimit(per_user=120, window=60.0)


@frozen
class TokenEndpoint:
    """`POST {issuer}/token`: each grant type to the flow that owns it."""

    steps: GrantSteps
    #: The device_code grant is Device Sign-In's poll.
    device: DeviceSignInEndpoint

    def token(self, brand: PoppyBrand, request: Request) -> Flow:
        form = yield from read_form(request)
        client = yield from authenticate_client(brand, form)
        proofs = [value for name, value in request.headers if name == "dpop"]
        try:
            # The public URL of the endpoint, rebuilt from base_url (never from Host).
            proof = check_dpop_proof(
                proofs,
                method=request.method,
                url=brand.company.token_endpoint,
                now=self.steps.clock(),
                allowed_algs=frozenset(brand.company.dpop_signing_algs),
            )
        except DpopError as exc:
            raise dpop_refusal(exc, token_endpoint=True) from exc
        grant = parse_token_request(form)
        if grant.grant_type == JWT_BEARER_GRANT:
            assert grant.assertion is not None
            return (
                yield from self._session_grant(
                    brand, client, grant.assertion, grant.session_id, proof
                )
            )
        if grant.grant_type == DEVICE_CODE_GRANT and brand.sign_in is not None:
            assert grant.device_code is not None
            assert grant.session_id is not None
            return (
                yield from self.device.grant(
                    brand, brand.sign_in, client, grant.device_code, grant.session_id, proof
                )
            )
        if grant.grant_type == REFRESH_TOKEN_GRANT:
            assert grant.refresh_token is not None
            assert grant.session_id is not None
            return (
                yield from self._account_grant(
                    brand, client, grant.refresh_token, grant.session_id, grant.scope, proof
                )
            )
        raise PoppyError(400, "unsupported_grant_type", "not offered by this Company")

    def _session_grant(
        self,
        brand: PoppyBrand,
        client: VerifiedAssertion,
        assertion: str,
        session_id: str | None,
        proof: DpopProof,
    ) -> Flow:
        """Start a signed-out Session, or renew one (§4.2): a new Session Token bound to the
        proof's key; a renewed Session's old token stops working."""
        steps = self.steps
        verify = partial(brand.verifier.verify_session, assertion, client_id=client.client_id)
        session_assertion: VerifiedAssertion = yield NeedKeys(verify)
        yield from steps.admit(client.client_id, session_assertion.subject)
        yield from steps.spend(proof)
        token = new_session_token()
        now = steps.clock()
        expires_in = int(brand.config.session_seconds)
        values = {
            "brand_id": brand.brand_id,
            "client_id": client.client_id,
            "user_id": session_assertion.subject,
            "jkt": proof.thumbprint,
            "token_hash": token_hash(token),
            "now": now,
            "expires_at": now + expires_in,
        }
        if session_id is None:
            session_id = new_session_id()
            yield store(steps.store.create_session, session_id=session_id, **values)
            signed_in = False
        else:
            change = yield store(steps.store.renew_session, session_id=session_id, **values)
            if change.kind != "changed":
                raise PoppyError(400, "invalid_session", "not this agent's and user's Session")
            signed_in = change.session.signed_in
        return token_response(
            token, expires_in=expires_in, scopes=(), session_id=session_id, signed_in=signed_in
        )

    def _account_grant(
        self,
        brand: PoppyBrand,
        client: VerifiedAssertion,
        account_token: str,
        session_id: str,
        scope: str | None,
        proof: DpopProof,
    ) -> Flow:
        """Sign a Session in with an Account Token (§4.8), rotating it: the Session must be
        this agent's and this User ID's (PAP-4.8-03) and never signed in to another account
        (PAP-4.8-04), checked before the token is spent so a refusal costs the agent nothing;
        a narrower `scope` may be asked, never a wider one (PAP-4.4-02)."""
        steps = self.steps
        yield from steps.spend(proof)
        presented = token_hash(account_token)
        token = yield store(steps.store.account_token, token_hash=presented)
        if not is_agents(token, brand, client):
            # Unknown, or another agent's or Brand's (PAP-4.8-01/02): alike, never spent.
            raise PoppyError(400, "invalid_grant", "not an Account Token of this agent")
        yield from steps.admit(client.client_id, token.user_id)
        granted = yield store(steps.store.get_grant, grant_id=token.grant_id)
        session = yield store(steps.store.get_session, session_id=session_id)
        kind = decide_session_change(
            session,
            brand_id=brand.brand_id,
            client_id=client.client_id,
            user_id=token.user_id,
            account=None if granted is None else granted.account,
        )
        if kind != "changed":
            raise PoppyError(400, kind, "this Session cannot be signed in with this token")
        requested = parse_scope(scope) if scope is not None else None
        now = steps.clock()
        new_token = new_account_token()
        rotation = yield store(
            steps.store.rotate_account_token,
            token_hash=presented,
            new_token_hash=token_hash(new_token),
            brand_id=brand.brand_id,
            client_id=client.client_id,
            scopes=requested or None,
            now=now,
            expires_at=now + ACCOUNT_TOKEN_SECONDS,
        )
        if rotation.kind == "invalid_scope":
            raise PoppyError(400, "invalid_scope", "wider than the Account Token's scopes")
        if rotation.kind != "rotated":
            raise PoppyError(400, "invalid_grant", f"the Account Token is {rotation.kind}")
        return (
            yield from steps.signed_in(
                brand,
                client,
                proof,
                session_id=session_id,
                user_id=rotation.user_id,
                account=rotation.account,
                grant_id=rotation.grant_id,
                scopes=rotation.scopes,
                account_token=new_token,
                now=now,
            )
        )


__all__ = [
    "TOKEN_RATE_LIMIT",
    "TokenEndpoint",
]
