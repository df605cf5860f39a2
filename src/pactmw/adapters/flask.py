"""Flask adapter: the `Pactmw` extension, `current_personal_agent()`, decorators.

    app.config["PACTMW"] = {"audience": "...", "agents": [...]}
    pactmw = Pactmw(app)          # or Pactmw() then pactmw.init_app(app) in a factory

Requests under `protect_prefix` (default `/a2a/`) must carry a valid personal-agent JWT and
are refused with PACT's empty-bodied 401 before any view runs. Elsewhere, views choose:
`@personal_agent_required`, `@personal_agent_required(optional=True)` (a caller if one is
sent, else None), `@delegation_required("orders:read")`, or `verify_personal_agent()` in a
view or `before_request` hook. Their refusals are exceptions (`PersonalAgentRefused`, a 401
`Unauthorized`; `ScopeRefused`, a 403 `Forbidden`) that answer with the protocol's
challenge unless the app handles them (`@app.errorhandler(401)` or `(PersonalAgentRefused)`),
as flask-jwt-extended's are. A caller that cannot be checked because the store cannot be
used (a database not migrated, or down) is a 503 `ServiceUnavailable` with `Retry-After`,
empty-bodied as the Provider's own, unless the app handles 503. Every rule is the guard's
(`pactmw.provider.guard`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from pactmw.adapters._common import require_framework

require_framework("flask", __name__, "Flask", "flask")

from flask import Flask, current_app, has_request_context, request
from werkzeug.wrappers import Response as WerkzeugResponse

from pactmw.adapters._arguments import (
    require_brand_id,
    require_current_user,
    require_refusal_status,
    require_scope_names,
    require_strings,
    require_view,
)
from pactmw.adapters._common import UnofferedScopesWarning, instance_or_none, provider_of
from pactmw.adapters._flask_cli import pactmw_cli
from pactmw.adapters._flask_errors import (
    PersonalAgentRefused,
    ScopeRefused,
    StoreOutage,
    flask_refusal,
)
from pactmw.adapters._view_checks import (
    ParafeViewCheck,
    PoppyViewCheck,
    delegation_brand_unset,
    delegation_decorator,
    delegation_offered,
    delegation_scopes_tag,
    delegation_view_problems,
    parafe_view_problems,
    poppy_view_problems,
    tag_delegation_view,
    tag_parafe_view,
    tag_poppy_view,
)
from pactmw.adapters._wsgi_http import body_reader, neutral_request, to_werkzeug
from pactmw.config import ConfigError
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.protocols.poppy import DISCOVERY_PATH, PoppyError
from pactmw.provider.app import Provider, warn_if_signed_in_user_unknown
from pactmw.provider.brand import TurnHandler
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.errors import error_response
from pactmw.provider.guard import (
    GUARD_REFUSALS,
    Guard,
    ParafeAdmitted,
    ParafeEndpoint,
    guard_from_mapping,
    require_scopes,
)
from pactmw.provider.parafe import ParafeTurn
from pactmw.provider.poppy import METADATA_PREFIX, PoppyCaller
from pactmw.provider.routes import MOUNT

EXTENSION_KEY = "pactmw"
#: Where the extension reads its settings, as its errors and log lines name them.
_SETTING = "app.config['PACTMW']"

#: Where every adapter logs what it says of the app's configuration.
_logger = logging.getLogger("pactmw.adapters")

A2A_ENDPOINT = "pactmw_a2a"
_POPPY_ENDPOINT = "pactmw_poppy"
#: The endpoints `init_app` routes to the Provider, which authenticates its own routes.
_PROVIDER_ENDPOINTS = frozenset({A2A_ENDPOINT, _POPPY_ENDPOINT, f"{_POPPY_ENDPOINT}_metadata"})
# A request's verified caller (and Parafé turn, Poppy caller) live in its WSGI environ, as
# the WSGI adapter keeps them, not in flask.g: g is the app context's, which Flask reuses for
# every request dispatched while one is pushed (a test's `with app.app_context()`, an app
# that pushes one at import), and which copy_current_request_context leaves behind. The keys
# are the Flask extension's own: a caller another middleware verified (by its own settings)
# is not taken for one this app's settings verified.
_ENVIRON_KEY = "pactmw.flask.personal_agent"
_PARAFE_KEY = "pactmw.flask.parafe"
_POPPY_ENVIRON_KEY = "pactmw.flask.poppy_caller"
View = TypeVar("View", bound=Callable[..., Any])
_T = TypeVar("_T")


class _State:
    def __init__(self, guard: Guard, current_user: Callable[[], SignedInUser | None]) -> None:
        self.guard = guard
        self.current_user = current_user


class Pactmw:
    """The Flask extension.

    With `brands` in `app.config["PACTMW"]` it also serves the Provider at `/a2a/...`
    (which authenticates its own routes). `handlers` maps names that `brands.X.handler` may
    use instead of an import path, so an app can hand in its own bot functions. A bad
    configuration raises `ConfigError` (naming the key) from `init_app`, at startup.
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
        require_current_user(current_user, "Pactmw(app, current_user=...)")
        self._handlers = handlers
        self._current_user = current_user
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        if EXTENSION_KEY in app.extensions:
            # A second Provider would leave the first one's store open, and every request
            # would pass the guard twice: refused, as Flask's extensions refuse it.
            raise ConfigError(
                "pactmw is already initialised on this app: call Pactmw(app) or "
                "Pactmw().init_app(app) once per app"
            )
        if "PACTMW" not in app.config:
            raise ConfigError(
                "app.config['PACTMW'] is not set: set it to a dict (audience, agents, ...) "
                "before Pactmw(app) or init_app(app)"
            )
        data = app.config["PACTMW"]
        if not isinstance(data, Mapping):
            raise ConfigError(
                "app.config['PACTMW'] must be a dict (audience, agents, ...), "
                f"not {type(data).__name__}"
            )
        if "templates" not in data:
            # The person's pages look in the app's own templates first (templates/pactmw/*.html),
            # through Flask's own loader (blueprints' folders count too), without creating
            # app.jinja_env before the app has set its Jinja options.
            data = {**data, "templates": app.create_global_jinja_loader()}
        guard = guard_from_mapping(data, handlers=self._handlers)
        _check_views(app, guard)
        if guard.provider is not None:
            _every_method(app, f"{MOUNT}<path:rest>", A2A_ENDPOINT)
            if guard.provider.poppy is not None:
                # Poppy's root documents: poppy.json (chosen by Host) and the issuers' RFC
                # 8414 metadata, whose well-known path comes before the issuer's path.
                _every_method(app, DISCOVERY_PATH, _POPPY_ENDPOINT, defaults={"rest": ""})
                _every_method(app, f"{METADATA_PREFIX}/<path:rest>", f"{_POPPY_ENDPOINT}_metadata")
        if (
            guard.provider is not None
            and self._current_user is None
            and not _has_login_manager(app)
        ):
            warn_if_signed_in_user_unknown(
                guard.provider, "Pactmw(app, current_user=...) (or Flask-Login's LoginManager)"
            )
        app.extensions[EXTENSION_KEY] = _State(guard, self._current_user or _flask_login_user)
        app.before_request(_guard_prefix)
        app.cli.add_command(pactmw_cli)  # flask pactmw grants list|revoke


def _check_views(app: Flask, guard: Guard) -> None:
    """Raise `ConfigError` for a view decorated so far whose decorator `guard` cannot serve:
    a Brand without Poppy, `delegation_required` without `delegation_brand` where a Brand
    offers delegation, or `parafe_action` naming a Brand without Parafé (or none, where
    several have it), closing the Provider first; where no Brand offers delegation, or none
    configures Parafé, a WARNING; so is `delegation_required` asking for a scope the
    `delegation_brand` does not offer (no person can grant it: every caller refused), which
    the view then does not say again. Flask tells an extension of no view added after
    `init_app`: such a view says it at its first request (`delegation_required` logs it, the
    Poppy views and `parafe_action` log it and answer 503)."""
    problems: list[ConfigError] = []
    if guard.provider is not None:
        brands = guard.provider.brands.values()
        problems += poppy_view_problems(brands, app.view_functions.values())
    routes = [
        (rule.rule, app.view_functions.get(rule.endpoint)) for rule in app.url_map.iter_rules()
    ]
    for parafe in parafe_view_problems(guard, _SETTING, routes):
        if parafe.stops:
            problems.append(ConfigError(parafe.message))
        else:
            # No Brand configures Parafé: views this deployment cannot serve, said without
            # stopping it, as Django's pactmw.W007.
            _logger.warning("%s", parafe.message)
    for rule, view in routes:
        tag = delegation_scopes_tag(view)
        if tag is not None and tag[2] is not None:
            # Said now, naming the rule, and used up: its first request says no more.
            tag[2](guard, rule, tag[1])
    if not guard.takes_delegation:
        offered = guard.provider is not None and delegation_offered(guard.provider.brands.values())
        found = delegation_view_problems(_SETTING, routes, offered=offered)
        if offered:  # the setting was forgotten: the app stops here
            problems += map(ConfigError, found)
        else:
            # No Brand offers delegation: views this deployment cannot serve (an app
            # configured without it), said without stopping it, as Django's pactmw.W005.
            for line in found:
                _logger.warning("%s", line)
    if problems:
        if guard.provider is not None:
            guard.provider.close()
        raise problems[0]


def _every_method(app: Flask, rule: str, endpoint: str, **options: Any) -> None:
    """Serve `rule` with the Provider for every method. A rule without methods takes them
    all, so the Provider answers each as it does on every adapter (HEAD as GET, an unmatched
    one a bare 404), never Flask's own 405 page or OPTIONS answer (`add_url_rule` adds
    those)."""
    app.url_map.add(app.url_rule_class(rule, endpoint=endpoint, **options))
    app.view_functions[endpoint] = _serve_a2a


def _state() -> _State:
    state = current_app.extensions.get(EXTENSION_KEY)
    if not isinstance(state, _State):
        raise RuntimeError("pactmw is not initialised on this app: call Pactmw(app)")
    return state


def verify_personal_agent(*, optional: bool = False) -> PersonalAgent | None:
    """Verify the current request's caller once (identity, then a delegation when one is
    sent) and return it; with `optional`, None when no personal agent's credential was sent
    (the app's other schemes count as none). Raises `PersonalAgentRefused` (a personal
    agent's token that fails is refused even then)."""
    found = request.environ.get(_ENVIRON_KEY)
    if isinstance(found, PersonalAgent):
        return found
    try:
        caller = _state().guard.authenticate(neutral_request(request.environ), optional=optional)
    except GUARD_REFUSALS as exc:  # a store that cannot be used too: its 503 (`StoreOutage`)
        raise flask_refusal(exc) from exc
    request.environ[_ENVIRON_KEY] = caller
    return caller


def _guard_prefix() -> WerkzeugResponse | None:
    guard = _state().guard
    # The Provider's paths are not guarded (`Guard.protects`: the app serves the Provider):
    # they are answered after routing, as PACT orders, the Provider authenticating its own
    # routes (an unmatched one is its 404 before any credential). Any other path under the
    # guarded prefix is refused before routing, as every adapter's middleware does, so a 404
    # never tells an anonymous caller which paths exist. Flask, which has routed the request
    # before this runs, also guards a view of the app's own under the Provider's `/a2a/`.
    if guard.protects(request.path) or guard.protects_once_routed(
        request.path, apps_own_view=_routed_to_apps_own_view()
    ):
        try:
            verify_personal_agent()
        except (PersonalAgentRefused, StoreOutage) as refused:
            # PACT's empty-bodied 401 (or the Provider's 503), whatever the app's handlers.
            return refused.get_response()
    if (
        guard.provider is not None
        and request.routing_exception is not None
        and guard.provider.matches(request.method, request.path)
    ):
        # A Provider path Flask's rule does not take (an empty segment, which Werkzeug would
        # redirect to the merged path, or a decoded newline, under /a2a/ or Poppy's metadata
        # prefix): the Provider answers it as on every adapter, never Flask's 308 or 404 page.
        return _serve_a2a("")
    return None


def _routed_to_apps_own_view() -> bool:
    """Whether Flask routed this request to one of the app's own views rather than to the
    Provider (or to no rule). A rule of the app's under `/a2a/` (`/a2a/whoami`,
    `/a2a/acme/mine`) wins over the Provider's `/a2a/<path:rest>` in Flask's routing."""
    rule = request.url_rule
    return rule is not None and rule.endpoint not in _PROVIDER_ENDPOINTS


def _of_request(key: str, kind: type[_T]) -> _T | None:
    """What a check left on the current request under `key`; None outside a request (a CLI
    command, a task in an app context), as Flask-Login's `current_user` is anonymous there."""
    return instance_or_none(request.environ.get(key), kind) if has_request_context() else None


def current_personal_agent() -> PersonalAgent | None:
    """The verified caller of the current request, or None (not verified, or anonymous)."""
    return _of_request(_ENVIRON_KEY, PersonalAgent)


def _checked_first(check: Callable[[], WerkzeugResponse | None]) -> Callable[[View], View]:
    """A view decorator that runs `check` before the view: a response it returns answers
    instead, and a refusal it raises (an HTTP exception) is Flask's to answer."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            answer = check()
            if answer is not None:
                return answer
            return current_app.ensure_sync(view)(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


@overload
def personal_agent_required(view: View, *, optional: bool = False) -> View: ...
@overload
def personal_agent_required(
    view: None = None, *, optional: bool = False
) -> Callable[[View], View]: ...
def personal_agent_required(
    view: View | None = None, *, optional: bool = False
) -> View | Callable[[View], View]:
    """Decorate a view so it needs a verified personal agent: `@personal_agent_required`,
    or `@personal_agent_required(optional=True)` to accept anonymous requests too (the
    view then reads `current_personal_agent()`, which may be None). `optional` is
    keyword-only: anything but a view by position is a `ConfigError` here."""
    require_view(view, "personal_agent_required")

    def check() -> None:
        verify_personal_agent(optional=optional)

    decorate: Callable[[View], View] = _checked_first(check)
    return decorate if view is None else decorate(view)


def delegation_required(*scopes: str) -> Callable[[View], View]:
    """Decorate a view so it needs a delegation with `scopes` (configure
    `PACTMW["delegation_brand"]`): none is 401 `invalid_token` (`PersonalAgentRefused`),
    missing scopes 403 `insufficient_scope` (`ScopeRefused`). Without `delegation_brand`,
    every caller is refused: `init_app` raises `ConfigError` for a view decorated before it,
    and a view added after it says so once at ERROR at its first refused request. A scope
    the Brand does not offer refuses every caller too: said once at WARNING, by `init_app`
    (a view decorated before it) or at the first refused request."""
    require_strings(
        scopes, "delegation_required", "the scopes to require", "orders:read", scopes=True
    )

    def decorate(view: View) -> View:
        unset = delegation_brand_unset(_SETTING, scopes)
        unoffered = UnofferedScopesWarning(delegation_decorator(scopes))

        def check() -> None:
            try:
                _require_delegation(scopes)
            except (PersonalAgentRefused, ScopeRefused):
                # Any refusal, a delegation sent in vain (401 `not_offered`) included.
                guard = _state().guard
                if not guard.takes_delegation:
                    unset(request.path)
                unoffered(guard, request.path, scopes)
                raise

        return tag_delegation_view(_checked_first(check)(view), scopes, unoffered)

    return decorate


def _require_delegation(scopes: tuple[str, ...]) -> None:
    """Verify the caller, then refuse one without a delegation holding `scopes`."""
    caller = verify_personal_agent()
    try:
        require_scopes(caller, scopes)
    except GUARD_REFUSALS as exc:
        raise flask_refusal(exc) from exc


def parafe_action(
    action: str, *, brand: str | None = None, refusal_status: int = 403
) -> Callable[[View], View]:
    """Decorate a view so it performs `action` only with Parafé consent
    (`pactmw.provider.guard.ParafeEndpoint`: body read to 1 MiB, chunked or not, then 413;
    consent; the refusal reply). The Brand's `[brands.X.parafe]` is used: `brand`, else
    `PACTMW["parafe_brand"]`, else the one Brand with Parafé. The view runs with
    `current_parafe()` and reads the same body; a JSON A2A message it returns gets the
    signed receipts. An action or a `brand` that is no string is a `ConfigError` here; a
    Brand without Parafé (or none named where several have it) is one at `init_app` for a
    view decorated before it, and for one added after, a 503 at each request, said once at
    ERROR (where no Brand configures Parafé, `init_app` warns and the view answers so)."""
    require_strings([action], "parafe_action", "the action to perform", "create_order")
    require_refusal_status(refusal_status, "parafe_action", "refusal_status", lowest=200)
    if brand is not None:
        require_brand_id(brand, "parafe_action(action, brand=...)", "brand")

    def decorate(view: View) -> View:
        check = ParafeViewCheck(_SETTING, action, brand, refusal_status)  # said once a view

        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            endpoint = check.endpoint(_state().guard, request.path)
            if not isinstance(endpoint, ParafeEndpoint):
                return to_werkzeug(endpoint)
            admitted = endpoint.admit(body_reader(request.environ, keep=True))
            if not isinstance(admitted, ParafeAdmitted):
                return to_werkzeug(admitted)
            request.environ[_PARAFE_KEY] = admitted.turn
            response = current_app.make_response(current_app.ensure_sync(view)(*args, **kwargs))
            if response.is_streamed:
                endpoint.finish(admitted.turn, None, None, response.status_code)
                return response
            updated = endpoint.finish(
                admitted.turn, response.get_data(), response.content_type, response.status_code
            )
            if updated is not None:
                response.set_data(updated)
                extensions = response.headers.get("A2A-Extensions")
                response.headers["A2A-Extensions"] = endpoint.reply_extensions(extensions)
            return response

        return tag_parafe_view(wrapper, action, brand)  # type: ignore[return-value]

    return decorate


def current_parafe() -> ParafeTurn | None:
    """The Parafé turn of the current request behind `parafe_action`."""
    return _of_request(_PARAFE_KEY, ParafeTurn)


def get_verifier() -> IdentityVerifier:
    """The verifier of the current app (for custom views)."""
    return _state().guard.verifier


def get_provider() -> Provider:
    """The Provider of the current app (`brands` must be configured)."""
    return provider_of(_state().guard, _SETTING)


def _serve_a2a(rest: str) -> WerkzeugResponse:
    state = _state()
    environ = request.environ
    # Flask has matched the URL but not read the body: the Provider reads it after auth.
    response = get_provider().handle(
        neutral_request(environ), body_reader(environ), state.current_user
    )
    return to_werkzeug(response)


def poppy_session_required(brand_id: str, *scopes: str) -> Callable[[View], View]:
    """Decorate a view of one of the Brand's APIs so it needs a Poppy Session Token with its
    DPoP proof, signed in with `scopes` when any are named (the rules are
    `Provider.poppy_session`'s); it runs with `current_poppy_caller()`. A refusal is Poppy's
    JSON error with its `WWW-Authenticate: DPoP` challenge. A Brand without Poppy is a
    `ConfigError` at `init_app` for a view decorated before it; one added after answers each
    request 503, said once at ERROR naming the view."""
    require_strings([brand_id], "poppy_session_required", "the Brand's id", "shop")
    require_scope_names(scopes, "poppy_session_required(brand_id, *scopes)")

    def decorate(view: View) -> View:
        poppy = PoppyViewCheck(brand_id)  # said once a view

        def check() -> WerkzeugResponse | None:
            environ = request.environ
            provider = get_provider()
            # `init_app` checked the views it found; one added after it says it here.
            unavailable = poppy.refusal(provider.brands.values(), request.path)
            if unavailable is not None:
                return to_werkzeug(unavailable)
            try:
                caller = provider.poppy_session(brand_id, neutral_request(environ), scopes)
            except PoppyError as exc:
                return to_werkzeug(error_response(exc))
            environ[_POPPY_ENVIRON_KEY] = caller
            return None

        return tag_poppy_view(_checked_first(check)(view), brand_id)

    return decorate


def current_poppy_caller() -> PoppyCaller | None:
    """The Poppy caller of the current request behind `poppy_session_required`."""
    return _of_request(_POPPY_ENVIRON_KEY, PoppyCaller)


def poppy_discovery_view(brand_id: str) -> Callable[[], WerkzeugResponse]:
    """A view answering a Brand's `/.well-known/poppy.json` on its own site, when that site
    is not the app `Pactmw` serves the Provider on (which answers it already): the document
    itself, chosen by `Host` among the Brand's `poppy.domains`, never a redirect.

    `app.add_url_rule("/.well-known/poppy.json", view_func=poppy_discovery_view("shop"))`

    A Brand without Poppy is a `ConfigError` at `init_app` for a view added before it; one
    added after answers each request 503, said once at ERROR naming the view.
    """
    require_brand_id(brand_id, "poppy_discovery_view(brand_id)")
    setting = f"poppy_discovery_view({brand_id!r})"
    check = PoppyViewCheck(brand_id, setting)

    def view() -> WerkzeugResponse:
        provider = get_provider()
        # `init_app` checked the views it found; one added after it says it here.
        unavailable = check.refusal(provider.brands.values(), request.path)
        if unavailable is not None:
            return to_werkzeug(unavailable)
        return to_werkzeug(provider.poppy_discovery(brand_id, request.host, request.method))

    view.__name__ = f"poppy_discovery_{brand_id}"
    tag_poppy_view(view, brand_id, setting)
    # OPTIONS is the Provider's (204, `Allow`, the CORS preflight), not Flask's own answer.
    view.methods = ["GET", "OPTIONS"]  # type: ignore[attr-defined]
    view.provide_automatic_options = False  # type: ignore[attr-defined]
    return view


def _has_login_manager(app: Flask) -> bool:
    """Whether Flask-Login can tell who is signed in: installed, and its `LoginManager` set
    up on `app` (before `Pactmw(app)`). Without one, its `current_user` fails with an
    AttributeError, which reads as nobody signed in."""
    try:
        import flask_login  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return hasattr(app, "login_manager")


def _flask_login_user() -> SignedInUser | None:
    """Flask-Login's signed-in user, if Flask-Login is installed and someone is signed in."""
    try:
        from flask_login import current_user  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    if not getattr(current_user, "is_authenticated", False):
        return None
    return SignedInUser(account=str(current_user.get_id()), label=str(current_user.get_id()))


__all__ = [
    "Pactmw",
    "PersonalAgentRefused",
    "ScopeRefused",
    "current_parafe",
    "current_personal_agent",
    "current_poppy_caller",
    "delegation_required",
    "get_provider",
    "get_verifier",
    "parafe_action",
    "personal_agent_required",
    "poppy_discovery_view",
    "poppy_session_required",
    "verify_personal_agent",
]
