"""The guard: the request flows every adapter shares, written once and framework-neutral.

An adapter translates its framework's request into the neutral `Request` (and a body
reader), asks the guard, and translates the answer back. The guard owns every rule:

* which paths the middleware protects (`protects`): the prefix, minus the discovery
  documents at the site's root (public by their specs) and the
  Provider's own routes when the app serves the Provider (they authenticate themselves, in
  the protocol's order); and, where the adapter can tell once the framework has routed a
  request (`protects_once_routed`: Flask, Django), a view of the app's own routed under them;
* the caller (`authenticate`): the `Authorization` header (a repeated one is missing), the
  identity JWT, then an `X-A2A-User-Delegation` token when one is sent (a repeated one is
  malformed; one sent where no Brand accepts delegation is refused, never ignored; every
  refusal of one is logged as the Provider's own routes log it, `checked_delegation`);
* scopes (`require_scopes`): no delegation is 401 `invalid_token`, a delegation that lacks
  a scope is 403 `insufficient_scope`;
* `optional`: no `Authorization` at all is an anonymous caller (None), and so is one that is
  no personal agent's (`is_other_credential`: the app's other schemes) unless a delegation
  came with it; one of another scheme than Bearer is not even checked, so not logged as a
  refusal; a personal agent's token that is sent is still checked, so a bad one is never
  mistaken for no token;
* a Parafé-guarded endpoint (`parafe_endpoint`): a body read that stops at the cap whether
  or not the length is declared (413), consent for the action, the refusal reply, and the
  receipts added to the endpoint's JSON answer.

Every refusal is an exception of the project's family, rendered by `refusal_response` (that
is, `pactmw.provider.errors.error_response`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from typing import Any

import attrs
from attrs import frozen

from pactmw.config import ConfigError, Settings, in_protected_path
from pactmw.core.drive import adrive, drive
from pactmw.core.errors import AuthenticationFailed, InsufficientScope, PactmwError, RequestRefused
from pactmw.core.http import DELEGATION_HEADER, Request, Response
from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.protocols.poppy import DISCOVERY_PATH
from pactmw.provider._delegation_check import checked_delegation
from pactmw.provider._log_throttle import log_store_recovery
from pactmw.provider.app import Provider
from pactmw.provider.brand import Brand, TurnHandler
from pactmw.provider.driver import AReadBody, ReadBody, ano_body, arun, no_body, run
from pactmw.provider.errors import error_response
from pactmw.provider.flow import NeedBody, SubFlow
from pactmw.provider.parafe import (
    ParafeAgent,
    ParafeRefused,
    ParafeTurn,
    reply_extensions,
    select_agent,
)
from pactmw.provider.poppy import METADATA_PREFIX
from pactmw.provider.routes import MOUNT, PUBLIC_OPERATIONS, match
from pactmw.provider.settings import PROVIDER_KEYS, PROVIDER_ONLY_KEYS, ProviderSettings
from pactmw.store.base import StoreUnavailable

#: The documents at a site's root an agent reads to discover a service before it holds any
#: credential, public by their specs whoever serves them (the Provider, or the app with
#: `brand_domain_card` or `poppy_discovery_route`): the Brand domain's Agent Card (PACT
#: §2.1: "no authentication"), Poppy's discovery document, and RFC 8414 authorization server
#: metadata (Poppy's issuers'; the path is the issuer's, so every path below the prefix).
#: The Provider's own documents under `/a2a/` (cards, its authorization servers' metadata
#: and JWKS) are its paths, left to it when the app serves it (`Guard.protects`).
_DISCOVERY_DOCUMENTS = ("/.well-known/agent-card.json", DISCOVERY_PATH)

#: What a guarded app endpoint reads of a body at most before answering 413.
ENDPOINT_BODY_LIMIT = 1024 * 1024

#: Refusals that mean "this credential is not a PACT JWT of an agent we know" rather than
#: "a personal agent's token failed": not Bearer, not a JWS, an algorithm PACT never uses,
#: an issuer that is not registered. An app that mixes schemes lets these pass.
OTHER_CREDENTIAL_REASONS = frozenset(
    {"malformed_header", "malformed_token", "unsupported_alg", "unknown_issuer"}
)

_EMPTY_413 = error_response(RequestRefused(413))

#: What checking a caller (`Guard.authenticate`, `require_scopes`) raises that an adapter
#: answers in the endpoint's place, each with `refusal_response`: the protocol's refusals
#: (401, 403), and a store that cannot be used (a database not migrated yet, or down), which
#: the check reads (the agents added at runtime, each agent's switch, a delegation's grant):
#: the 503 with `Retry-After` the Provider's own paths answer, logged as they log it, never
#: a 500 with a traceback from the app's own guarded endpoints.
GUARD_REFUSALS = (AuthenticationFailed, InsufficientScope, StoreUnavailable)
#: One of `GUARD_REFUSALS`.
GuardRefusal = AuthenticationFailed | InsufficientScope | StoreUnavailable


class Guard:
    """The checks an adapter runs on requests to the app's own endpoints.

    `provider` and `delegation_brand` enable delegation tokens (for that Brand's grants);
    `protect_prefix` is what the middleware guards (None: nothing, decorators only), except
    the discovery documents at the site's root and the Provider's routes when
    `serves_provider` (the app serves `provider` at `/a2a/`).
    `parafe_brand` picks the Brand whose Parafé runtime `parafe_endpoint` uses by default.
    """

    def __init__(
        self,
        verifier: IdentityVerifier,
        *,
        provider: Provider | None = None,
        delegation_brand: str | None = None,
        protect_prefix: str | None = MOUNT,
        serves_provider: bool = False,
        parafe_brand: str | None = None,
    ) -> None:
        self.verifier = verifier
        self.serves_provider = serves_provider and provider is not None
        self.provider = provider
        self.delegation_brand = delegation_brand
        self.protect_prefix = protect_prefix
        self.parafe_brand = parafe_brand
        # Whether verifying a caller reads a store that can fail (every lookup reads the
        # agent's runtime switch there): then a verified caller says the store works again
        # after an outage the log reported, on a site whose guarded views are all it serves.
        self._reads_store = getattr(verifier.registry.overrides, "may_block", True) is not False

    @property
    def takes_delegation(self) -> bool:
        """Whether this guard verifies delegation tokens (else it refuses them, and no caller
        it verifies can hold a delegated scope)."""
        return self.provider is not None and self.delegation_brand is not None

    def protects(self, path: str) -> bool:
        """Whether the middleware verifies requests to `path` (decoded, below the root)."""
        if not in_protected_path(path, self.protect_prefix) or _is_discovery_document(path):
            return False
        # The Provider's paths (`/a2a` too) are its own: its routes authenticate themselves.
        # All of them, an unknown Brand's too: an unmatched route there is the Provider's 404
        # before any credential (the PACT conformance suite checks it), and a middleware that
        # runs before routing cannot tell such a path from an app's own route under `/a2a/`
        # (an adapter that can, once routed, asks `protects_once_routed`).
        return not (self.serves_provider and in_protected_path(path, MOUNT))

    def protects_once_routed(self, path: str, *, apps_own_view: bool) -> bool:
        """Whether a request to `path` that `protects` leaves alone is verified once the
        framework has routed it, `apps_own_view` telling whether to a view of the app's own
        (False: to the Provider, or to no route at all).

        `protects` leaves all of `/a2a/` to the Provider when the app serves it, but the
        framework may route a path there to the app's view instead (`/a2a/whoami`, listed
        before the Provider's): the Provider never sees that request to authenticate it, so
        the view is guarded as any path under the prefix is. Only an adapter whose check
        runs after routing can ask (Flask's `before_request`, Django's `process_view`); a
        path `protects` guards was verified before routing, and is not verified twice; a
        discovery document is public wherever it is routed."""
        return (
            apps_own_view
            and self.serves_provider
            and in_protected_path(path, MOUNT)
            and in_protected_path(path, self.protect_prefix)
        )

    def guards_a_providers_public_route(self, method: str, path: str) -> bool:
        """Whether `method` on `path`, which `protects`, is one of a Provider's public routes
        (a Brand's Agent Card, its authorization server's metadata and JWKS, the consent
        pages a person opens): an app that serves the Provider without telling this guard
        (`a2a_routes` inside an ASGI app) hides the Brand from every agent, and its consent
        pages from every person, which the adapter says once in the log."""
        if self.serves_provider:
            return False
        route = match(method, path)
        return route is not None and route.operation in PUBLIC_OPERATIONS

    # -- the caller ----------------------------------------------------------------------

    def authenticate(self, request: Request, *, optional: bool = False) -> PersonalAgent | None:
        """The verified caller (blocking when keys must be fetched), or None when `optional`
        and no personal agent's credential was sent (none, or the app's other schemes:
        `is_other_credential`). Raises `AuthenticationFailed` (401); scopes are checked
        after, with `require_scopes`."""
        if self._anonymous(request, optional):
            return None
        try:
            caller = self.verifier.verify(
                request.header("authorization"), brand=self.delegation_brand
            )
        except AuthenticationFailed as refused:
            return self._none_if_another_scheme(request, optional, refused)
        header = self._verified(request)
        if header is None:
            return caller
        flow = self._delegation_flow(caller, header)
        delegated: PersonalAgent = run(flow, self.verifier, no_body)
        return delegated

    def _verified(self, request: Request) -> str | None:
        """After the identity verified: the delegation token sent beside it, if any. A
        store read just worked (the agent's runtime switch), which ends an outage the log
        reported, on a site whose guarded views are all it serves."""
        if self._reads_store:
            log_store_recovery()
        return request.delegation_token()

    async def aauthenticate(
        self, request: Request, *, optional: bool = False
    ) -> PersonalAgent | None:
        """Async `authenticate`."""
        if self._anonymous(request, optional):
            return None
        authorization, brand = request.header("authorization"), self.delegation_brand
        # A cached token is answered without a coroutine; the identity alone (most requests)
        # needs no flow and no driver, which cost three times the cached check itself.
        try:
            caller = self.verifier.cached(authorization, brand=brand)
            if caller is None:
                caller = await self.verifier.averify(authorization, brand=brand)
        except AuthenticationFailed as refused:
            return self._none_if_another_scheme(request, optional, refused)
        header = self._verified(request)
        if header is None:
            return caller
        delegated: PersonalAgent = await arun(
            self._delegation_flow(caller, header),
            self.verifier,
            ano_body,
            threads=self.verifier.threads,
        )
        return delegated

    @staticmethod
    def _anonymous(request: Request, optional: bool) -> bool:
        """Whether an `optional` check has no credential to check: no `Authorization`, or one
        repeated, which is treated as missing (a WSGI server joins the repeats into one value,
        which `_none_if_another_scheme` then takes for none: both alike), or one of another
        scheme than Bearer (Basic, Digest), no personal agent's, so not checked, and not
        logged as a refusal. A delegation sent without the identity it is bound to is no
        credential at all: 401 (and with another scheme, refused as `_none_if_another_scheme`
        says)."""
        if not optional:
            return False
        authorization = request.header("authorization")
        delegated = request.has_header(DELEGATION_HEADER)
        if authorization is not None:
            return not delegated and _another_scheme(authorization)
        if delegated:
            raise AuthenticationFailed("missing_token")
        return True

    @staticmethod
    def _none_if_another_scheme(
        request: Request, optional: bool, refused: AuthenticationFailed
    ) -> None:
        """None when an `optional` check takes a refused `Authorization` for no credential:
        it is no personal agent's at all (Basic, an API token, another issuer's JWT), as
        `PersonalAgentBackend` lets it pass, and no delegation (bound to an identity) came
        with it; else `refused` is raised. A personal agent's token that fails is refused,
        never taken for none."""
        if optional and is_other_credential(refused) and not request.has_header(DELEGATION_HEADER):
            return None
        raise refused

    def _delegation_flow(self, caller: PersonalAgent, header: str) -> SubFlow:
        """The verified `caller` with the delegation token `header` it sent (checked after
        the identity, which it is bound to)."""
        if self.provider is None or self.delegation_brand is None:
            # Refused and logged as the Provider's own routes refuse one (no Brand named):
            # only the log tells an operator this guard was given no delegation_provider or
            # delegation_brand.
            delegation = yield from checked_delegation(None, None, caller, header, brand_id=None)
        else:
            delegation = yield from self.provider.delegation_flow(
                self.delegation_brand, caller, header
            )
        return attrs.evolve(caller, delegation=delegation)

    # -- Parafé ----------------------------------------------------------------------------

    def parafe_endpoint(
        self,
        action: str,
        *,
        brand: str | None = None,
        agent: ParafeAgent | None = None,
        refusal_status: int = 403,
    ) -> ParafeEndpoint:
        """The Parafé check of an endpoint that performs `action` (see `ParafeEndpoint`).

        `agent` is used as given; else the Provider's Parafé runtime of `brand`, else of
        `parafe_brand`, else of the one Brand that configures Parafé.
        """
        if agent is None:
            agents = self.provider.parafe if self.provider is not None else {}
            agent = select_agent(agents, brand or self.parafe_brand)
        return ParafeEndpoint(agent, action, refusal_status)


@frozen
class GuardSettings:
    """What a settings dict describes for an app's guard, checked but not yet built."""

    identity: Settings
    provider: ProviderSettings | None
    delegation_brand: str | None
    parafe_brand: str | None

    def build(self) -> Guard:
        """The guard (and, with `brands`, the Provider the app serves at `/a2a/`)."""
        provider = None
        if self.provider is not None:
            provider = Provider.from_settings(self.provider)
            verifier = provider.verifier
        else:
            verifier = self.identity.build_verifier()
        return Guard(
            verifier,
            provider=provider,
            delegation_brand=self.delegation_brand,
            protect_prefix=self.identity.protect_prefix,
            serves_provider=provider is not None,
            parafe_brand=self.parafe_brand,
        )


def guard_settings(
    data: Any, *, handlers: Mapping[str, TurnHandler] | None = None
) -> GuardSettings:
    """Check a settings dict (Django's `settings.PACTMW`, Flask's `app.config["PACTMW"]`)
    without opening stores or keys; raises `ConfigError` naming the key, so a framework can
    report it at startup (Django's system checks, Flask's `init_app`)."""
    if not isinstance(data, Mapping):
        raise ConfigError("the pactmw settings must be a dict")
    provider: ProviderSettings | None = None
    if "brands" in data:
        provider = ProviderSettings.from_mapping(data, handlers=handlers)
        identity = provider.identity
    else:
        # Read first: a misspelt key ("brand") is named as unknown, not blamed on the
        # Provider keys written beside it.
        identity = Settings.from_mapping(data, extra_keys=PROVIDER_KEYS)
        # Nothing would read a Provider's key here: refused, so it cannot be mistaken for set.
        provider_only = sorted(PROVIDER_ONLY_KEYS.intersection(data))
        if provider_only:
            key = provider_only[0]
            raise ConfigError(
                f"{key} is a Provider setting: it needs brands (add brands, or remove {key})"
            )
    brands = {brand.id: brand for brand in provider.brands} if provider is not None else {}
    delegation_brand = _brand_setting(data, "delegation_brand")
    if delegation_brand is not None:
        check_delegation_brand(brands, delegation_brand)
    parafe_brand = _brand_setting(data, "parafe_brand")
    if parafe_brand is not None and getattr(brands.get(parafe_brand), "parafe", None) is None:
        raise ConfigError(f"parafe_brand {parafe_brand!r} has no [brands.X.parafe]")
    return GuardSettings(identity, provider, delegation_brand, parafe_brand)


def check_delegation_brand(brands: Mapping[str, Brand], delegation_brand: str) -> None:
    """Refuse a `delegation_brand` that is not one of `brands` or offers no delegation: its
    tokens could never be verified (`ConfigError`, naming the setting)."""
    brand = brands.get(delegation_brand)
    if brand is None:
        raise ConfigError(f"delegation_brand {delegation_brand!r} is not one of brands")
    if brand.delegation is None:
        raise ConfigError(f"delegation_brand {delegation_brand!r} offers no delegation")


def guard_from_mapping(data: Any, *, handlers: Mapping[str, TurnHandler] | None = None) -> Guard:
    """`guard_settings(data).build()`."""
    return guard_settings(data, handlers=handlers).build()


def _brand_setting(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{key} must be the id of one of brands")
    return value


def require_scopes(caller: PersonalAgent | None, scopes: Iterable[str]) -> None:
    """Refuse a caller without a delegation (401 `invalid_token`) or one whose delegation
    lacks any of `scopes` (403 `insufficient_scope`)."""
    if caller is None or caller.delegation is None:
        raise DelegationRejected("required", "this endpoint needs a delegation token")
    missing = tuple(scope for scope in scopes if scope not in caller.delegation.scopes)
    if missing:
        raise InsufficientScope(missing)


def _is_discovery_document(path: str) -> bool:
    """Whether `path` (decoded, below the root) is a discovery document at the site's root
    (`_DISCOVERY_DOCUMENTS`, and RFC 8414 metadata below `METADATA_PREFIX`): no middleware
    guards it, whatever its prefix, since an agent reads it to learn how to get the
    credential a guard would ask for."""
    return path in _DISCOVERY_DOCUMENTS or in_protected_path(path, METADATA_PREFIX)


def _another_scheme(authorization: str) -> bool:
    """Whether an `Authorization` value names a scheme other than Bearer (`Basic ...`): no
    personal agent's token. A bare or malformed Bearer value is not: the verifier checks it."""
    parts = authorization.split(maxsplit=1)
    return bool(parts) and parts[0].lower() != "bearer"


def is_other_credential(exc: AuthenticationFailed) -> bool:
    """Whether a refused `Authorization` is simply not a PACT JWT of an agent this app knows
    (Basic, an opaque API token, another issuer's JWT), as opposed to a personal agent's
    token that failed verification. A delegation refusal never is."""
    return not isinstance(exc, DelegationRejected) and exc.reason in OTHER_CREDENTIAL_REASONS


def refusal_response(exc: PactmwError) -> Response:
    """The answer to what `authenticate` or `require_scopes` raised (`GUARD_REFUSALS`),
    rendered by `error_response`: the protocol's 401 or 403, or for a store that could not
    be used the 503 with `Retry-After: 1`, its message logged at ERROR (so call it once a
    request). Anything else is a TypeError: the caller mixed up its exceptions."""
    if not isinstance(exc, GUARD_REFUSALS):
        raise TypeError(f"not a refusal: {type(exc).__name__}")
    return error_response(exc)


# -- a Parafé-guarded endpoint -------------------------------------------------------------


@frozen
class ParafeAdmitted:
    """The endpoint may run: its consent is in `turn`, and `body` is what was read (the
    adapter hands it to the endpoint again)."""

    turn: ParafeTurn
    body: bytes


@frozen
class _NeedConsent:
    turn: ParafeTurn
    action: str


class ParafeEndpoint:
    """Run an endpoint that performs `action` only with Parafé consent.

    `admit(read_body)` (or `aadmit`) reads the JSON body (an A2A message or
    `{"message": ...}`) at most `ENDPOINT_BODY_LIMIT` bytes far and checks its consent
    (token, proof, replay). It returns `ParafeAdmitted`, or the `Response` to send instead:
    413 for a longer body, the bare status of a body the adapter could not read (400, 411),
    the 503 of a store that cannot be used (where the agent remembers proofs;
    `refusal_response`), or the refusal (`refusal_status`, an A2A-shaped message with the
    Parafé error and the refusal receipt). After the endpoint ran, `finish` signs the
    receipts and returns its JSON body with them added (None: leave the body as it is).
    """

    def __init__(self, agent: ParafeAgent, action: str, refusal_status: int = 403) -> None:
        self.agent = agent
        self.action = action
        self.refusal_status = refusal_status

    def admit(self, read_body: ReadBody) -> ParafeAdmitted | Response:
        def answer(need: NeedBody | _NeedConsent) -> Any:
            if isinstance(need, NeedBody):
                return read_body(need.limit)
            return need.turn.require(need.action)

        return drive(self._flow(), answer)

    async def aadmit(self, read_body: AReadBody) -> ParafeAdmitted | Response:
        async def answer(need: NeedBody | _NeedConsent) -> Any:
            if isinstance(need, NeedBody):
                return await read_body(need.limit)
            return await need.turn.arequire(need.action)

        return await adrive(self._flow(), answer)

    def _flow(self) -> Generator[NeedBody | _NeedConsent, Any, ParafeAdmitted | Response]:
        try:
            body = yield NeedBody(ENDPOINT_BODY_LIMIT)
        except RequestRefused as unreadable:
            # A body that cannot be read (an invalid Content-Length, a chunked body Django
            # under WSGI cannot read, a client gone) is its bare status on every adapter.
            return error_response(unreadable)
        if body is None:
            return _EMPTY_413
        turn = self.agent.endpoint_turn(body)
        try:
            yield _NeedConsent(turn, self.action)
        except ParafeRefused as refused:
            return self.agent.refusal_response(refused, self.refusal_status)
        except StoreUnavailable as outage:  # the proof's replay memory lives in the store
            return refusal_response(outage)
        return ParafeAdmitted(turn, body)

    def finish(
        self,
        turn: ParafeTurn,
        body: bytes | None,
        content_type: str | None,
        status: int | None = None,
    ) -> bytes | None:
        """Sign and file the turn's receipts; the endpoint's JSON body with them, or None
        (not JSON, or streamed: `body` None) when the body stays as it is. The endpoint's
        `status` decides: from 400 up, what it did not complete is receipted as failed."""
        return self.agent.finish(turn, body if body is not None else b"", content_type, status)

    @staticmethod
    def reply_extensions(existing: str | None) -> str:
        """The `A2A-Extensions` header for a body `finish` changed (it now carries Parafé
        data): `existing`, the endpoint's own value, with Parafé's URI added once."""
        return reply_extensions(existing)


__all__ = [
    "ENDPOINT_BODY_LIMIT",
    "GUARD_REFUSALS",
    "OTHER_CREDENTIAL_REASONS",
    "Guard",
    "GuardRefusal",
    "GuardSettings",
    "ParafeAdmitted",
    "ParafeEndpoint",
    "check_delegation_brand",
    "guard_from_mapping",
    "guard_settings",
    "is_other_credential",
    "refusal_response",
    "require_scopes",
]
