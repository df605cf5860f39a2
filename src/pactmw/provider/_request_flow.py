"""One request to a Provider's routes, as a flow (`Provider.handle`/`ahandle` drive it).

Processing order (pact-provider.md §2.1): Poppy's routes when a Brand enables Poppy; then
route match (404, no body, before any authentication), the Agent Card and the public OAuth
routes (no authentication), the personal-agent JWT (401), the Brand lookup (404), the
delegation token when one is sent, rate limits (429), then the operation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pactmw.core.errors import A2AError, RequestRefused
from pactmw.core.http import Request, Response
from pactmw.protocols.identity import PersonalAgent
from pactmw.protocols.parafe import EXTENSION_URI, is_activated
from pactmw.provider._delegation_check import checked_delegation
from pactmw.provider._oauth_routes import agent_oauth_flow, public_oauth_flow
from pactmw.provider._send import MessageSender
from pactmw.provider.a2a import ok
from pactmw.provider.brand import Brand
from pactmw.provider.delegated import AuthorizationServer
from pactmw.provider.errors import error_response
from pactmw.provider.flow import Flow, NeedBody, NeedIdentity
from pactmw.provider.messages import parse_page_size, parse_send_message
from pactmw.provider.parafe import ParafeAgent
from pactmw.provider.poppy import PoppyServer
from pactmw.provider.ratelimit import RateLimiter
from pactmw.provider.routes import (
    DELEGATED_OPERATIONS,
    PUBLIC_DOCUMENTS,
    PUBLIC_OPERATIONS,
    ROUTE_METHODS,
    Route,
    Routes,
    options_response,
)
from pactmw.store.base import StoreUnavailable

__all__ = [
    "RequestFlow",
]

#: The endpoints an agent calls as an OAuth client (RFC 8628): it reads their errors as
#: RFC 6749 bodies.
_AGENT_OAUTH = frozenset({"oauth_device_authorization", "oauth_token"})


@attrs.frozen
class RequestFlow:
    """The parts of one Provider a request goes through (None: no Brand offers that part);
    `Provider` builds it once."""

    brands: Mapping[str, Brand]
    #: The A2A routes, with the Brands' own remembered.
    routes: Routes
    #: Each Brand's Agent Card, rendered once (cards are static per Brand).
    cards: Mapping[str, Response]
    oauth: AuthorizationServer | None
    poppy: PoppyServer | None
    parafe: Mapping[str, ParafeAgent]
    rate_limiter: RateLimiter
    sender: MessageSender
    max_body_bytes: int
    clock: Callable[[], float]

    def flow(self, request: Request) -> Flow:
        """Answer `request`: the flow the drivers run."""
        if request.method == "OPTIONS":
            return self.options(request.path)
        if self.poppy is not None:
            poppy_route = self.poppy.route(request.method, request.path)
            if poppy_route is not None:
                return (yield from self.poppy.flow(poppy_route, request))
        route = self.routes.match(request.method, request.path)
        if route is None:
            raise RequestRefused(404)
        brand = self.brands.get(route.brand_id)
        if route.operation in PUBLIC_OPERATIONS:
            if brand is None:
                raise RequestRefused(404)
            if route.operation == "card":
                return self.cards[brand.id]
            return (yield from public_oauth_flow(self.oauth, route, brand, request))
        caller: PersonalAgent = yield NeedIdentity(request.header("authorization"), route.brand_id)
        if brand is None:
            raise RequestRefused(404)
        delegation_header = request.delegation_token()
        if delegation_header is not None:
            delegation = yield from checked_delegation(
                self.oauth, brand, caller, delegation_header, brand_id=brand.id
            )
            caller = attrs.evolve(caller, delegation=delegation)
        if self.rate_limiter.limit.enabled:  # no flow to run when nothing is limited
            wait = yield from self.rate_limiter.admit(caller.issuer, caller.sub, self.clock())
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
            response = yield from self.sender.send(brand, caller, message, parafe, activated)
            # An agent that processed Parafé data says so in the response (spec §3).
            return _with_extension(response) if activated else response
        if route.operation in _AGENT_OAUTH:
            return (yield from agent_oauth_flow(self.oauth, route, brand, caller, request))
        if parafe is not None:
            _check_activation(parafe, activated)
        return _simple_operation(route, request)

    def options(self, path: str) -> Response:
        """The answer to OPTIONS on `path`, from the routes of both routers (before any
        authentication, as routing is): 204 with `Allow`, a CORS preflight's answer on a public
        document; 404 where no route serves the path (as GET there would)."""
        methods: list[str] = []
        public = False
        for method in ROUTE_METHODS:
            poppy_route = self.poppy.route(method, path) if self.poppy is not None else None
            if poppy_route is not None:
                methods.append(method)
                public = public or poppy_route.operation in ("discovery", "metadata")
                continue
            route = self.routes.match(method, path)
            if route is not None and self._served(route, method):
                methods.append(method)
                public = public or route.operation in PUBLIC_DOCUMENTS
        if not methods:
            raise RequestRefused(404)
        return options_response(methods, public=public)

    def _served(self, route: Route, method: str) -> bool:
        """Whether a matched route has a Brand to answer `method` on it: not an unknown
        Brand's, nor the authorization server's of a Brand that offers none (those are 404),
        nor a POST to a same-app Brand's consent page (a 405: only brand mode posts its
        sign-in there)."""
        brand = self.brands.get(route.brand_id)
        if brand is None:
            return False
        if route.operation not in DELEGATED_OPERATIONS:
            return True
        if brand.delegation is None or self.oauth is None:
            return False
        return not (route.operation == "consent" and method == "POST") or (
            brand.delegation.mode == "brand"
        )

    def error(self, request: Request, exc: BaseException) -> Response:
        """The answer to what `flow(request)` raised (`error_response`'s).

        A store outage on an agent's OAuth endpoint is answered with the RFC 6749 body its
        client reads, whichever step met it: the agent's runtime switch (read while the
        identity is checked, in the async driver even after the flow has answered), the
        shared rate limits, or the endpoint's own store calls.
        """
        oauth = False
        if isinstance(exc, StoreUnavailable):
            route = self.routes.match(request.method, request.path)
            oauth = route is not None and route.operation in _AGENT_OAUTH
        return error_response(exc, oauth=oauth)


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
