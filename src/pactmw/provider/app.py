"""The framework-neutral PACT Provider: one implementation that every adapter renders.

Processing order (pact-provider.md §2.1): route match (404, no body, before any
authentication), the Agent Card (no authentication), the personal-agent JWT (401), the Brand
lookup (404), rate limits (429), then the operation.

Like the identity verifier, the request flow is a generator that yields what it needs done
(verify a token, read the body, call the store, run the bot) and receives the results; the
sync driver does those things directly, the async driver awaits them (blocking store calls
and sync bots run in worker threads). So there is one flow, not a sync and an async copy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from pactmw.core.errors import A2AError, AuthenticationFailed, RequestRefused
from pactmw.core.fetch import FetchPolicy
from pactmw.core.http import Request, Response
from pactmw.core.keys import JwksCache
from pactmw.protocols.delegation import (
    DelegationRejected,
    SigningKeys,
)
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    is_activated,
)
from pactmw.provider._send import MessageSender
from pactmw.provider.a2a import ok
from pactmw.provider.brand import Brand
from pactmw.provider.card import DEFAULT_IDENTITY_SCHEME, build_card, card_response
from pactmw.provider.delegated import (
    FORM_LIMIT,
    AuditHook,
    AuthorizationServer,
    ConsentRefused,
    OAuthError,
)
from pactmw.provider.driver import (
    ACurrentUser,
    AReadBody,
    CurrentUser,
    ReadBody,
    ano_body,
    arun,
    no_body,
    run,
)
from pactmw.provider.errors import error_response
from pactmw.provider.flow import (
    Flow,
    NeedBody,
    NeedIdentity,
    NeedUser,
    SubFlow,
)
from pactmw.provider.messages import parse_page_size, parse_send_message
from pactmw.provider.parafe import ParafeAgent
from pactmw.provider.poppy import (
    DeviceSignIn,
    JsonAnswer,
    PoppyCaller,
    PoppyOperations,
    PoppyServer,
    Proposal,
)
from pactmw.provider.ratelimit import RateLimit, RateLimiter, counting_store
from pactmw.provider.routes import MOUNT, PUBLIC_OPERATIONS, Route, match
from pactmw.provider.settings import ProviderSettings
from pactmw.store import AuthorizationDetailsStore, open_store
from pactmw.store.base import Store, StoreUnavailable

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
        self.base_url = base_url.rstrip("/")
        #: Days conversations are kept after their last activity by `pactmw cleanup`
        #: (`pactmw.provider.agent_admin.run_cleanup`); None keeps them.
        self.retention_days = retention_days
        self.verifier = verifier
        self.store = store
        self.brands = {brand.id: brand for brand in brands}
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
        if any(brand.delegation is not None for brand in self.brands.values()):
            if signing_keys is None:
                raise ValueError("Brands that offer delegation need signing_keys")
            for brand in self.brands.values():
                if (
                    brand.delegation is not None
                    and brand.delegation.authorization_details
                    and not isinstance(store, AuthorizationDetailsStore)
                ):
                    raise ValueError(
                        f"brands.{brand.id}.delegation.authorization_details needs a store "
                        f"that keeps authorization details; {type(store).__name__} does not"
                    )
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
        self.poppy: PoppyServer | None = None
        poppy_brands = {
            brand.id: (brand.name, brand.poppy)
            for brand in self.brands.values()
            if brand.poppy is not None
        }
        # A Poppy Brand with PACT delegation also offers Device Sign-In on its consent
        # pages: one grant, one consent page, whichever protocol asked (docs/poppy.md).
        sign_in = {
            brand.id: DeviceSignIn(brand.delegation, self.oauth.url(brand, "consent"))
            for brand in self.brands.values()
            if brand.poppy is not None and brand.delegation is not None and self.oauth is not None
        }
        if poppy_brands:
            self.poppy = PoppyServer(
                base_url=self.base_url,
                brands=poppy_brands,
                store=store,
                fetch_policy=poppy_fetch_policy or verifier.keys.fetch_policy,
                clock=clock,
                token_rate_limit=token_rate_limit,
                rate_counters=rate_counters,
                sign_in=sign_in,
                audit=self.oauth.audit if self.oauth is not None else None,
                bots={brand_id: self.brands[brand_id] for brand_id in poppy_brands},
                turns=self._sender,
            )
        # Cards are static per Brand: render them once.
        self._cards = {
            brand.id: card_response(self.card(brand.id)) for brand in self.brands.values()
        }

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
        read from the store on each request. `signing_keys`
        overrides the configured ones (a tool that only revokes grants needs no private key);
        `audit` receives the delegation audit events.
        """
        store = store or open_store(settings.store)
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        return cls(
            base_url=settings.base_url,
            verifier=settings.identity.build_verifier(overrides=store, runtime=store, **extra),
            store=store,
            brands=settings.brands,
            identity_scheme=settings.identity_scheme,
            organization=settings.organization,
            rate_limit=settings.rate_limit,
            consent_rate_limit=settings.consent_rate_limit,
            device_rate_limit=settings.device_rate_limit,
            token_rate_limit=settings.token_rate_limit,
            shared_rate_limits=settings.shared_rate_limits,
            max_body_bytes=settings.max_body_bytes,
            conversation_idle_timeout=settings.conversation_idle_timeout,
            claim_lease_seconds=settings.claim_lease_seconds,
            turn_timeout=settings.turn_timeout,
            retention_days=settings.retention_days,
            signing_keys=signing_keys or settings.signing_keys(),
            audit=audit,
            **extra,
        )

    def card(self, brand_id: str) -> dict[str, Any]:
        """The Agent Card of a Brand (KeyError for an unknown Brand).

        A Brand that offers delegation also declares the `userDelegation` device-code scheme
        and a second security requirement naming both schemes (spec §5.1).
        """
        brand = self.brands[brand_id]
        card = build_card(
            brand,
            base_url=self.base_url,
            identity_scheme=self.identity_scheme,
            organization=self.organization,
        )
        if brand.delegation is not None and self.oauth is not None:
            card["securitySchemes"]["userDelegation"] = self.oauth.card_scheme(
                brand, brand.delegation
            )
            card["securityRequirements"].append(
                {"schemes": {self.identity_scheme: {"list": []}, "userDelegation": {"list": []}}}
            )
        return card

    def _agent_name(self, issuer: str) -> str:
        """What the consent page calls the agent: a registered PACT agent's name, else the
        `client_name` of a Poppy agent's metadata (verified when it asked for the code)."""
        agent = self.verifier.registry.lookup(issuer)
        if agent is not None and agent.name:
            return agent.name
        if self.poppy is not None:
            metadata = self.poppy.clients.last_verified(issuer)
            if metadata is not None and metadata.client_name:
                return metadata.client_name
        return issuer

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke one grant now: its tokens fail on their next request, and the Poppy
        Sessions signed in through it go on signed out."""
        if self.oauth is None and self.poppy is not None:
            return self.poppy.revoke_grant(grant_id)
        return self._oauth().revoke_grant(grant_id)

    def revoke_account(self, account: str, *, brand_id: str | None = None) -> list[str]:
        """Revoke every grant of a Brand account: call it when the account is disabled."""
        if self.oauth is None and self.poppy is not None:
            return self.poppy.revoke_account(account, brand_id=brand_id)
        return self._oauth().revoke_account(account, brand_id=brand_id, reason="account")

    def _oauth(self) -> AuthorizationServer:
        if self.oauth is None:
            raise RuntimeError("no Brand of this Provider offers delegation or Poppy")
        return self.oauth

    def matches(self, method: str, path: str) -> bool:
        """Tell whether the Provider serves this path: anything under `/a2a/`, and with Poppy
        `/.well-known/poppy.json` and the issuers' RFC 8414 metadata."""
        return path.startswith(MOUNT) or (self.poppy is not None and self.poppy.matches(path))

    def poppy_discovery(self, brand_id: str, host: str | None) -> Response:
        """What a Brand's own site answers at `/.well-known/poppy.json` (Poppy §3): the
        document itself, never a redirect (PAP-3.1-02), for `host` (the request's `Host`)
        when it is one of the Brand's `poppy.domains`; else a Poppy `404 not_found`.
        KeyError when the Brand does not enable Poppy."""
        if self.poppy is None or brand_id not in self.poppy.brands:
            raise KeyError(brand_id)
        try:
            return self.poppy.brand_discovery(brand_id, host)
        except Exception as exc:
            return error_response(exc)

    def poppy_session(
        self, brand_id: str, request: Request, scopes: tuple[str, ...] = ()
    ) -> PoppyCaller:
        """For the app's own APIs: the caller of a request carrying a Poppy Session Token
        (`Authorization: DPoP` and a `DPoP` proof), signed in with `scopes` when any are
        named; raises `PoppyError` (render it with `error_response`). Blocking."""
        flow = self._poppy().session_flow(brand_id, request, scopes)
        caller: PoppyCaller = run(flow, self.verifier, no_body)
        return caller

    async def apoppy_session(
        self, brand_id: str, request: Request, scopes: tuple[str, ...] = ()
    ) -> PoppyCaller:
        """Async `poppy_session`: store calls run in a worker thread."""
        flow = self._poppy().session_flow(brand_id, request, scopes)
        caller: PoppyCaller = await arun(flow, self.verifier, ano_body)
        return caller

    def poppy_propose(self, caller: PoppyCaller, proposal: Proposal) -> JsonAnswer:
        """For the app's own APIs: propose `proposal` (Poppy Operations v1) for the caller
        `poppy_session_required` checked, instead of performing it; return the answer
        (`202 {"operation"}`, or `403 extension_required`) as a `JsonAnswer`. Blocking;
        ValueError when the Brand sets no `poppy.operations` executor for the action."""
        flow = self._poppy_operations().proposal_answer(caller, proposal)
        answer: JsonAnswer = run(flow, self.verifier, no_body)
        return answer

    async def apoppy_propose(self, caller: PoppyCaller, proposal: Proposal) -> JsonAnswer:
        """Async `poppy_propose`: store calls run in a worker thread."""
        flow = self._poppy_operations().proposal_answer(caller, proposal)
        answer: JsonAnswer = await arun(flow, self.verifier, ano_body)
        return answer

    def _poppy_operations(self) -> PoppyOperations:
        operations = self._poppy().operations
        if operations is None:
            raise ValueError("no Brand of this Provider sets poppy.operations")
        return operations

    def _poppy(self) -> PoppyServer:
        if self.poppy is None:
            raise RuntimeError("no Brand of this Provider enables Poppy")
        return self.poppy

    def parafe_agent(self, brand_id: str) -> ParafeAgent:
        """The Parafé runtime of a Brand (KeyError when it has no `parafe` configuration);
        what `@parafe_action` uses on an app's own endpoints."""
        return self.parafe[brand_id]

    def close(self) -> None:
        for agent in self.parafe.values():
            agent.close()
        self.store.close()

    # -- the flow ------------------------------------------------------------------------

    def _flow(self, request: Request) -> Flow:
        if self.poppy is not None:
            poppy_route = self.poppy.route(request.method, request.path)
            if poppy_route is not None:
                return (yield from self.poppy.flow(poppy_route, request))
        route = match(request.method, request.path)
        if route is None:
            raise RequestRefused(404)
        brand = self.brands.get(route.brand_id)
        if route.operation in PUBLIC_OPERATIONS:
            if brand is None:
                raise RequestRefused(404)
            if route.operation == "card":
                return self._cards[brand.id]
            return (yield from self._public_oauth(route, brand, request))
        caller: PersonalAgent = yield NeedIdentity(request.header("authorization"), route.brand_id)
        if brand is None:
            raise RequestRefused(404)
        delegation_header = request.delegation_token()
        if delegation_header is not None:
            if self.oauth is None:
                raise DelegationRejected("not_offered", "this Brand offers no delegation")
            delegation = yield from self.oauth.verify_delegation(brand, caller, delegation_header)
            caller = attrs.evolve(caller, delegation=delegation)
        wait = yield from self.rate_limiter.admit(caller.issuer, caller.sub, self._clock())
        if wait is not None:
            raise RequestRefused(429, (("Retry-After", str(wait)),))
        parafe = self.parafe.get(brand.id)
        activated = parafe is not None and is_activated(request.headers)
        if route.operation == "send":
            body = yield NeedBody(self.max_body_bytes)
            if body is None:
                raise RequestRefused(413)
            message = parse_send_message(
                body, data_keys=parafe.config.data_keys if parafe is not None else frozenset()
            )
            if parafe is not None:
                activated = activated or is_activated((), message.message)
                _check_activation(parafe, activated)
            response = yield from self._sender.send(brand, caller, message, parafe, activated)
            # An agent that processed Parafé data says so in the response (spec §3).
            return _with_extension(response) if activated else response
        if route.operation in ("oauth_device_authorization", "oauth_token"):
            config = brand.delegation
            if config is None or self.oauth is None:
                raise RequestRefused(404)
            form = yield NeedBody(FORM_LIMIT)
            if form is None:
                raise RequestRefused(413)
            if route.operation == "oauth_token":
                return (yield from self.oauth.token(brand, config, caller, form))
            return (yield from self.oauth.device_authorization(brand, config, caller, form))
        if parafe is not None:
            _check_activation(parafe, activated)
        return _simple_operation(route, request)

    def _public_oauth(self, route: Route, brand: Brand, request: Request) -> Flow:
        """The authorization server's documents and the consent pages (no PACT JWT)."""
        config = brand.delegation
        if config is None or self.oauth is None:
            raise RequestRefused(404)
        oauth = self.oauth
        if route.operation == "oauth_metadata":
            return oauth.metadata(brand, config)
        if route.operation == "oauth_jwks":
            return oauth.jwks()
        try:
            if route.operation == "consent_result":
                return (yield from oauth.result(brand, config, request))
            user = (yield NeedUser()) if config.mode == "same-app" else None
            if route.operation == "consent" and request.method == "GET":
                return (yield from oauth.consent(brand, config, request, user, None))
            if route.operation == "connected_agents" and request.method == "GET":
                return (yield from oauth.connected_agents(brand, config, request, user, None))
            body = yield NeedBody(FORM_LIMIT)
            if body is None:
                raise RequestRefused(413)
            if route.operation == "consent":
                return (yield from oauth.consent(brand, config, request, user, body))
            if route.operation == "connected_agents":
                return (yield from oauth.connected_agents(brand, config, request, user, body))
            return (yield from oauth.decision(brand, config, request, user, body))
        except OAuthError as exc:  # a malformed form on a page a person sees: an HTML answer
            return error_response(ConsentRefused(exc.description, 400), pages=config.pages)
        except ConsentRefused as exc:
            return error_response(exc, pages=config.pages)
        except (RequestRefused, AuthenticationFailed):
            raise
        except StoreUnavailable as exc:
            logger.error("store unavailable on a consent page: %s", exc)
            busy = "The service is busy. Please try again in a moment."
            return error_response(ConsentRefused(busy, 503), pages=config.pages)
        except Exception:
            # A person's browser gets an HTML page, never an A2A JSON error. The usual cause
            # is `current_user` reading what the host app's middleware sets (a session, a
            # signed-in user) while the Provider runs outside that middleware.
            logger.exception(
                "consent page of brand %r failed (if current_user reads the host app's "
                "session or user, serve the Provider inside the host app, after its "
                "middleware: pactmw.adapters.asgi.a2a_mount)",
                brand.id,
            )
            failed = "Something went wrong on our side. Please try again later."
            return error_response(ConsentRefused(failed, 500), pages=config.pages)

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
            response: Response = run(self._flow(request), self.verifier, read_body, current_user)
        except Exception as exc:
            return error_response(exc)
        return response

    async def ahandle(
        self,
        request: Request,
        read_body: AReadBody,
        current_user: CurrentUser | ACurrentUser | None = None,
    ) -> Response:
        """Async `handle`: store calls, key fetches and sync bots run in worker threads."""
        try:
            response: Response = await arun(
                self._flow(request),
                self.verifier,
                read_body,
                current_user,
                threads=self.verifier.threads,
                # The Provider's flow never catches the caller's refusal: the store read of a
                # cached agent's switch joins the request's one hop (see arun).
                defer_identity=True,
            )
        except Exception as exc:
            return error_response(exc)
        return response

    def verify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        """For custom endpoints: check an `X-A2A-User-Delegation` header value for a Brand.

        Returns the caller with its `delegation`; raises `DelegationRejected` (401,
        `error="invalid_token"`). The Provider's own routes do this themselves.
        """
        delegation = run(self.delegation_flow(brand_id, caller, header), self.verifier, no_body)
        return attrs.evolve(caller, delegation=delegation)

    async def averify_delegation(
        self, brand_id: str, caller: PersonalAgent, header: str | None
    ) -> PersonalAgent:
        """Async `verify_delegation`."""
        flow = self.delegation_flow(brand_id, caller, header)
        delegation = await arun(flow, self.verifier, ano_body, threads=self.verifier.threads)
        return attrs.evolve(caller, delegation=delegation)

    def delegation_flow(self, brand_id: str, caller: PersonalAgent, header: str | None) -> SubFlow:
        """The delegation check as a flow (the guard runs it after the identity check)."""
        brand = self.brands.get(brand_id)
        if brand is None or self.oauth is None:
            raise DelegationRejected("not_offered", "this Brand offers no delegation")
        return (yield from self.oauth.verify_delegation(brand, caller, header))


def _check_activation(parafe: ParafeAgent, activated: bool) -> None:
    """A Brand whose card says Parafé is `required` serves no request that does not activate
    it (spec §2.1: A2A's ExtensionSupportRequiredError)."""
    if parafe.config.required and not activated:
        raise A2AError(
            "EXTENSION_SUPPORT_REQUIRED", f"This agent requires the extension {EXTENSION_URI}"
        )


def _with_extension(response: Response) -> Response:
    return attrs.evolve(response, headers=(*response.headers, ("A2A-Extensions", EXTENSION_URI)))


def _simple_operation(route: Route, request: Request) -> Response:
    """The operations with a fixed answer (the card's capabilities are all false)."""
    if route.operation == "list_tasks":
        size = parse_page_size(request.query)
        return ok({"tasks": [], "nextPageToken": "", "pageSize": size, "totalSize": 0})
    if route.operation in ("get_task", "cancel_task"):
        raise A2AError("TASK_NOT_FOUND", f"Task not found: {route.task_id}")
    if route.operation == "push_configs":
        raise A2AError("PUSH_NOTIFICATION_NOT_SUPPORTED", "Push notifications are not supported")
    raise A2AError("UNSUPPORTED_OPERATION", "Unsupported operation")


__all__ = [
    "Provider",
]
