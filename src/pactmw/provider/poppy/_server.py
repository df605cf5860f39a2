"""The Poppy company side of a Provider: `PoppyServer` routes each Poppy request to the part
that answers it and holds what they share.

Routes (one issuer per Brand, `{base_url}/a2a/{brand}/poppy`, PAP-3.2-07/08):

- `GET /.well-known/poppy.json`: the document of the Brand whose `poppy.domains` holds the
  request's `Host`, served (never redirected to, PAP-3.1-02) (`_discovery`);
- `GET /.well-known/oauth-authorization-server{base path}/a2a/{brand}/poppy`: the issuer's
  RFC 8414 metadata (§3.2, path insertion of RFC 8414 §3.1) (`_brands`);
- `POST {issuer}/device`: Device Sign-In (§4.6, RFC 8628), offered by a Brand that also
  has PACT `delegation`: the person approves on the Brand's consent pages (`_device`);
- `POST {issuer}/token`: jwt-bearer Session start and renewal (§4.2); device_code signs the
  polling Session in with what the person approved and issues the first Account Token;
  refresh_token signs a Session in with an Account Token, rotating it (§4.8) (`_token`);
- `POST {issuer}/revoke`: sign-out (§4.9), `200 {}` for any token (RFC 7009 §2.2)
  (`_revocation`);
- `POST {issuer}/feedback`: feedback on the company (§8, `_feedback`), from any Session;
- `{issuer}/operations/{id}` (GET, `/confirm`, `/cancel`): Operations v1 of a Brand that
  sets `poppy.operations` (`_operations`);
- `{issuer}/conversations...`: conversations with the Brand's bot (§7, `_conversations`),
  each request checked as an app API call is (`_session_check`).

The flows follow the SDK's order: the client assertion (`401 invalid_client`), the DPoP
proof (`400 invalid_dpop_proof`), then the grant. Replay memories live in the store
(namespaces `poppy.assertion` and `poppy.dpop`), so every process serving the Brand refuses a
replayed assertion or proof (PAP-4.2-09, PAP-4.3-06). Refusals are `PoppyError`s, rendered
by `provider.errors.error_response` through `poppy_response`.

A new endpoint under the issuer is three lines here: its name in `PoppyOperation`, its path
in `_ISSUER_ENDPOINTS` (or, for a family of paths, a prefix in `route` as conversations
have), and its handler in `PoppyServer._endpoints`; its flow lives in a module of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from attrs import frozen

from pactmw.core.client_metadata import ClientMetadataCache
from pactmw.core.fetch import FetchPolicy
from pactmw.core.http import Request, Response
from pactmw.core.replay import StoreReplayMemory
from pactmw.protocols.identity import AgentOverrides
from pactmw.protocols.poppy import DISCOVERY_PATH, PoppyError
from pactmw.protocols.poppy._discovery import METADATA_PREFIX  # the protocol owns the path
from pactmw.provider._log_throttle import log_store_outage
from pactmw.provider._send import MessageSender
from pactmw.provider.brand import Brand
from pactmw.provider.delegated._audit import Audit
from pactmw.provider.flow import Flow, Need, SubFlow
from pactmw.provider.poppy._brands import PoppyBrand, brand_runtimes
from pactmw.provider.poppy._companies import (
    CONVERSATIONS_SEGMENT,
    ISSUER_SEGMENT,
    DeviceSignIn,
    poppy_companies,
)
from pactmw.provider.poppy._config import PoppyConfig
from pactmw.provider.poppy._conversations import (
    ConversationOperation,
    PoppyConversations,
    conversation_route,
)
from pactmw.provider.poppy._device import DEVICE_RATE_LIMIT, DeviceSignInEndpoint
from pactmw.provider.poppy._discovery import Discovery
from pactmw.provider.poppy._feedback import FEEDBACK_SEGMENT, PoppyFeedback
from pactmw.provider.poppy._grant_steps import GrantSteps
from pactmw.provider.poppy._operation_endpoint import OperationRequest, operation_route
from pactmw.provider.poppy._operations import OPERATIONS_SEGMENT, PoppyOperations
from pactmw.provider.poppy._revocation import PoppyRevocation
from pactmw.provider.poppy._session_check import PoppyCaller, SessionCheck
from pactmw.provider.poppy._token import TOKEN_RATE_LIMIT, TokenEndpoint
from pactmw.provider.ratelimit import RateLimit, RateLimiter
from pactmw.provider.routes import routed_method
from pactmw.store import RateLimitStore
from pactmw.store.base import Store, StoreUnavailable

ASSERTION_NAMESPACE = "poppy.assertion"
DPOP_NAMESPACE = "poppy.dpop"

logger = logging.getLogger("pactmw.poppy")
T = TypeVar("T")

#: With `503 temporarily_unavailable` when the store cannot answer: the Provider's other
#: routes say the same (`pactmw.provider.errors`).
_RETRY_SOON = (("Retry-After", "1"),)

PoppyOperation = Literal[
    "discovery", "metadata", "device", "token", "revoke", "conversation", "feedback", "operations"
]

#: The single endpoints below a Brand's issuer: path -> (method, operation). Any other
#: method on one of these paths is a 404, as for every unmatched route.
_ISSUER_ENDPOINTS: Mapping[str, tuple[str, PoppyOperation]] = {
    "token": ("POST", "token"),
    "revoke": ("POST", "revoke"),
    "device": ("POST", "device"),
    FEEDBACK_SEGMENT: ("POST", "feedback"),
}


@frozen
class PoppyRoute:
    """A matched Poppy route: the operation and its Brand (None for `poppy.json`, which is
    chosen by `Host`)."""

    operation: PoppyOperation
    brand_id: str | None = None
    #: For `conversation`: which request, and the conversation it names (None for create).
    conversation: tuple[ConversationOperation, str | None] | None = None
    #: For `operations`: which request, and the operation it names.
    operation_request: tuple[OperationRequest, str] | None = None


#: How a matched route of a Brand is answered.
_Endpoint = Callable[[PoppyBrand, PoppyRoute, Request], Flow]


class PoppyServer:
    """Every Poppy-enabled Brand of one Provider. Thread-safe; the Provider builds it.

    `brands` maps a Brand id to (its display name, its `PoppyConfig`); `sign_in` the
    Brands that offer Device Sign-In on their consent pages; `fetch_policy` governs
    fetching agents' client metadata and keys (the same SSRF-safe, bounded fetcher as
    PACT's JWKS); `clock` is epoch seconds; `blocks` the agents' block/allow switches (the
    PACT verifier's registry's `overrides`; default `store`): a blocked `client_id` is
    refused at every Brand.
    """

    def __init__(
        self,
        *,
        base_url: str,
        brands: Mapping[str, tuple[str, PoppyConfig]],
        store: Store,
        fetch_policy: FetchPolicy,
        clock: Callable[[], float] = time.time,
        token_rate_limit: RateLimit | None = None,
        rate_counters: RateLimitStore | None = None,
        sign_in: Mapping[str, DeviceSignIn] | None = None,
        device_rate_limit: RateLimit | None = None,
        audit: Audit | None = None,
        bots: Mapping[str, Brand] | None = None,
        turns: MessageSender | None = None,
        blocks: AgentOverrides | None = None,
    ) -> None:
        sign_in = sign_in or {}
        #: The conversation endpoints, when the Provider hands over its Brands' bots and its
        #: turn runner (the one `message:send` uses); published in poppy.json then.
        self.conversations = (
            PoppyConversations(store=store, clock=clock, bots=bots, turns=turns)
            if bots is not None and turns is not None
            else None
        )
        companies = poppy_companies(base_url, brands, sign_in, self.conversations is not None)
        self.base_url = base_url.rstrip("/")
        parts = urlsplit(self.base_url)
        self._base_path = parts.path
        self.store = store
        self._clock = clock
        audit = audit or Audit()
        self.feedback = PoppyFeedback(audit=audit, clock=clock, rate_counters=rate_counters)
        self.clients = ClientMetadataCache(fetch_policy)
        #: Operations v1 of the Brands that enable it (docs/poppy.md), else None.
        operation_configs = {
            brand_id: config.operations
            for brand_id, (_, config) in brands.items()
            if config.operations is not None
        }
        self.operations = (
            PoppyOperations(
                store=store,
                clock=clock,
                clients=self.clients,
                configs=operation_configs,
                tools={brand_id: brand.tools for brand_id, brand in (bots or {}).items()},
            )
            if operation_configs
            else None
        )
        if self.conversations is not None:
            self.conversations.operations = self.operations
        self.brands: dict[str, PoppyBrand] = brand_runtimes(
            {brand_id: config for brand_id, (_, config) in brands.items()},
            companies,
            sign_in,
            clients=self.clients,
            assertion_replay=StoreReplayMemory(store, ASSERTION_NAMESPACE),
            clock=clock,
            # The switches `agents block` writes, kept in the store unless told otherwise.
            blocks=store if blocks is None else blocks,
        )
        self._discovery = Discovery(self.brands)
        dpop_replay = StoreReplayMemory(store, DPOP_NAMESPACE)
        self._sessions = SessionCheck(
            brands=self.brands,
            store=store,
            clock=clock,
            # The public URLs requests' URLs are rebuilt from (DPoP `htu`), never `Host`.
            origin=f"{parts.scheme}://{parts.netloc}",
            base_url=self.base_url,
            dpop_replay=dpop_replay,
        )
        steps = GrantSteps(
            store=store,
            clock=clock,
            dpop_replay=dpop_replay,
            limiter=RateLimiter(
                token_rate_limit or TOKEN_RATE_LIMIT,
                store=rate_counters,
                namespace="poppy.token",
                key_name="client_id",
            ),
        )
        device = DeviceSignInEndpoint(
            steps=steps,
            limiter=RateLimiter(
                device_rate_limit or DEVICE_RATE_LIMIT,
                store=rate_counters,
                namespace="poppy.device",
                key_name="client_id",
            ),
            audit=audit,
        )
        self._token = TokenEndpoint(steps=steps, device=device)
        self._revocation = PoppyRevocation(store=store, clock=clock)
        self._endpoints: dict[PoppyOperation, _Endpoint] = {
            "token": lambda brand, _, request: self._token.token(brand, request),
            "device": lambda brand, _, request: device.authorize(brand, request),
            "revoke": lambda brand, _, request: self._revocation.endpoint(brand, request),
            "conversation": self._conversation,
            "feedback": self._feedback,
            "operations": self._operation,
        }

    # -- routing -----------------------------------------------------------------------------

    def matches(self, path: str) -> bool:
        """Whether `path` is one of the root documents this server answers (the endpoints
        under `/a2a/` are the Provider's mount anyway)."""
        return path == DISCOVERY_PATH or path.startswith(METADATA_PREFIX + "/")

    def route(self, method: str, path: str) -> PoppyRoute | None:
        """The Poppy route of a request, or None (not a Poppy path, or a wrong method: 404,
        as for every unmatched route). HEAD matches what GET matches (`routed_method`)."""
        method = routed_method(method)
        if path == DISCOVERY_PATH:
            return PoppyRoute("discovery") if method == "GET" else None
        if path.startswith(METADATA_PREFIX + "/"):
            rest = path[len(METADATA_PREFIX) :]
            prefix = f"{self._base_path}/a2a/"
            suffix = f"/{ISSUER_SEGMENT}"
            if method != "GET" or not rest.startswith(prefix) or not rest.endswith(suffix):
                return None
            brand_id = rest[len(prefix) : -len(suffix)]
            return PoppyRoute("metadata", brand_id) if brand_id in self.brands else None
        if not path.startswith("/a2a/"):
            return None
        brand_id, _, rest = path[len("/a2a/") :].partition("/")
        issuer, _, below = rest.partition("/")
        if brand_id not in self.brands or issuer != ISSUER_SEGMENT:
            return None
        if self.conversations is not None and (
            below == CONVERSATIONS_SEGMENT or below.startswith(CONVERSATIONS_SEGMENT + "/")
        ):
            found = conversation_route(method, below[len(CONVERSATIONS_SEGMENT) :])
            return PoppyRoute("conversation", brand_id, found) if found is not None else None
        if below.startswith(OPERATIONS_SEGMENT + "/"):
            request = operation_route(method, below[len(OPERATIONS_SEGMENT) :])
            if request is None or self.operations is None:
                return None
            if brand_id not in self.operations.configs:
                return None
            return PoppyRoute("operations", brand_id, operation_request=request)
        endpoint = _ISSUER_ENDPOINTS.get(below)
        if endpoint is None or endpoint[0] != method:
            return None
        if endpoint[1] == "device" and self.brands[brand_id].sign_in is None:
            return None
        return PoppyRoute(endpoint[1], brand_id)

    def flow(self, route: PoppyRoute, request: Request) -> Flow:
        """Answer a matched route (a flow for the Provider's drivers)."""
        if route.operation == "discovery":
            return self.discovery(request.header("host"))
        assert route.brand_id is not None
        brand = self.brands[route.brand_id]
        if route.operation == "metadata":
            return brand.metadata
        return (
            yield from _in_poppys_words(self._endpoints[route.operation](brand, route, request))
        )

    def _conversation(self, brand: PoppyBrand, route: PoppyRoute, request: Request) -> Flow:
        assert route.conversation is not None
        assert self.conversations is not None
        caller: PoppyCaller = yield from self._own_session(brand.brand_id, request)
        operation, conversation_id = route.conversation
        return (
            yield from self.conversations.flow(
                operation, conversation_id, caller, request, brand.company.issuer
            )
        )

    def _feedback(self, brand: PoppyBrand, route: PoppyRoute, request: Request) -> Flow:
        """§8: feedback from any Session, signed in or out, no scope."""
        reporter = yield from self._own_session(brand.brand_id, request)
        return (yield from self.feedback.flow(reporter))

    def _operation(self, brand: PoppyBrand, route: PoppyRoute, request: Request) -> Flow:
        """Operations v1: read, confirm or cancel one operation, as its owner's Session."""
        assert route.operation_request is not None
        assert self.operations is not None
        owner = yield from self._own_session(brand.brand_id, request)
        kind, operation_id = route.operation_request
        return (yield from self.operations.endpoint.flow(kind, operation_id, owner, request))

    # -- what the Provider and the adapters call ---------------------------------------------

    def discovery(self, host: str | None) -> Response:
        """The `poppy.json` for the request's `Host` (port ignored, case-insensitive); 404
        when no Brand publishes on that host."""
        return self._discovery.discovery(host)

    def brand_discovery(self, brand_id: str, host: str | None) -> Response:
        """One Brand's `poppy.json` for the request's `Host`, which must be one of its
        domains (a document naming another host fails the agent's check, PAP-3.1-02)."""
        return self._discovery.brand_discovery(brand_id, host)

    def session_flow(self, brand_id: str, request: Request, scopes: tuple[str, ...]) -> SubFlow:
        """Check a request to one of the Brand's APIs (§6); the value is a `PoppyCaller`
        (`_session_check.SessionCheck.session_flow` tells the order of the checks)."""
        return _in_poppys_words(self._sessions.session_flow(brand_id, request, scopes))

    def _own_session(self, brand_id: str, request: Request) -> SubFlow:
        """`session_flow` for the Provider's own endpoints (no scope): the proof names their
        URL below `base_url`, the root of the app that serves the Provider."""
        return _in_poppys_words(self._sessions.session_flow(brand_id, request, (), own=True))

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke a grant and sign out its Sessions (blocking); True if it was live."""
        return self._revocation.revoke_grant(grant_id)

    def revoke_account(self, account: str, *, brand_id: str | None = None) -> list[str]:
        """Revoke every live grant of an account and sign out their Sessions (blocking)."""
        return self._revocation.revoke_account(account, brand_id=brand_id)


def _in_poppys_words(flow: Generator[Need, Any, T]) -> Generator[Need, Any, T]:
    """`flow`, with a store that cannot answer turned into Poppy's own "come back shortly":
    an agent reads Poppy's JSON errors, not the bare 503 of the Provider's other routes, and
    the adapters' Poppy decorators answer a `PoppyError` (anything else would be a 500)."""
    try:
        return (yield from flow)
    except StoreUnavailable as exc:
        log_store_outage(logger, exc)
        raise PoppyError(
            503, "temporarily_unavailable", "the store is unavailable", headers=_RETRY_SOON
        ) from None


__all__ = [
    "ASSERTION_NAMESPACE",
    "DPOP_NAMESPACE",
    "METADATA_PREFIX",
    "PoppyOperation",
    "PoppyRoute",
    "PoppyServer",
]
