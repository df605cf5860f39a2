"""Flask adapter: the `Pactmw` extension, a `current_personal_agent()` accessor, a decorator.

    app.config["PACTMW"] = {"audience": "...", "agents": [...]}
    pactmw = Pactmw(app)          # or Pactmw() then pactmw.init_app(app) in a factory

Requests under `protect_prefix` (default `/a2a/`) must carry a valid personal-agent JWT;
`current_personal_agent()` returns the verified caller (or None) inside a request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, current_app, g, request
from werkzeug.wrappers import Response as WerkzeugResponse

from pactmw.adapters.wsgi import body_reader, neutral_request, to_werkzeug
from pactmw.config import Settings, in_protected_path
from pactmw.core.errors import AuthenticationFailed
from pactmw.core.http import challenge, insufficient_scope
from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider.app import Provider, missing_scopes, with_delegation
from pactmw.provider.brand import TurnHandler
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.parafe import (
    ParafeAgent,
    ParafeRefused,
    ParafeTurn,
    body_too_large,
    endpoint_message,
    select_agent,
)
from pactmw.provider.settings import PROVIDER_KEYS, ProviderSettings

EXTENSION_KEY = "pactmw"
A2A_ENDPOINT = "pactmw_a2a"
_G_KEY = "_pactmw_personal_agent"
_G_PARAFE = "_pactmw_parafe"
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class _State:
    def __init__(
        self,
        settings: Settings,
        verifier: IdentityVerifier,
        provider: Provider | None,
        current_user: Callable[[], SignedInUser | None],
        delegation_brand: str | None,
        parafe_brand: str | None = None,
    ) -> None:
        self.settings = settings
        self.verifier = verifier
        self.provider = provider
        self.current_user = current_user
        self.delegation_brand = delegation_brand
        self.parafe_brand = parafe_brand


class Pactmw:
    """The Flask extension.

    With `brands` in `app.config["PACTMW"]` it also serves the Provider at `/a2a/...`
    (which authenticates its own routes). `handlers` maps names that `brands.X.handler` may
    use instead of an import path, so an app can hand in its own bot functions.
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        handlers: Mapping[str, TurnHandler] | None = None,
        current_user: Callable[[], SignedInUser | None] | None = None,
    ) -> None:
        """`current_user()` tells who is signed in to the app (same-app consent); without it,
        Flask-Login's `current_user` is used when Flask-Login is installed."""
        self._handlers = handlers
        self._current_user = current_user
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        data = app.config.get("PACTMW", {})
        provider: Provider | None = None
        if "brands" in data:
            provider_settings = ProviderSettings.from_mapping(data, handlers=self._handlers)
            provider = Provider.from_settings(provider_settings)
            settings, verifier = provider_settings.identity, provider.verifier
            app.add_url_rule("/a2a/<path:rest>", A2A_ENDPOINT, _serve_a2a, methods=_ALL_METHODS)
        else:
            settings = Settings.from_mapping(data, extra_keys=PROVIDER_KEYS)
            verifier = settings.build_verifier()
        brand = data.get("delegation_brand")
        parafe_brand = data.get("parafe_brand")
        app.extensions[EXTENSION_KEY] = _State(
            settings,
            verifier,
            provider,
            self._current_user or _flask_login_user,
            brand if isinstance(brand, str) else None,
            parafe_brand if isinstance(parafe_brand, str) else None,
        )
        app.before_request(_guard_prefix)


def _state() -> _State:
    state = current_app.extensions.get(EXTENSION_KEY)
    if not isinstance(state, _State):
        raise RuntimeError("pactmw is not initialised on this app: call Pactmw(app)")
    return state


def _verify() -> PersonalAgent:
    found = g.get(_G_KEY)
    if isinstance(found, PersonalAgent):
        return found
    state = _state()
    authorization = request.headers.getlist("Authorization")
    delegation = request.headers.getlist("X-A2A-User-Delegation")
    personal_agent = with_delegation(
        state.provider,
        state.delegation_brand,
        state.verifier.verify(authorization[0] if len(authorization) == 1 else None),
        None if not delegation else (delegation[0] if len(delegation) == 1 else ""),
    )
    setattr(g, _G_KEY, personal_agent)
    return personal_agent


def _guard_prefix() -> WerkzeugResponse | None:
    state = _state()
    if request.endpoint == A2A_ENDPOINT or (
        state.provider is not None and request.routing_exception is not None
    ):
        # The Provider's routes (and what Flask could not route at all) are answered after
        # routing, as PACT orders: the Provider authenticates its own, unmatched is 404/405.
        return None
    if not in_protected_path(request.path, state.settings.protect_prefix):
        return None
    try:
        _verify()
    except AuthenticationFailed as exc:
        return to_werkzeug(challenge(exc))
    return None


def current_personal_agent() -> PersonalAgent | None:
    """The verified caller of the current request, or None."""
    found = g.get(_G_KEY)
    return found if isinstance(found, PersonalAgent) else None


def personal_agent_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a Flask view so it needs a verified personal agent (401 challenge otherwise)."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _verify()
        except AuthenticationFailed as exc:
            return to_werkzeug(challenge(exc))
        return current_app.ensure_sync(view)(*args, **kwargs)

    return wrapper


def delegation_required(*scopes: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a view so it needs a delegation with `scopes` (configure
    `PACTMW["delegation_brand"]`). No delegation: 401 `error="invalid_token"`; missing
    scopes: 403 `insufficient_scope`."""

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                caller = _verify()
            except AuthenticationFailed as exc:
                return to_werkzeug(challenge(exc))
            missing = missing_scopes(caller, scopes)
            if missing is None:
                return to_werkzeug(challenge(DelegationRejected("required")))
            if missing:
                return to_werkzeug(insufficient_scope(missing))
            return current_app.ensure_sync(view)(*args, **kwargs)

        return wrapper

    return decorate


def parafe_action(
    action: str, *, brand: str | None = None, refusal_status: int = 403
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a view so it performs `action` only with Parafé consent.

    The JSON body is an A2A message (or `{"message": ...}`) whose consent must permit
    `action` (token, proof, replay). The Brand's `[brands.X.parafe]` configuration is used:
    `brand`, else `PACTMW["parafe_brand"]`, else the one Brand with Parafé. On success the view
    runs with `current_parafe()` (`.consent`, `.complete(action, business_ref=...)`), and a
    JSON A2A message it returns gets the signed receipt. A refusal is answered with
    `refusal_status` and an A2A-shaped message with the Parafé error and refusal receipt.
    """

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            state = _state()
            agents = state.provider.parafe if state.provider is not None else {}
            agent: ParafeAgent = select_agent(agents, brand or state.parafe_brand)
            if body_too_large(request.headers.get("Content-Length")):
                return WerkzeugResponse(status=413)
            turn = agent.turn(endpoint_message(request.get_data(cache=True)))
            try:
                turn.require(action)
            except ParafeRefused as refused:
                return to_werkzeug(agent.refusal_response(refused, refusal_status))
            setattr(g, _G_PARAFE, turn)
            response = current_app.make_response(current_app.ensure_sync(view)(*args, **kwargs))
            if response.is_streamed:
                agent.finish(turn, b"", None)
                return response
            updated = agent.finish(turn, response.get_data(), response.content_type)
            if updated is not None:
                response.set_data(updated)
            return response

        return wrapper

    return decorate


def current_parafe() -> ParafeTurn | None:
    """The Parafé turn of the current request behind `parafe_action`."""
    found = g.get(_G_PARAFE)
    return found if isinstance(found, ParafeTurn) else None


def get_verifier() -> IdentityVerifier:
    """The verifier of the current app (for custom views)."""
    return _state().verifier


def _serve_a2a(rest: str) -> WerkzeugResponse:
    state = _state()
    assert state.provider is not None  # the route exists only when there is a Provider
    environ = request.environ
    # Flask has matched the URL but not read the body: the Provider reads it after auth.
    response = state.provider.handle(
        neutral_request(environ), body_reader(environ), state.current_user
    )
    return to_werkzeug(response)


def _flask_login_user() -> SignedInUser | None:
    """Flask-Login's signed-in user, if Flask-Login is installed and someone is signed in."""
    try:
        from flask_login import current_user  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    if not getattr(current_user, "is_authenticated", False):
        return None
    return SignedInUser(account=str(current_user.get_id()), label=str(current_user.get_id()))


def get_provider() -> Provider:
    """The Provider of the current app (`brands` must be configured)."""
    provider = _state().provider
    if provider is None:
        raise RuntimeError("app.config['PACTMW'] lists no brands: there is no Provider")
    return provider
