"""The framework-neutral PACT Provider: one implementation that every adapter renders.

Processing order (pact-provider.md §2.1): route match (404, no body, before any
authentication), the Agent Card (no authentication), the personal-agent JWT (401), the Brand
lookup (404), rate limits (429), then the operation.

Like the identity verifier, the request flow is a generator that yields what it needs done
(verify a token, read the body, call the store, run the bot) and receives the results; the
sync driver does those things directly, the async driver awaits them (blocking store calls
and sync bots run in worker threads). So there is one flow, not a sync and an async copy.

The request flow itself is `_request_flow.RequestFlow`'s; what host apps call besides
(revocation, Poppy Sessions and proposals, delegation checks) is `_app_calls.AppCalls`'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from pactmw.config import ConfigError, check_base_url, require_verifier
from pactmw.core.fetch import FetchPolicy
from pactmw.core.http import Request, Response
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider._app_calls import AppCalls
from pactmw.provider._assembly import (
    agent_name,
    brand_card,
    built_from_settings,
    offers_delegation,
    poppy_server,
)
from pactmw.provider._request_flow import RequestFlow
from pactmw.provider._send import MessageSender
from pactmw.provider.brand import Brand
from pactmw.provider.card import DEFAULT_IDENTITY_SCHEME, card_response
from pactmw.provider.delegated import (
    AuditHook,
    AuthorizationServer,
    DelegationGrant,
)
from pactmw.provider.driver import (
    ACurrentUser,
    AReadBody,
    CurrentUser,
    ReadBody,
    arun,
    run,
)
from pactmw.provider.flow import SubFlow
from pactmw.provider.parafe import ParafeAgent
from pactmw.provider.poppy import JsonAnswer, PoppyCaller, PoppyServer, Proposal
from pactmw.provider.ratelimit import RateLimit, RateLimiter, counting_store
from pactmw.provider.routes import MOUNT, Routes, for_method
from pactmw.provider.settings import ProviderSettings
from pactmw.store.base import Store

logger = logging.getLogger("pactmw.provider")


class Provider:
    """Serves PACT 1.0 (Identity profile) for a set of Brands over A2A HTTP+JSON.

    Thread-safe; create one per process and share it. `clock` is wall-clock epoch seconds.
    """

    def __init__(
        self,
        *,
        base_url: str,
        verifier: IdentityVerifier,
        store: Store,
        brands: Iterable[Brand],
        identity_scheme: str = DEFAULT_IDENTITY_SCHEME,
        organization: str = "",
        rate_limit: RateLimit | None = None,
        max_body_bytes: int = 1024 * 1024,
        conversation_idle_timeout: float | None = None,
        claim_lease_seconds: float = 120.0,
        turn_timeout: float | None = None,
        signing_keys: SigningKeys | None = None,
        audit: AuditHook | None = None,
        consent_rate_limit: RateLimit | None = None,
        device_rate_limit: RateLimit | None = None,
        token_rate_limit: RateLimit | None = None,
        shared_rate_limits: bool | None = None,
        retention_days: float | None = None,
        poppy_fetch_policy: FetchPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = check_base_url(base_url)
        #: Days conversations are kept after their last activity by `pactmw cleanup`
        #: (`pactmw.provider.agent_admin.run_cleanup`); None keeps them.
        self.retention_days = retention_days
        self.verifier = require_verifier(verifier)
        if isinstance(store, str):
            raise ConfigError(
                "store must be a Store (pactmw.store.open_store(url) opens one), not a str"
            )
        self.store = store
        self.brands = _by_id(brands)
        self.identity_scheme = identity_scheme
        self.organization = organization
        # Where every limiter counts: in the store when it is shared by the deployment's
        # processes (PostgreSQL by default), so N workers allow each limit once; else here.
        rate_counters = counting_store(store, shared_rate_limits, "shared_rate_limits")
        self.rate_limiter = RateLimiter(rate_limit or RateLimit(), store=rate_counters)
        self.max_body_bytes = max_body_bytes
        self._clock = clock
        #: The Delegated profile's authorization server, when any Brand offers delegation.
        self.oauth: AuthorizationServer | None = None
        if offers_delegation(self.brands, store, signing_keys):
            assert signing_keys is not None
            self.oauth = AuthorizationServer(
                base_url=self.base_url,
                store=store,
                keys=signing_keys,
                clock=clock,
                agent_name=self._agent_name,
                brand_keys=JwksCache(verifier.keys.fetch_policy),
                consent_rate_limit=consent_rate_limit,
                device_rate_limit=device_rate_limit,
                token_rate_limit=token_rate_limit,
                rate_counters=rate_counters,
                audit=audit,
            )
        self._sender = MessageSender(
            store=store,
            clock=clock,
            claim_lease_seconds=claim_lease_seconds,
            conversation_idle_timeout=conversation_idle_timeout,
            oauth=self.oauth,
            turn_timeout=turn_timeout,
        )
        #: The Parafé runtime of each Brand that configures Parafé (proof replay in the store).
        self.parafe: dict[str, ParafeAgent] = {
            brand.id: ParafeAgent(brand.parafe, store=store, clock=clock)
            for brand in self.brands.values()
            if brand.parafe is not None
        }
        #: The Poppy company side, when any Brand enables Poppy. Agents' client metadata and
        #: keys are fetched under `poppy_fetch_policy` (default: the PACT verifier's).
        self.poppy: PoppyServer | None = poppy_server(
            self.brands,
            base_url=self.base_url,
            store=store,
            oauth=self.oauth,
            fetch_policy=poppy_fetch_policy or verifier.keys.fetch_policy,
            clock=clock,
            token_rate_limit=token_rate_limit,
            rate_counters=rate_counters,
            audit=audit,
            turns=self._sender,
            blocks=verifier.registry.overrides,
        )
        self._calls = AppCalls(
            brands=self.brands, verifier=verifier, oauth=self.oauth, poppy=self.poppy
        )
        self._requests = RequestFlow(
            brands=self.brands,
            routes=Routes(self.brands),
            # Cards are static per Brand: render them once.
            cards={brand.id: card_response(self.card(brand.id)) for brand in self.brands.values()},
            oauth=self.oauth,
            poppy=self.poppy,
            parafe=self.parafe,
            rate_limiter=self.rate_limiter,
            sender=self._sender,
            max_body_bytes=max_body_bytes,
            clock=clock,
        )

    @classmethod
    def from_settings(
        cls,
        settings: ProviderSettings,
        *,
        store: Store | None = None,
        clock: Callable[[], float] | None = None,
        signing_keys: SigningKeys | None = None,
        audit: AuditHook | None = None,
    ) -> Provider:
        """Build from settings; opens `settings.store` unless a store is given.

        Personal agents added at runtime, and the runtime enable/disable of every agent, are
        read from the store on each request. `signing_keys` overrides the configured ones (a
        tool that only revokes grants needs no private key); `audit` receives the delegation
        audit events.
        """
        return built_from_settings(
            cls, settings, store=store, clock=clock, signing_keys=signing_keys, audit=audit
        )

    def card(self, brand_id: str) -> dict[str, Any]:
        """The Agent Card of a Brand (KeyError for an unknown Brand); with delegation, it
        declares the `userDelegation` scheme too (spec §5.1)."""
        return brand_card(
            self.brands[brand_id],
            base_url=self.base_url,
            identity_scheme=self.identity_scheme,
            organization=self.organization,
            oauth=self.oauth,
        )

    def _agent_name(self, issuer: str) -> str:
        # Read when a page is shown: `self.poppy` is built after the authorization server.
        return agent_name(self.verifier, self.poppy, issuer)

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke one grant now: its tokens fail on their next request, and the Poppy
        Sessions signed in through it go on signed out."""
        return self._calls.revoke_grant(grant_id)

    def revoke_account(self, account: str, *, brand_id: str | None = None) -> list[str]:
        """Revoke every grant of a Brand account: call it when the account is disabled."""
        return self._calls.revoke_account(account, brand_id)

    def grant_delegation(
        self,
        brand_id: str,
        *,
        account: str,
        agent_issuer: str,
        agent_sub: str,
        scopes: Iterable[str],
    ) -> DelegationGrant:
        """For an app's own tests: the person `account` allows `scopes` of Brand `brand_id`
        to the user `agent_sub` of the personal agent `agent_issuer`, without a browser.

        Records the grant the consent page records (widening a live one, audited as
        `agent.delegation_approved`) and returns it with the token endpoint's tokens:
        `DelegationGrant.header` is the `X-A2A-User-Delegation` value to send beside that
        agent user's PACT JWT. `revoke_grant(grant_id)` revokes it. Raises ValueError
        naming the argument (an unknown Brand, one without delegation, a scope it does not
        offer, an empty account, an agent the verifier does not know or has disabled).
        """
        return self._calls.grant_delegation(
            brand_id,
            account=account,
            agent_issuer=agent_issuer,
            agent_sub=agent_sub,
            scopes=scopes,
        )

    def matches(self, method: str, path: str) -> bool:
        """Tell whether the Provider serves this path: anything under `/a2a/`, and with Poppy
        `/.well-known/poppy.json` and the issuers' RFC 8414 metadata."""
        return path.startswith(MOUNT) or (self.poppy is not None and self.poppy.matches(path))

    def poppy_discovery(self, brand_id: str, host: str | None, method: str = "GET") -> Response:
        """What a Brand's own site answers at `/.well-known/poppy.json` (Poppy §3): the
        document itself, never a redirect (PAP-3.1-02), for `host` (the request's `Host`)
        when it is one of the Brand's `poppy.domains`; else a Poppy `404 not_found`. To a
        HEAD `method`, the same without the body; to OPTIONS, 204 with `Allow` and the CORS
        preflight's answer, as the Provider's own public documents; to any other method, a
        405 with `Allow`, as a framework's own GET route answers. A `ConfigError` naming the
        Brands with Poppy when `brand_id` is not one of them."""
        return self._calls.poppy_discovery(brand_id, host, method)

    def poppy_session(
        self, brand_id: str, request: Request, scopes: tuple[str, ...] = ()
    ) -> PoppyCaller:
        """For the app's own APIs: the caller of a request carrying a Poppy Session Token
        (`Authorization: DPoP` and a `DPoP` proof), signed in with `scopes` when any are
        named; raises `PoppyError` (render it with `error_response`). Blocking."""
        return self._calls.poppy_session(brand_id, request, scopes)

    async def apoppy_session(
        self, brand_id: str, request: Request, scopes: tuple[str, ...] = ()
    ) -> PoppyCaller:
        """Async `poppy_session`: store calls run in a worker thread."""
        return await self._calls.apoppy_session(brand_id, request, scopes)

    def poppy_propose(self, caller: PoppyCaller, proposal: Proposal) -> JsonAnswer:
        """For the app's own APIs: propose `proposal` (Poppy Operations v1) for the caller
        `poppy_session_required` checked, instead of performing it; return the answer
        (`202 {"operation"}`, or `403 extension_required`) as a `JsonAnswer`. Blocking;
        ValueError when the Brand sets no `poppy.operations` executor for the action."""
        return self._calls.poppy_propose(caller, proposal)

    async def apoppy_propose(self, caller: PoppyCaller, proposal: Proposal) -> JsonAnswer:
        """Async `poppy_propose`: store calls run in a worker thread."""
        return await self._calls.apoppy_propose(caller, proposal)

    def parafe_agent(self, brand_id: str) -> ParafeAgent:
        """The Parafé runtime of a Brand (KeyError when it has no `parafe` configuration);
        what `@parafe_action` uses on an app's own endpoints."""
        return self.parafe[brand_id]

    def close(self) -> None:
        for agent in self.parafe.values():
            agent.close()
        self.store.close()

    # -- the two drivers -----------------------------------------------------------------

    def handle(
        self, request: Request, read_body: ReadBody, current_user: CurrentUser | None = None
    ) -> Response:
        """Answer one request (blocking).

        `read_body(limit)` returns the body, or None when it is longer than `limit` bytes; it
        is called only after authentication. `current_user()` tells who is signed in to the
        host app (same-app consent pages only; None when nobody is).
        """
        try:
            response: Response = run(
                self._requests.flow(request), self.verifier, read_body, current_user
            )
        except Exception as exc:
            response = self._requests.error(request, exc)
        return for_method(request.method, response)

    async def ahandle(
        self,
        request: Request,
        read_body: AReadBody,
        current_user: CurrentUser | ACurrentUser | None = None,
    ) -> Response:
        """Async `handle`: store calls, key fetches and sync bots run in worker threads."""
        try:
            response: Response = await arun(
                self._requests.flow(request),
                self.verifier,
                read_body,
                current_user,
                threads=self.verifier.threads,
                # The Provider's flow never catches the caller's refusal: the store read of a
                # cached agent's switch joins the request's one hop (see arun).
                defer_identity=True,
            )
        except Exception as exc:
            response = self._requests.error(request, exc)
        return for_method(request.method, response)

    def verify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        """For custom endpoints: check an `X-A2A-User-Delegation` header value for a Brand.

        Returns the caller with its `delegation`; raises `DelegationRejected` (401,
        `error="invalid_token"`). The Provider's own routes do this themselves.
        """
        return self._calls.verify_delegation(brand_id, caller, header)

    async def averify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        """Async `verify_delegation`."""
        return await self._calls.averify_delegation(brand_id, caller, header)

    def delegation_flow(self, brand_id: str, caller: PersonalAgent, header: str | None) -> SubFlow:
        """The delegation check as a flow (the guard runs it after the identity check)."""
        return self._calls.delegation_flow(brand_id, caller, header)


def signed_in_user_unknown(
    brands: Iterable[Brand],
    missing: str,
    *,
    remedy: str | None = None,
    reason: str | None = None,
) -> str | None:
    """What to report at startup when the app gives the consent pages no way to know who is
    signed in (`missing` names the setting that would; `remedy`, default "Set {missing}",
    says what to do where the host app can set it no other way; `reason`, default "{missing}
    is not set", says why where no setting is missing): None when no Brand's pages ask.

    A same-app Brand's pages ask the host app (`delegation.login = "same-app"`, the default);
    told "nobody", they send the person to `login_url` and back, for ever, and say nothing.
    Each adapter knows whether it has a way (a `current_user`, Flask-Login, Django's
    `request.user`); the rule and its words are here, once."""
    same_app = [
        b.id for b in brands if b.delegation is not None and b.delegation.mode == "same-app"
    ]
    if not same_app:
        return None
    logins = ", ".join(f"brands.{brand_id}.delegation.login" for brand_id in same_app)
    verb = "is" if len(same_app) == 1 else "are"
    return (
        f'{logins} {verb} "same-app" (the default), but {reason or missing + " is not set"}: the '
        "consent pages cannot tell who is signed in, so every person is sent to login_url and "
        "back. "
        f'{remedy or "Set " + missing}, or login = "brand" (the Brand\'s own login signs the '
        "person in)"
    )


def warn_if_signed_in_user_unknown(
    provider: Provider, missing: str, *, remedy: str | None = None, reason: str | None = None
) -> None:
    """Log `signed_in_user_unknown` at WARNING on `pactmw.provider`, when there is one: the
    Provider still serves agents, cards and grants, only its consent pages cannot work."""
    problem = signed_in_user_unknown(
        provider.brands.values(), missing, remedy=remedy, reason=reason
    )
    if problem is not None:
        logger.warning("%s", problem)


def _by_id(brands: Iterable[Brand]) -> dict[str, Brand]:
    """The Brands by id; each given once, each a `Brand`."""
    by_id: dict[str, Brand] = {}
    for brand in brands:
        if not isinstance(brand, Brand):
            raise ConfigError(f"brands must be Brand values, not {type(brand).__name__}")
        if brand.id in by_id:
            raise ConfigError(f"brands: each id may be listed once ({brand.id!r} is twice)")
        by_id[brand.id] = brand
    return by_id


__all__ = [
    "Provider",
    "signed_in_user_unknown",
    "warn_if_signed_in_user_unknown",
]
