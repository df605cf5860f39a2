"""The Provider as an ASGI app: at the site root around the host app, or mounted inside it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import HTTPConnection
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response as StarletteResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from pactmw.adapters._arguments import (
    require_brand_id,
    require_current_user,
    require_provider,
    require_provider_app,
)
from pactmw.adapters._asgi_http import (
    body_reader,
    neutral_request,
    provider_path,
    refuse,
    send_response,
    to_starlette,
)
from pactmw.adapters._asgi_startup import StartupChecked
from pactmw.adapters._common import NOT_FOUND, Once
from pactmw.protocols.poppy import DISCOVERY_PATH
from pactmw.provider.app import Provider, warn_if_signed_in_user_unknown
from pactmw.provider.flow import HostAppUnready
from pactmw.provider.poppy import METADATA_PREFIX, check_session_brand
from pactmw.provider.routes import MOUNT

#: What a missing `current_user` is reported as (`warn_if_signed_in_user_unknown`).
_CURRENT_USER = "A2AProviderApp's, a2a_routes' or a2a_mount's current_user"

_Routed = TypeVar("_Routed", Mount, Route)

#: What Starlette middleware sets each attribute of a connection `current_user` may read.
_SET_BY = {
    "session": ("SessionMiddleware", "secret_key=..."),
    "user": ("AuthenticationMiddleware", "backend=..."),
    "auth": ("AuthenticationMiddleware", "backend=..."),
}

#: The path of the `Mount` that `a2a_routes` and `a2a_mount` put the Provider at.
_MOUNT = MOUNT.rstrip("/")


class A2AProviderApp(metaclass=StartupChecked):
    """Serve a `Provider` as an ASGI app; other paths go to `app` (or get 404).

    Two ways to run it:

    * around the host app, at the site root: `A2AProviderApp(provider, app=web)`;
    * inside the host app, so that its middleware (sessions, authentication) runs before
      the consent pages: `Starlette(routes=[..., *a2a_routes(provider, current_user=...)],
      middleware=[...])`. Use this when `current_user` reads `request.session` or
      `request.user`: around the host app, that middleware has not run yet.

    The Provider authenticates its own routes in the protocol's order, so do not put
    `PersonalAgentMiddleware` on them: inside the app, give the middleware
    `serves_provider=provider`, which leaves the Provider's paths to it.
    """

    def __init__(
        self,
        provider: Provider,
        app: ASGIApp | None = None,
        *,
        current_user: Callable[[HTTPConnection], Any] | None = None,
    ) -> None:
        """`current_user(connection)` returns the host app's signed-in `SignedInUser` (or an
        awaitable of it), or None; only same-app consent pages call it."""
        require_provider_app(provider, app, current_user, "an ASGI application")
        self.provider = provider
        self.app = app
        self.current_user = current_user
        #: The causes `HostAppUnready` already logged for this app (each said once).
        self._said: dict[str, Once] = {}
        if current_user is None:
            warn_if_signed_in_user_unknown(provider, _CURRENT_USER)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = provider_path(scope, _MOUNT) if scope["type"] == "http" else ""
        if scope["type"] == "http" and self.provider.matches(scope["method"], path):
            resolve = self.current_user
            said, around = self._said, self.app is not None
            user = (
                None if resolve is None else (lambda: resolve(_HostConnection(scope, around, said)))
            )
            response = await self.provider.ahandle(
                neutral_request(scope, path), body_reader(scope, receive), user
            )
            await send_response(response, send)
        elif self.app is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] in ("http", "websocket"):
            # PACT has no WebSocket: a handshake is refused as an unknown route is (without
            # the denial extension, closed unaccepted: 403), never left unanswered (a 500).
            await refuse(scope, to_starlette(NOT_FOUND), receive, send)


class _HostConnection(HTTPConnection):
    """The connection `current_user` gets: Starlette's, except that reading what a missing
    middleware sets (`request.session` without `SessionMiddleware`) raises `HostAppUnready`
    naming that middleware, in place of Starlette's bare `AssertionError` (a 500 page, and a
    log that could only guess the cause). Found where it is read, never guessed from the
    app's `user_middleware`: a session may come from a middleware around the app, the site's
    that mounts it, or another library's, and a `current_user` may read a cookie instead."""

    def __init__(self, scope: Scope, around: bool, said: dict[str, Once]) -> None:
        super().__init__(scope)
        #: Whether the Provider runs around the host app (`A2AProviderApp(provider, app=...)`),
        #: before any of its middleware, rather than inside it (`a2a_routes`, `a2a_mount`).
        self._around = around
        self._said = said

    @property
    def session(self) -> dict[str, Any]:
        self._require("session")
        return super().session

    @property
    def user(self) -> Any:
        self._require("user")
        return super().user

    @property
    def auth(self) -> Any:
        self._require("auth")
        return super().auth

    def _require(self, key: str) -> None:
        if key in self.scope:
            return
        middleware, arguments = _SET_BY[key]
        read = f"current_user reads request.{key}, which Starlette's {middleware} sets"
        if self._around:
            message = (
                f"{read}, but A2AProviderApp(provider, app=...) runs before the app's "
                f"middleware: serve the Provider inside the app, after its {middleware}, "
                "with a2a_routes(provider, current_user=...)"
            )
        else:
            message = (
                f"{read}, and the app serving the Provider runs none: add "
                f"Middleware({middleware}, {arguments}) to its middleware (FastAPI: "
                f"app.add_middleware({middleware}, {arguments}))"
            )
        # `setdefault` is atomic under the GIL: concurrent first requests share one `Once`.
        first = self._said.setdefault(message, Once()).first()
        raise HostAppUnready(message, said_before=not first)


def a2a_routes(
    provider: Provider, *, current_user: Callable[[HTTPConnection], Any] | None = None
) -> list[BaseRoute]:
    """The Provider's routes inside the host app, in one step: every path it serves at the
    site root, as Django's `a2a_urlpatterns()` and the Flask extension serve them.

    `Starlette(routes=[..., *a2a_routes(provider, current_user=...)])`, or with FastAPI
    `app.router.routes.extend(a2a_routes(provider, current_user=...))`: `/a2a/...` and, when
    a Brand enables Poppy, `/.well-known/poppy.json` and the issuers' RFC 8414 metadata under
    `/.well-known/oauth-authorization-server/`. Only those: the app's other `/.well-known/`
    documents stay its own, wherever they are listed.
    """
    require_provider(provider, "a2a_routes(provider, current_user=...)")
    require_current_user(current_user, "a2a_routes(provider, current_user=...)")
    # One app for every route, so a missing `current_user` is reported once.
    app = A2AProviderApp(provider, current_user=current_user)
    routes: list[BaseRoute] = [_provider_mount(app, name="pactmw-a2a")]
    if provider.poppy is not None:
        # Routes to an ASGI app take every method: the Provider answers each as it does at the
        # site root (HEAD as GET, OPTIONS, a bare 404 for others), never Starlette's 405.
        metadata = Route(METADATA_PREFIX + "/{rest:path}", app, name="pactmw-poppy-metadata")
        routes += [Route(DISCOVERY_PATH, app, name="pactmw-poppy"), _every_path(metadata)]
    return routes


def a2a_mount(
    provider: Provider, *, current_user: Callable[[HTTPConnection], Any] | None = None
) -> Mount:
    """A Starlette `Mount` of the Provider at `/a2a` only, for the host app's `routes`.

    Without Poppy's documents at the site root (`/.well-known/poppy.json`, the issuers'
    metadata): `a2a_routes` adds those too, and is the one to use for a Brand with Poppy.
    """
    require_provider(provider, "a2a_mount(provider, current_user=...)")
    require_current_user(current_user, "a2a_mount(provider, current_user=...)")
    return _provider_mount(A2AProviderApp(provider, current_user=current_user))


def _provider_mount(app: A2AProviderApp, name: str | None = None) -> Mount:
    """The Starlette `Mount` of the Provider at `/a2a`, for `a2a_routes` and `a2a_mount`."""
    return _every_path(Mount(_MOUNT, app=app, name=name))


def _every_path(route: _Routed) -> _Routed:
    """`route` matching every path under its `{...:path}` parameter, a decoded newline too.

    Starlette compiles a route's pattern without `re.DOTALL`, so the path convertor's `.*`
    stops at a newline (`%0A` in the URL): `/a2a/acme/tasks/a%0Ab` fell through to the host
    app's 404 where the Provider answers (its A2A error, OPTIONS' 204), as it does on every
    other adapter. Only the flags change: the same pattern, built by Starlette from the same
    path, so its parameters, `url_path_for` and the child scope are untouched.
    """
    route.path_regex = re.compile(route.path_regex.pattern, route.path_regex.flags | re.DOTALL)
    return route


def poppy_discovery_route(provider: Provider, brand_id: str) -> Route:
    """A Starlette `Route` serving a Brand's `/.well-known/poppy.json` on its own site (the
    document itself, chosen by `Host` among the Brand's `poppy.domains`; never a redirect).

    Not needed where `A2AProviderApp` is at the site root: it answers that path already.
    A `ConfigError` now when the Brand does not enable Poppy.
    """
    require_provider(provider, "poppy_discovery_route(provider, brand_id)")
    require_brand_id(brand_id, "poppy_discovery_route(provider, brand_id)")
    check_session_brand(
        provider.brands.values(), brand_id, f"poppy_discovery_route(provider, {brand_id!r})"
    )

    async def endpoint(request: StarletteRequest) -> StarletteResponse:
        host = request.headers.get("host")
        return to_starlette(provider.poppy_discovery(brand_id, host, request.method))

    # OPTIONS too: the Provider answers it (204, `Allow`, the CORS preflight), Starlette a 405.
    methods = ["GET", "OPTIONS"]
    return Route(DISCOVERY_PATH, endpoint, methods=methods, name=f"poppy-discovery-{brand_id}")


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


__all__ = [
    "A2AProviderApp",
    "a2a_mount",
    "a2a_routes",
    "poppy_discovery_route",
]
