"""ASGI adapter (Starlette, FastAPI): pure ASGI middleware, an authentication backend,
decorators, and the Provider as an ASGI app. Every rule is the guard's
(`pactmw.provider.guard`); this module only translates.

After the middleware (or a decorator), `request.user` is a `PersonalAgentUser`,
`request.auth.scopes` holds `"authenticated"`, `"personal_agent"` and, with a delegation,
`"delegated"` and one `"scope:<id>"` per granted scope; `current_personal_agent(request)` is
the `PersonalAgent`. FastAPI's dependencies are in `pactmw.adapters.fastapi`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pactmw.adapters._arguments import (
    require_brand_id,
    require_parafe_agent,
    require_provider,
    require_refusal_status,
    require_scope_names,
    require_strings,
    require_verifier_not_optional,
)
from pactmw.adapters._common import (
    UNVERIFIED_DELEGATION,
    GuardedMiddleware,
    ReadersWarnings,
    instance_or_none,
    make_guard,
    record_checker,
    require_framework,
    scope_refusal,
)
from pactmw.adapters._view_checks import (
    PARAFE_UNAVAILABLE,
    delegation_decorator,
    no_parafe_agent,
    poppy_setting,
)

require_framework("starlette", __name__, "Starlette", "asgi")

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response as StarletteResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from pactmw.adapters._asgi_http import (
    Endpoint,
    body_reader,
    mounted_path,
    neutral_request,
    refuse,
    request_body_reader,
    route_path,
    send_response,
    to_starlette,
    wrap_endpoint,
)
from pactmw.adapters._asgi_provider import (
    A2AProviderApp,
    a2a_mount,
    a2a_routes,
    poppy_discovery_route,
)
from pactmw.adapters._asgi_startup import StartupChecked
from pactmw.adapters._starlette_auth import (
    AUTH_SCOPES,
    SCOPE_KEY,
    PersonalAgentAuthError,
    PersonalAgentBackend,
    PersonalAgentUser,
    attach,
    auth_scopes,
    current_personal_agent,
    on_auth_error,
    requires,
    verified,
    verify_once,
)
from pactmw.protocols.identity import IdentityVerifier
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.app import Provider
from pactmw.provider.errors import error_response
from pactmw.provider.guard import (
    GUARD_REFUSALS,
    ParafeAdmitted,
    ParafeEndpoint,
    refusal_response,
)
from pactmw.provider.parafe import REQUEST_KEY as PARAFE_KEY
from pactmw.provider.parafe import ParafeAgent, ParafeTurn
from pactmw.provider.poppy import PoppyCaller, check_session_brand

#: Where `parafe_action` looks for the `ParafeAgent` when none is passed: `app.state.<this>`.
PARAFE_STATE = "pactmw_parafe"
#: Where `poppy_session_required` leaves the `PoppyCaller` in the ASGI scope.
POPPY_KEY = "pactmw.poppy_caller"
#: The ASGI connections the middleware verifies (a lifespan scope is no request).
_GUARDED = frozenset({"http", "websocket"})


class PersonalAgentMiddleware(GuardedMiddleware[ASGIApp], metaclass=StartupChecked):
    """Verify the caller of every HTTP request and WebSocket handshake under `path_prefix`
    (None: none; use the decorators). With `delegation_provider` and `delegation_brand`, an
    `X-A2A-User-Delegation` token for that Brand is verified too; one sent without them is
    refused. The body is never read: a refused request is answered before it arrives.
    With `serves_provider`, the Provider this app serves inside (`a2a_routes`), the
    Provider's paths are its own (its card and consent pages public, its operations
    authenticated by it), as in Flask and Django.
    Constructor: `(app, verifier, *, path_prefix, delegation_provider, delegation_brand,
    serves_provider)`, shared with the WSGI middleware. A wrong argument is a `ConfigError`
    at once, or, where Starlette builds the middleware on the app's first call
    (`Middleware(...)`, `add_middleware(...)`), the app's failed startup naming it
    (`StartupChecked`)."""

    application = "an ASGI application"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A WebSocket under the prefix is guarded too: letting it through would open the
        # prefix to anyone who asks for an upgrade.
        # The path the wrapped app routes on: below `root_path`, which includes any Mount
        # this app is served under.
        if scope["type"] in _GUARDED and self.guard.protects(path := mounted_path(scope)):
            try:
                caller = await self.guard.aauthenticate(neutral_request(scope))
            except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
                self.refused(scope.get("method", "GET"), path)
                await refuse(scope, to_starlette(refusal_response(exc)), receive, send)
                return
            assert caller is not None
            attach(scope, caller)
            record_checker(scope, self.guard)
        await self.app(scope, receive, send)


def personal_agent_required(
    verifier: IdentityVerifier,
    *,
    delegation_provider: Provider | None = None,
    delegation_brand: str | None = None,
    optional: bool = False,
) -> Callable[[Endpoint], Endpoint]:
    """Decorate a Starlette/FastAPI endpoint (sync or async) so it needs a personal agent,
    checked exactly as the middleware does (identity, then a delegation when one is sent).
    Uses the caller the middleware already verified when there is one. With `optional`, a
    request without a personal agent's credential runs too (`current_personal_agent` is
    None; the app's other schemes count as none); a personal agent's token is still checked."""
    require_verifier_not_optional(
        verifier, "personal_agent_required", "@personal_agent_required(verifier, optional=True)"
    )
    guard = make_guard(verifier, delegation_provider, delegation_brand)

    async def around(request: HTTPConnection, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            await verify_once(request, guard, optional)
        except GUARD_REFUSALS as exc:
            return to_starlette(refusal_response(exc))
        return await call()

    return lambda endpoint: wrap_endpoint(endpoint, around)


def delegation_required(*scopes: str) -> Callable[[Endpoint], Endpoint]:
    """Decorate an endpoint behind the middleware (or `personal_agent_required`) so it needs
    a delegation with `scopes`: none is 401 `invalid_token`, missing scopes 403. On a
    request nothing verified, or verified for a Brand that does not offer one of `scopes`,
    every caller is refused: said once per endpoint in the log."""

    require_strings(
        scopes, "delegation_required", "the scopes to require", "orders:read", scopes=True
    )

    def decorate(endpoint: Endpoint) -> Endpoint:
        # The Brand is the one of the guard that verified the caller (a middleware's, the
        # backend's or `personal_agent_required`'s), which it recorded beside it: this
        # decorator has no guard of its own.
        warnings = ReadersWarnings(
            UNVERIFIED_DELEGATION, "delegation_required()", delegation_decorator(scopes)
        )

        async def around(request: HTTPConnection, call: Callable[[], Awaitable[Any]]) -> Any:
            warnings(request.scope, verified(request), request.url.path, scopes)
            refusal = scope_refusal(current_personal_agent(request), scopes)
            if refusal is not None:
                return to_starlette(refusal)
            return await call()

        return wrap_endpoint(endpoint, around)

    return decorate


def parafe_action(
    action: str, agent: ParafeAgent | None = None, *, refusal_status: int = 403
) -> Callable[[Endpoint], Endpoint]:
    """Decorate a Starlette/FastAPI endpoint so it performs `action` only with Parafé consent
    (`pactmw.provider.guard.ParafeEndpoint`: body read to 1 MiB, then 413; consent; the
    refusal reply). The endpoint runs with `current_parafe(request)` and can read the body
    again; a JSON A2A message it returns gets the signed receipts. `agent` defaults to
    `app.state.pactmw_parafe`. An action that is no string, or an agent that is no
    `ParafeAgent`, is a `ConfigError` here, where the endpoint is decorated; with neither,
    each request is a 503, said once at ERROR."""
    require_strings([action], "parafe_action", "the action to perform", "create_order")
    require_refusal_status(refusal_status, "parafe_action", "refusal_status", lowest=200)
    if agent is not None:
        require_parafe_agent(agent, "parafe_action(action, agent=...)")

    def decorate(view: Endpoint) -> Endpoint:
        # Said once an endpoint: each endpoint it decorates has its own.
        no_agent = no_parafe_agent(action, f"app.state.{PARAFE_STATE}")

        async def around(request: HTTPConnection, call: Callable[[], Awaitable[Any]]) -> Any:
            if not isinstance(request, Request):
                raise TypeError("parafe_action is for HTTP endpoints: a consent rides on a body")
            parafe = agent or getattr(request.app.state, PARAFE_STATE, None)
            if not isinstance(parafe, ParafeAgent):
                no_agent(request.url.path)
                return to_starlette(PARAFE_UNAVAILABLE)
            endpoint = ParafeEndpoint(parafe, action, refusal_status)
            admitted = await endpoint.aadmit(request_body_reader(request))
            if not isinstance(admitted, ParafeAdmitted):
                return to_starlette(admitted)
            request.scope[PARAFE_KEY] = admitted.turn
            response = await call()
            body = getattr(response, "body", None)  # a StreamingResponse has none
            if isinstance(response, StarletteResponse) and isinstance(body, (bytes, memoryview)):
                content_type = response.headers.get("content-type")
                updated = endpoint.finish(
                    admitted.turn, bytes(body), content_type, response.status_code
                )
                if updated is not None:
                    response.body = updated
                    response.headers["content-length"] = str(len(updated))
                    extensions = response.headers.get("a2a-extensions")
                    response.headers["a2a-extensions"] = endpoint.reply_extensions(extensions)
            else:
                endpoint.finish(admitted.turn, None, None, getattr(response, "status_code", None))
            return response

        return wrap_endpoint(view, around)

    return decorate


def poppy_session_required(
    provider: Provider, brand_id: str, *scopes: str
) -> Callable[[Endpoint], Endpoint]:
    """Decorate a Starlette/FastAPI endpoint of one of the Brand's APIs so it needs a Poppy
    Session Token with its DPoP proof, signed in with `scopes` when any are named (the rules
    are `Provider.poppy_session`'s). The endpoint runs with `current_poppy_caller(request)`;
    a refusal is Poppy's JSON error with its `WWW-Authenticate: DPoP` challenge. A Brand
    that is not one of the Provider's or has no Poppy is a `ConfigError` here, at startup, as
    is a scope that is no string."""
    written = "poppy_session_required(provider, brand_id, *scopes)"
    require_provider(provider, written)
    require_brand_id(brand_id, written)
    require_scope_names(scopes, written)
    check_session_brand(provider.brands.values(), brand_id, poppy_setting(brand_id))

    async def around(request: HTTPConnection, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            caller = await provider.apoppy_session(
                brand_id, neutral_request(request.scope), tuple(scopes)
            )
        except PoppyError as exc:
            return to_starlette(error_response(exc))
        request.scope[POPPY_KEY] = caller
        return await call()

    return lambda endpoint: wrap_endpoint(endpoint, around)


def current_poppy_caller(conn: HTTPConnection) -> PoppyCaller | None:
    """The Poppy caller of a request behind `poppy_session_required` (None elsewhere)."""
    return instance_or_none(conn.scope.get(POPPY_KEY), PoppyCaller)


def current_parafe(conn: HTTPConnection) -> ParafeTurn | None:
    """The Parafé turn of a request behind `parafe_action` (`.consent`, `.complete`)."""
    return instance_or_none(conn.scope.get(PARAFE_KEY), ParafeTurn)


__all__ = [
    "AUTH_SCOPES",
    "PARAFE_STATE",
    "POPPY_KEY",
    "SCOPE_KEY",
    "A2AProviderApp",
    "PersonalAgentAuthError",
    "PersonalAgentBackend",
    "PersonalAgentMiddleware",
    "PersonalAgentUser",
    "a2a_mount",
    "a2a_routes",
    "attach",
    "auth_scopes",
    "body_reader",
    "current_parafe",
    "current_personal_agent",
    "current_poppy_caller",
    "delegation_required",
    "neutral_request",
    "on_auth_error",
    "parafe_action",
    "personal_agent_required",
    "poppy_discovery_route",
    "poppy_session_required",
    "requires",
    "route_path",
    "send_response",
    "to_starlette",
]
