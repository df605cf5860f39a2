"""ASGI adapter: pure ASGI middleware, a Starlette authentication backend, a view decorator.

The middleware is a plain ASGI callable (not `BaseHTTPMiddleware`), so it streams, keeps
context variables and never reads the request body: a refused request is answered before
any of it is received. After it, `request.user` is a `PersonalAgentUser`, `request.auth.scopes`
contains `"authenticated"` and `"personal_agent"`, and `scope["pactmw.personal_agent"]` holds
the `PersonalAgent`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response as StarletteResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from pactmw.config import in_protected_path
from pactmw.core.encoding import is_ascii_digits
from pactmw.core.errors import AuthenticationFailed, RequestRefused
from pactmw.core.http import Request as NeutralRequest
from pactmw.core.http import Response, asgi_header, challenge, insufficient_scope
from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider.app import Provider, awith_delegation, missing_scopes
from pactmw.provider.parafe import (
    REQUEST_KEY as PARAFE_KEY,
)
from pactmw.provider.parafe import (
    ParafeAgent,
    ParafeRefused,
    ParafeTurn,
    body_too_large,
    endpoint_message,
)

SCOPE_KEY = "pactmw.personal_agent"
AUTH_SCOPES = ("authenticated", "personal_agent")


class PersonalAgentUser(BaseUser):
    """Starlette's view of a verified personal agent.

    `identity` and `display_name` are the stable `actor_id`: the A2A SDK and other Starlette
    code key ownership on `display_name`, so it must not collide between agents.
    """

    def __init__(self, personal_agent: PersonalAgent) -> None:
        self.personal_agent = personal_agent

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.personal_agent.actor_id

    @property
    def identity(self) -> str:
        return self.personal_agent.actor_id


def auth_scopes(personal_agent: PersonalAgent) -> list[str]:
    """`authenticated`, `personal_agent`, and with a delegation `delegated` plus one
    `scope:<id>` per granted scope (prefixed, so a scope never poses as an app role)."""
    scopes = list(AUTH_SCOPES)
    if personal_agent.delegation is not None:
        scopes.append("delegated")
        scopes.extend(f"scope:{scope}" for scope in sorted(personal_agent.delegation.scopes))
    return scopes


def attach(scope: Scope, personal_agent: PersonalAgent) -> None:
    """Put the verified caller where Starlette users and the A2A SDK look for it."""
    scope[SCOPE_KEY] = personal_agent
    scope["user"] = PersonalAgentUser(personal_agent)
    scope["auth"] = AuthCredentials(auth_scopes(personal_agent))


async def send_response(response: Response, send: Send) -> None:
    """Send a neutral `Response` over ASGI."""
    await send(
        {
            "type": "http.response.start",
            "status": response.status,
            "headers": [
                (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers
            ],
        }
    )
    await send({"type": "http.response.body", "body": response.body})


def to_starlette(response: Response) -> StarletteResponse:
    """A neutral `Response` as a Starlette response (headers kept exactly)."""
    result = StarletteResponse(content=response.body, status_code=response.status)
    result.raw_headers = [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers
    ]
    return result


class PersonalAgentMiddleware:
    """Verify the personal-agent JWT on every HTTP request under `path_prefix`.

    `path_prefix=None` guards nothing (use `personal_agent_required` on single endpoints).
    With `delegation_provider` and `delegation_brand`, an `X-A2A-User-Delegation` token for
    that Brand is verified too and its scopes appear as `scope:<id>` in `request.auth.scopes`.
    """

    def __init__(
        self,
        app: ASGIApp,
        verifier: IdentityVerifier,
        *,
        path_prefix: str | None = "/a2a/",
        delegation_provider: Provider | None = None,
        delegation_brand: str | None = None,
    ) -> None:
        self.app = app
        self.verifier = verifier
        self.path_prefix = path_prefix
        self.delegation_provider = delegation_provider
        self.delegation_brand = delegation_brand

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not in_protected_path(scope["path"], self.path_prefix):
            await self.app(scope, receive, send)
            return
        try:
            personal_agent = await self.verifier.averify(
                asgi_header(scope["headers"], b"authorization")
            )
            personal_agent = await awith_delegation(
                self.delegation_provider,
                self.delegation_brand,
                personal_agent,
                _delegation_header(scope),
            )
        except AuthenticationFailed as exc:
            await send_response(challenge(exc), send)
            return
        attach(scope, personal_agent)
        await self.app(scope, receive, send)


def _delegation_header(scope: Scope) -> str | None:
    values = [v for k, v in scope["headers"] if k.lower() == b"x-a2a-user-delegation"]
    if not values:
        return None
    # Repeated: ambiguous, so treated as a malformed token rather than picking one.
    return values[0].decode("latin-1") if len(values) == 1 else ""


class PersonalAgentAuthError(AuthenticationError):
    """Carries the `AuthenticationFailed` through Starlette's `AuthenticationMiddleware`."""

    def __init__(self, failure: AuthenticationFailed) -> None:
        super().__init__(failure.reason)
        self.failure = failure


class PersonalAgentBackend(AuthenticationBackend):
    """For Starlette's `AuthenticationMiddleware` when an app mixes several auth schemes.

    A request without `Authorization` stays anonymous (Starlette's convention); a bad token is
    an error. Pass `on_error=on_auth_error` to answer it with the PACT 401 challenge (Starlette's
    default answers 400).
    """

    def __init__(self, verifier: IdentityVerifier) -> None:
        self.verifier = verifier

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        authorization = asgi_header(conn.scope["headers"], b"authorization")
        if authorization is None:
            return None
        try:
            personal_agent = await self.verifier.averify(authorization)
        except AuthenticationFailed as exc:
            raise PersonalAgentAuthError(exc) from exc
        conn.scope[SCOPE_KEY] = personal_agent
        return AuthCredentials(list(AUTH_SCOPES)), PersonalAgentUser(personal_agent)


def on_auth_error(conn: HTTPConnection, exc: AuthenticationError) -> StarletteResponse:
    """`AuthenticationMiddleware(on_error=...)` that answers with the PACT challenge."""
    failure = (
        exc.failure if isinstance(exc, PersonalAgentAuthError) else AuthenticationFailed("refused")
    )
    return to_starlette(challenge(failure))


Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Any]])


def personal_agent_required(verifier: IdentityVerifier) -> Callable[[Endpoint], Endpoint]:
    """Decorate an async Starlette/FastAPI endpoint taking `request` so it needs a personal agent.

    Uses the caller already verified by the middleware when there is one.
    """

    def decorate(endpoint: Endpoint) -> Endpoint:
        @functools.wraps(endpoint)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            request = kwargs.get("request")
            if request is None:
                request = next(a for a in args if isinstance(a, Request))
            if SCOPE_KEY not in request.scope:
                try:
                    personal_agent = await verifier.averify(
                        asgi_header(request.scope["headers"], b"authorization")
                    )
                except AuthenticationFailed as exc:
                    return to_starlette(challenge(exc))
                attach(request.scope, personal_agent)
            return await endpoint(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def delegation_required(*scopes: str) -> Callable[[Endpoint], Endpoint]:
    """Decorate an endpoint behind the middleware so it needs a delegation with `scopes`.

    No delegation: 401 `error="invalid_token"`; missing scopes: 403 `insufficient_scope`.
    """

    def decorate(endpoint: Endpoint) -> Endpoint:
        @functools.wraps(endpoint)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            request = kwargs.get("request")
            if request is None:
                request = next(a for a in args if isinstance(a, HTTPConnection))
            missing = missing_scopes(current_personal_agent(request), scopes)
            if missing is None:
                return to_starlette(challenge(DelegationRejected("required")))
            if missing:
                return to_starlette(insufficient_scope(missing))
            return await endpoint(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


#: Where `parafe_action` looks for the `ParafeAgent` when none is passed: `app.state.<this>`.
PARAFE_STATE = "pactmw_parafe"


def parafe_action(
    action: str, agent: ParafeAgent | None = None, *, refusal_status: int = 403
) -> Callable[[Endpoint], Endpoint]:
    """Decorate an async Starlette/FastAPI endpoint taking `request` so it performs `action`
    only with Parafé consent: the JSON body is an A2A message (or `{"message": ...}`) whose
    consent must permit `action` (token, proof, replay; parafe-verifier.md §4).

    On success the endpoint runs with `current_parafe(request)` (its `.consent`, and
    `.complete(action, business_ref=...)`), and a JSON A2A message it returns gets the signed
    receipt. A refusal is answered with `refusal_status` and an A2A-shaped message carrying
    the Parafé error and the refusal receipt. `agent` defaults to `app.state.pactmw_parafe`.
    """

    def decorate(endpoint: Endpoint) -> Endpoint:
        @functools.wraps(endpoint)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            request = kwargs.get("request")
            if request is None:
                request = next(a for a in args if isinstance(a, Request))
            parafe = agent or getattr(request.app.state, PARAFE_STATE, None)
            if not isinstance(parafe, ParafeAgent):
                raise RuntimeError(f"parafe_action needs agent=... or app.state.{PARAFE_STATE}")
            body = await _bounded_body(request)
            if body is None:
                return StarletteResponse(status_code=413)
            turn = parafe.turn(endpoint_message(body))
            try:
                await turn.arequire(action)
            except ParafeRefused as refused:
                return to_starlette(parafe.refusal_response(refused, refusal_status))
            request.scope[PARAFE_KEY] = turn
            response = await endpoint(*args, **kwargs)
            body = getattr(response, "body", None)
            content_type = (
                response.headers.get("content-type")
                if isinstance(response, StarletteResponse)
                else None
            )
            updated = parafe.finish(turn, body if isinstance(body, bytes) else b"", content_type)
            if updated is not None and isinstance(response, StarletteResponse):
                response.body = updated
                response.headers["content-length"] = str(len(updated))
            return response

        return wrapper  # type: ignore[return-value]

    return decorate


async def _bounded_body(request: Request, limit: int = 1024 * 1024) -> bytes | None:
    """The body, read at most `limit` bytes far (None beyond), and kept for the endpoint."""
    if body_too_large(request.headers.get("content-length"), limit):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    body = b"".join(chunks)
    request._body = body  # what `request.body()` caches: the endpoint can read it again
    return body


def current_parafe(conn: HTTPConnection) -> ParafeTurn | None:
    """The Parafé turn of a request behind `parafe_action` (`.consent`, `.complete`)."""
    found = conn.scope.get(PARAFE_KEY)
    return found if isinstance(found, ParafeTurn) else None


def current_personal_agent(conn: HTTPConnection) -> PersonalAgent | None:
    """The verified caller of this request, or None."""
    found = conn.scope.get(SCOPE_KEY)
    return found if isinstance(found, PersonalAgent) else None


def route_path(scope: Scope) -> str:
    """The request path below the mount point (Starlette keeps the full path in `path`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def neutral_request(scope: Scope) -> NeutralRequest:
    """An ASGI HTTP scope as the neutral `Request`."""
    client = scope.get("client")
    return NeutralRequest(
        method=scope["method"],
        path=route_path(scope),
        query=scope.get("query_string", b"").decode("latin-1"),
        headers=tuple(
            (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]
        ),
        client=client[0] if client else None,
    )


def body_reader(scope: Scope, receive: Receive) -> Callable[[int], Awaitable[bytes | None]]:
    """Read the request body on demand, refusing (None) anything longer than `limit`."""

    async def read(limit: int) -> bytes | None:
        declared = asgi_header(scope["headers"], b"content-length")
        if declared is not None and is_ascii_digits(declared) and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise RequestRefused(400)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    return read


class A2AProviderApp:
    """Serve a `Provider` as an ASGI app; other paths go to `app` (or get 404).

    Mount it at the site root (the Provider's routes are `/a2a/{brand}/...`), for example
    `app = A2AProviderApp(provider, app=your_starlette_app)`. The Provider authenticates its
    own routes, in the protocol's order, so do not put `PersonalAgentMiddleware` on `/a2a/`.
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
        self.provider = provider
        self.app = app
        self.current_user = current_user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.provider.matches(scope["method"], route_path(scope)):
            resolve = self.current_user
            user = None if resolve is None else (lambda: resolve(HTTPConnection(scope)))
            response = await self.provider.ahandle(
                neutral_request(scope), body_reader(scope, receive), user
            )
            await send_response(response, send)
        elif self.app is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] == "http":
            await send_response(Response(status=404, headers=(("Content-Length", "0"),)), send)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
