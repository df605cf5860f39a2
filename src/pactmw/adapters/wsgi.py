"""WSGI adapter (Werkzeug): middleware that guards a path prefix, decorators, and the
Provider as a WSGI app. Every rule is the guard's (`pactmw.provider.guard`); this module
only translates.

The verified caller is put in `environ["pactmw.personal_agent"]` (`current_personal_agent`).
A refused request is answered before the application runs, without reading the body.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pactmw.adapters._arguments import (
    require_brand_id,
    require_parafe_agent,
    require_provider,
    require_provider_app,
    require_refusal_status,
    require_scope_names,
    require_strings,
    require_verifier_not_optional,
)
from pactmw.adapters._common import (
    NOT_FOUND,
    UNVERIFIED_DELEGATION,
    GuardedMiddleware,
    ReadersWarnings,
    instance_or_none,
    make_guard,
    record_checker,
    require_framework,
    scope_refusal,
)
from pactmw.adapters._view_checks import delegation_decorator, poppy_setting

require_framework("werkzeug", __name__, "Werkzeug", "wsgi")

from pactmw.adapters._wsgi_http import (
    body_reader,
    neutral_request,
    respond,
    to_werkzeug,
    wsgi_path,
)
from pactmw.core.http import Response
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.app import Provider, warn_if_signed_in_user_unknown
from pactmw.provider.delegated import SignedInUser
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

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

ENVIRON_KEY = "pactmw.personal_agent"
#: Where `poppy_session_required` leaves the `PoppyCaller` in the WSGI environ.
POPPY_ENVIRON_KEY = "pactmw.poppy_caller"
WSGIView = Callable[..., Any]


class PersonalAgentMiddleware(GuardedMiddleware["WSGIApplication"]):
    """Verify the caller of every request whose `PATH_INFO` is under `path_prefix`.

    Apply as `app.wsgi_app = PersonalAgentMiddleware(app.wsgi_app, verifier)` in Flask, or
    around any WSGI application. With `delegation_provider` and `delegation_brand`, an
    `X-A2A-User-Delegation` token for that Brand is verified too (the caller's
    `.delegation`); one sent without them is refused. With `serves_provider`, the Provider
    the wrapped app serves (`A2AProviderApp` inside it), the Provider's paths are its own.
    Constructor: `(app, verifier, *, path_prefix, delegation_provider, delegation_brand,
    serves_provider)`, shared with the ASGI middleware.
    """

    application = "a WSGI application"

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if self.guard.protects(path := wsgi_path(environ)):
            try:
                environ[ENVIRON_KEY] = self.guard.authenticate(neutral_request(environ))
                record_checker(environ, self.guard)
            except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503
                self.refused(environ.get("REQUEST_METHOD", "GET"), path)
                return respond(refusal_response(exc), start_response)
        return self.app(environ, start_response)


def _checked_first(
    check: Callable[[WSGIEnvironment], Response | None],
) -> Callable[[WSGIView], WSGIView]:
    """A decorator that runs `check` before the application: a response it returns (a
    refusal) answers instead, and the application never runs."""

    def decorate(app: WSGIView) -> WSGIView:
        @functools.wraps(app)
        def wrapper(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            refusal = check(environ)
            if refusal is not None:
                return respond(refusal, start_response)
            result: Iterable[bytes] = app(environ, start_response)
            return result

        return wrapper

    return decorate


def personal_agent_required(
    verifier: IdentityVerifier,
    *,
    delegation_provider: Provider | None = None,
    delegation_brand: str | None = None,
    optional: bool = False,
) -> Callable[[WSGIView], WSGIView]:
    """Decorate a WSGI application so it needs a personal agent, checked exactly as the
    middleware does (identity, then a delegation when one is sent). With `optional`, a
    request without a personal agent's credential runs too (`current_personal_agent` is
    None; the app's other schemes count as none); a personal agent's token is still checked."""
    require_verifier_not_optional(
        verifier, "personal_agent_required", "@personal_agent_required(verifier, optional=True)"
    )
    guard = make_guard(verifier, delegation_provider, delegation_brand)

    def check(environ: WSGIEnvironment) -> Response | None:
        if not isinstance(environ.get(ENVIRON_KEY), PersonalAgent):
            try:
                request = neutral_request(environ)
                environ[ENVIRON_KEY] = guard.authenticate(request, optional=optional)
                record_checker(environ, guard)
            except GUARD_REFUSALS as exc:
                return refusal_response(exc)
        return None

    return _checked_first(check)


def delegation_required(*scopes: str) -> Callable[[WSGIView], WSGIView]:
    """Decorate a WSGI application behind the middleware (or `personal_agent_required`) so
    it needs a delegation with `scopes`: none is 401 `invalid_token`, missing scopes 403. On
    a request nothing verified, or verified for a Brand that does not offer one of `scopes`,
    every caller is refused: said once per application in the log."""
    require_strings(
        scopes, "delegation_required", "the scopes to require", "orders:read", scopes=True
    )

    def decorate(app: WSGIView) -> WSGIView:
        # The Brand is the one of the guard that verified the caller (the middleware's or
        # `personal_agent_required`'s), recorded beside it: this decorator has none of its own.
        warnings = ReadersWarnings(
            UNVERIFIED_DELEGATION, "delegation_required()", delegation_decorator(scopes)
        )

        def check(environ: WSGIEnvironment) -> Response | None:
            warnings(environ, ENVIRON_KEY in environ, wsgi_path(environ), scopes)
            return scope_refusal(current_personal_agent(environ), scopes)

        return _checked_first(check)(app)

    return decorate


def parafe_action(
    action: str, agent: ParafeAgent, *, refusal_status: int = 403
) -> Callable[[WSGIView], WSGIView]:
    """Decorate a WSGI application so it performs `action` only with Parafé consent
    (`pactmw.provider.guard.ParafeEndpoint`: body read to 1 MiB, then 413; consent; the
    refusal reply). The application reads the same body, runs with `current_parafe(environ)`,
    and a JSON A2A message it answers gets the signed receipts. An action that is no string,
    or an agent that is no `ParafeAgent`, is a `ConfigError` here."""
    require_strings([action], "parafe_action", "the action to perform", "create_order")
    require_refusal_status(refusal_status, "parafe_action", "refusal_status", lowest=200)
    require_parafe_agent(agent, "parafe_action(action, agent)")
    endpoint = ParafeEndpoint(agent, action, refusal_status)

    def decorate(app: WSGIView) -> WSGIView:
        @functools.wraps(app)
        def wrapper(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            admitted = endpoint.admit(body_reader(environ, keep=True))
            if not isinstance(admitted, ParafeAdmitted):
                return respond(admitted, start_response)
            environ[PARAFE_KEY] = admitted.turn
            return _with_receipts(app, endpoint, admitted.turn, environ, start_response)

        return wrapper

    return decorate


def _with_receipts(
    app: WSGIView,
    endpoint: ParafeEndpoint,
    turn: ParafeTurn,
    environ: WSGIEnvironment,
    start_response: StartResponse,
) -> Iterable[bytes]:
    """Run `app`, buffering its answer, and add the turn's receipts to a JSON A2A message."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [status, list(headers)]
        return chunks.append

    result = app(environ, capture)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    status, headers = started
    body = b"".join(chunks)
    content_type = next((v for k, v in headers if k.lower() == "content-type"), None)
    updated = endpoint.finish(turn, body, content_type, int(status.split(" ", 1)[0]))
    if updated is not None:
        body = updated
        extensions = next((v for k, v in headers if k.lower() == "a2a-extensions"), None)
        changed = {"content-length", "a2a-extensions"}
        headers = [(k, v) for k, v in headers if k.lower() not in changed]
        headers.append(("Content-Length", str(len(body))))
        headers.append(("A2A-Extensions", endpoint.reply_extensions(extensions)))
    start_response(status, headers)
    return [body]


def current_parafe(environ: WSGIEnvironment) -> ParafeTurn | None:
    """The Parafé turn of a request behind `parafe_action` (`.consent`, `.complete`)."""
    return instance_or_none(environ.get(PARAFE_KEY), ParafeTurn)


def current_personal_agent(environ: WSGIEnvironment) -> PersonalAgent | None:
    """The verified caller of this request, or None."""
    return instance_or_none(environ.get(ENVIRON_KEY), PersonalAgent)


class A2AProviderApp:
    """Serve a `Provider` as a WSGI app; other paths go to `app` (or get 404).

    For Flask: `app.wsgi_app = A2AProviderApp(provider, app.wsgi_app)`, or use the Flask
    extension, which does this for you. The Provider authenticates its own routes.
    """

    def __init__(
        self,
        provider: Provider,
        app: WSGIApplication | None = None,
        *,
        current_user: Callable[[WSGIEnvironment], SignedInUser | None] | None = None,
    ) -> None:
        """`current_user(environ)` returns the host app's signed-in user, or None; only
        same-app consent pages call it."""
        require_provider_app(provider, app, current_user, "a WSGI application")
        self.provider = provider
        self.app = app
        self.current_user = current_user
        if current_user is None:
            warn_if_signed_in_user_unknown(provider, "A2AProviderApp's current_user")

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = neutral_request(environ)
        if self.provider.matches(request.method, request.path):
            resolve = self.current_user
            user = None if resolve is None else (lambda: resolve(environ))
            response = self.provider.handle(request, body_reader(environ), user)
            return respond(response, start_response)
        if self.app is not None:
            return self.app(environ, start_response)
        return respond(NOT_FOUND, start_response)


def poppy_session_required(
    provider: Provider, brand_id: str, *scopes: str
) -> Callable[[WSGIView], WSGIView]:
    """Decorate a WSGI application of one of the Brand's APIs so it needs a Poppy Session
    Token with its DPoP proof, signed in with `scopes` when any are named (the rules are
    `Provider.poppy_session`'s); it runs with `current_poppy_caller(environ)`. A Brand that
    is not one of the Provider's or has no Poppy is a `ConfigError` here, at startup, as is a
    scope that is no string."""
    written = "poppy_session_required(provider, brand_id, *scopes)"
    require_provider(provider, written)
    require_brand_id(brand_id, written)
    require_scope_names(scopes, written)
    check_session_brand(provider.brands.values(), brand_id, poppy_setting(brand_id))

    def check(environ: WSGIEnvironment) -> Response | None:
        try:
            caller = provider.poppy_session(brand_id, neutral_request(environ), scopes)
        except PoppyError as exc:
            return error_response(exc)
        environ[POPPY_ENVIRON_KEY] = caller
        return None

    return _checked_first(check)


def current_poppy_caller(environ: WSGIEnvironment) -> PoppyCaller | None:
    """The Poppy caller behind `poppy_session_required` (None elsewhere)."""
    return instance_or_none(environ.get(POPPY_ENVIRON_KEY), PoppyCaller)


def poppy_discovery_app(provider: Provider, brand_id: str) -> WSGIView:
    """A WSGI app answering a Brand's `/.well-known/poppy.json` on its own site (the
    document itself, chosen by `Host` among its `poppy.domains`; never a redirect). Route
    that path to it; `A2AProviderApp` at the site root answers it already. A `ConfigError`
    now when the Brand does not enable Poppy."""
    require_provider(provider, "poppy_discovery_app(provider, brand_id)")
    require_brand_id(brand_id, "poppy_discovery_app(provider, brand_id)")
    check_session_brand(
        provider.brands.values(), brand_id, f"poppy_discovery_app(provider, {brand_id!r})"
    )

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = neutral_request(environ)
        response = provider.poppy_discovery(brand_id, request.header("host"), request.method)
        return respond(response, start_response)

    return app


__all__ = [
    "ENVIRON_KEY",
    "POPPY_ENVIRON_KEY",
    "A2AProviderApp",
    "PersonalAgentMiddleware",
    "body_reader",
    "current_parafe",
    "current_personal_agent",
    "current_poppy_caller",
    "delegation_required",
    "neutral_request",
    "parafe_action",
    "personal_agent_required",
    "poppy_discovery_app",
    "poppy_session_required",
    "respond",
    "to_werkzeug",
]
