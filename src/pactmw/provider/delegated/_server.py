"""`AuthorizationServer`: the one face of the Delegated profile that the Provider talks to.

Each concern is a collaborator of its own module sharing one `ServerContext`; this class
builds them and hands every call to the one that owns it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pactmw.core.http import Request, Response
from pactmw.core.keys import JwksCache
from pactmw.core.tokencache import VerifiedTokenCache
from pactmw.protocols.delegation import Delegation, SigningKeys
from pactmw.protocols.identity import PersonalAgent
from pactmw.provider.brand import Brand, DelegationConfig
from pactmw.provider.delegated._agents_page import ConnectedAgentsEndpoint
from pactmw.provider.delegated._assertion import BrandAssertions
from pactmw.provider.delegated._audit import Audit, AuditHook
from pactmw.provider.delegated._consent import ConsentEndpoint
from pactmw.provider.delegated._context import ServerContext
from pactmw.provider.delegated._device import DeviceEndpoint
from pactmw.provider.delegated._granted import DelegationGrant
from pactmw.provider.delegated._metadata import Metadata
from pactmw.provider.delegated._page_limit import PageRateLimit
from pactmw.provider.delegated._resource import DelegationCheck
from pactmw.provider.delegated._result_page import ResultPage
from pactmw.provider.delegated._revocation import Revocation
from pactmw.provider.delegated._sessions import (
    ConsentOutcomes,
    ConsentSessions,
    PageVisit,
    SignedInUser,
)
from pactmw.provider.delegated._step_up import StepUp
from pactmw.provider.delegated._token import TokenEndpoint
from pactmw.provider.flow import Flow, SubFlow, store
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.store import RateLimitStore
from pactmw.store.base import DeviceAuthorization, Store

#: Default limits of the device authorization and token endpoints, per (agent, sub) and
#: minute: far above what one agent user's flows need (a poll every 5 s is 12 a minute per
#: code), far below a loop.
DEVICE_RATE_LIMIT = RateLimit(per_user=30, window=60.0)
TOKEN_RATE_LIMIT = RateLimit(per_user=120, window=60.0)


class AuthorizationServer:
    """The Delegated profile for every Brand of a Provider that configures `delegation`.

    `agent_name(issuer)` gives the display name of a registered personal agent (for the
    consent pages, which show its id where it gives "").
    """

    def __init__(
        self,
        *,
        base_url: str,
        store: Store,
        keys: SigningKeys,
        clock: Callable[[], float],
        agent_name: Callable[[str], str],
        brand_keys: JwksCache | None = None,
        consent_rate_limit: RateLimit | None = None,
        device_rate_limit: RateLimit | None = None,
        token_rate_limit: RateLimit | None = None,
        rate_counters: RateLimitStore | None = None,
        audit: AuditHook | None = None,
    ) -> None:
        self._ctx = ServerContext(
            base_url=base_url.rstrip("/"), store=store, keys=keys, clock=clock, audit=Audit(audit)
        )
        self._metadata = Metadata(self._ctx)
        # `rate_counters`: the store every limiter counts in (shared by all processes on it),
        # or None to count in this process.
        self._device = DeviceEndpoint(
            self._ctx,
            limiter=RateLimiter(
                device_rate_limit or DEVICE_RATE_LIMIT, store=rate_counters, namespace="device"
            ),
        )
        self._token = TokenEndpoint(
            self._ctx,
            limiter=RateLimiter(
                token_rate_limit or TOKEN_RATE_LIMIT, store=rate_counters, namespace="token"
            ),
        )
        self._resource = DelegationCheck(self._ctx)
        self._step_up = StepUp(self._device)
        outcomes = ConsentOutcomes(self._ctx)

        def shown_name(issuer: str) -> str:
            # What every page calls an agent: the app's name for it, else its id (an
            # `agent_name` may know no name), decided here once for all of them.
            return agent_name(issuer) or issuer

        self._consent = ConsentEndpoint(
            self._ctx,
            agent_name=shown_name,
            limit=PageRateLimit(
                RateLimiter(
                    consent_rate_limit or RateLimit(per_agent=30, window=60.0),
                    store=rate_counters,
                    namespace="consent",
                    key_name=None,  # a client address: kept out of the log
                ),
                clock,
            ),
            sessions=ConsentSessions(self._ctx),
            assertions=BrandAssertions(self._ctx, brand_keys or JwksCache()),
            outcomes=outcomes,
            manage_url=self._manage_url,
        )
        self._result = ResultPage(
            self._ctx, agent_name=shown_name, outcomes=outcomes, manage_url=self._manage_url
        )
        self._revocation = Revocation(self._ctx)
        self._agents = ConnectedAgentsEndpoint(
            self._ctx,
            agent_name=shown_name,
            limit=self._consent.limit,
            assertions=self._consent.assertions,
            revocation=self._revocation,
        )

    def _manage_url(self, brand: Brand) -> str | None:
        """The connected agents page the consent pages link to."""
        return self._ctx.url(brand, "agents")

    # -- what the collaborators share --------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._ctx.base_url

    @property
    def store(self) -> Store:
        return self._ctx.store

    @property
    def audit(self) -> Audit:
        """Where grant events are published (the log, then the Provider's hook)."""
        return self._ctx.audit

    @property
    def keys(self) -> SigningKeys:
        """The keys that sign delegation tokens, consent sessions and receipts."""
        return self._ctx.keys

    @property
    def brand_keys(self) -> JwksCache:
        """The cache of the Brands' login keys (`brand_jwks_uri`, brand mode)."""
        return self._consent.assertions.brand_keys

    @brand_keys.setter
    def brand_keys(self, value: JwksCache) -> None:
        self._consent.assertions.brand_keys = value

    @property
    def consent_limiter(self) -> RateLimiter:
        """Requests of the person-facing pages (consent and connected agents) per client
        address."""
        return self._consent.limit.limiter

    @property
    def token_cache(self) -> VerifiedTokenCache[Delegation]:
        """Verified delegation tokens: a hit skips the signature check only."""
        return self._resource.token_cache

    # -- URLs and documents ------------------------------------------------------------------

    def interface(self, brand: Brand) -> str:
        return self._ctx.interface(brand)

    def url(self, brand: Brand, path: str) -> str:
        """An absolute URL under the Brand's authorization server (`{interface}/oauth/...`)."""
        return self._ctx.url(brand, path)

    def card_scheme(self, brand: Brand, config: DelegationConfig) -> dict[str, Any]:
        """The card's `userDelegation` security scheme (spec §5.1)."""
        return self._metadata.card_scheme(brand, config)

    def metadata(self, brand: Brand, config: DelegationConfig) -> Response:
        """RFC 8414 metadata (pact-provider.md §5.4)."""
        return self._metadata.metadata(brand, config)

    def jwks(self) -> Response:
        """The keys that sign delegation tokens and receipts."""
        return self._metadata.jwks()

    # -- RFC 8628 endpoints (the personal agent, authenticated by its PACT JWT) ---------------

    def device_authorization(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, body: bytes
    ) -> Flow:
        """RFC 8628 §3.1: a device code and the consent link for the requested scopes."""
        return self._device.device_authorization(brand, config, caller, body)

    def token(
        self, brand: Brand, config: DelegationConfig, caller: PersonalAgent, body: bytes
    ) -> Flow:
        """The token endpoint: the device code grant (RFC 8628 §3.4) or a refresh rotation."""
        return self._token.token(brand, config, caller, body)

    # -- delegation tokens on agent requests (spec §5.5) --------------------------------------

    def verify_delegation(self, brand: Brand, caller: PersonalAgent, header: str | None) -> SubFlow:
        """Check `X-A2A-User-Delegation` after the PACT JWT; the flow's value is a `Delegation`.

        Raises `DelegationRejected` (401, `error="invalid_token"`) for any failure, including a
        revoked or expired grant and a token presented by another user of the same agent.
        """
        return self._resource.verify_delegation(brand, caller, header)

    def step_up(
        self,
        brand: Brand,
        caller: PersonalAgent,
        context_id: str,
        missing: tuple[str, ...],
        message: str,
    ) -> Flow:
        """The `TASK_STATE_AUTH_REQUIRED` task of spec §5.5 with a fresh consent link."""
        return self._step_up.step_up(brand, caller, context_id, missing, message)

    # -- consent (a person in a browser) ------------------------------------------------------

    def consent(
        self,
        brand: Brand,
        config: DelegationConfig,
        request: Request,
        user: SignedInUser | None,
        body: bytes | None,
    ) -> Flow:
        """GET: code entry or consent (same-app), or off to the Brand's login (brand mode).
        POST (brand mode): the Brand's single-use assertion, then the consent page."""
        return self._consent.consent(PageVisit(brand, config, request, user), body)

    def decision(
        self,
        brand: Brand,
        config: DelegationConfig,
        request: Request,
        user: SignedInUser | None,
        body: bytes,
    ) -> Flow:
        """Allow or Deny; answers 303 to the result page (`status=approved|denied`)."""
        return self._consent.decision(PageVisit(brand, config, request, user), body)

    def result(self, brand: Brand, config: DelegationConfig, request: Request) -> Flow:
        """The page after the decision: what was decided and what the agent can do now."""
        return self._result.result(brand, config, request)

    def connected_agents(
        self,
        brand: Brand,
        config: DelegationConfig,
        request: Request,
        user: SignedInUser | None,
        body: bytes | None,
    ) -> Flow:
        """The person's connected agents page (`{interface}/oauth/agents`): GET shows it (or
        sends the person to sign in); POST takes the Brand's assertion or a Revoke."""
        return self._agents.agents(PageVisit(brand, config, request, user), body)

    # -- a grant without the browser (an app's own tests) ------------------------------------

    def grant(
        self,
        brand: Brand,
        config: DelegationConfig,
        agent: PersonalAgent,
        user: SignedInUser,
        scopes: tuple[str, ...],
    ) -> SubFlow:
        """`user` allows `scopes` (offered by `config`, checked by the caller) to `agent`'s
        user, without a browser; the value is a `DelegationGrant`.

        The device flow itself, past its rate limits: a device authorization, the consent
        page's approval, the token endpoint's poll. So the grant, its audit line and the
        tokens are those of a person's approval, and a change to any of them holds here too.
        """
        document = yield from self._device.authorize(brand, config, agent, scopes)
        authorization: DeviceAuthorization | None = yield store(
            self._ctx.store.device_authorization_by_user_code, user_code=document["user_code"]
        )
        assert authorization is not None  # just made, and a code lives for minutes
        yield from self._consent.approve(brand, config, authorization, user, scopes)
        response = yield from self._token.device_code_grant(
            brand, config, agent, document["device_code"]
        )
        consumed: DeviceAuthorization | None = yield store(
            self._ctx.store.device_authorization_by_user_code, user_code=document["user_code"]
        )
        # The poll above answered tokens: the code is consumed and names its grant.
        assert consumed is not None
        assert consumed.grant_id is not None
        tokens = json.loads(response.body)
        return DelegationGrant(
            grant_id=consumed.grant_id,
            scopes=tuple(tokens["scope"].split()),
            access_token=tokens["access_token"],
            refresh_token=tokens["refresh_token"],
            expires_in=tokens["expires_in"],
        )

    # -- revocation ---------------------------------------------------------------------------

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke one grant now: its tokens fail on their next use (blocking)."""
        return self._revocation.revoke_grant(grant_id)

    def revoke_account(
        self, account: str, *, brand_id: str | None = None, reason: str = "revoked"
    ) -> list[str]:
        """Revoke every grant of an account (for example when it is disabled)."""
        return self._revocation.revoke_account(account, brand_id=brand_id, reason=reason)


__all__ = [
    "DEVICE_RATE_LIMIT",
    "TOKEN_RATE_LIMIT",
    "AuthorizationServer",
]
