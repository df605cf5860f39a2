"""What every adapter does the same way, framework-neutral (no framework is imported here)."""

from __future__ import annotations

import logging
import reprlib
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from importlib.util import find_spec
from typing import Generic, TypeVar

from attrs import frozen

from pactmw.config import ConfigError, guarded_prefix, require_verifier
from pactmw.core.encoding import is_ascii_digits, loggable
from pactmw.core.errors import AuthenticationFailed, InsufficientScope, MissingExtra, RequestRefused
from pactmw.core.http import Response
from pactmw.protocols.delegation import DelegationRejected
from pactmw.protocols.identity import IdentityVerifier, PersonalAgent
from pactmw.provider.app import Provider
from pactmw.provider.brand import Brand
from pactmw.provider.delegated import OAuthError
from pactmw.provider.errors import error_response
from pactmw.provider.guard import (
    Guard,
    ParafeEndpoint,
    check_delegation_brand,
    refusal_response,
    require_scopes,
)
from pactmw.provider.parafe import ParafeAgent
from pactmw.provider.poppy import check_session_brand
from pactmw.provider.routes import MOUNT

__all__ = [
    "NOT_FOUND",
    "PARAFE_UNAVAILABLE",
    "REFUSED_PUBLIC_ROUTE",
    "TAKES_DELEGATION_KEY",
    "UNVERIFIED_DELEGATION",
    "GuardedMiddleware",
    "OnceWarning",
    "ParafeViewCheck",
    "ParafeViewProblem",
    "bounded_body",
    "declared_length",
    "delegation_brand_unset",
    "delegation_offered",
    "delegation_tag",
    "delegation_view_problem",
    "delegation_view_problems",
    "instance_or_none",
    "make_guard",
    "no_delegation_brand",
    "no_delegation_offered",
    "no_parafe_agent",
    "parafe_tag",
    "parafe_view_problem",
    "parafe_view_problems",
    "poppy_setting",
    "poppy_view_problems",
    "provider_of",
    "record_checker",
    "refusal_detail",
    "require_application",
    "require_brand_id",
    "require_current_user",
    "require_framework",
    "require_parafe_agent",
    "require_provider",
    "require_provider_app",
    "require_scope_names",
    "require_strings",
    "require_verifier_not_optional",
    "require_view",
    "scope_refusal",
    "scopes_without_delegation",
    "tag_delegation_view",
    "tag_parafe_view",
    "tag_poppy_view",
    "takes_no_delegation",
    "whole_body",
]

_T = TypeVar("_T")
_App = TypeVar("_App")

logger = logging.getLogger("pactmw.adapters")

#: What the ASGI and the WSGI `delegation_required` say on a request nothing verified (`%s`:
#: the path). They read the caller a middleware or `personal_agent_required` left; Flask's
#: and Django's verify it themselves, from the app's settings, which these have not.
UNVERIFIED_DELEGATION = (
    "delegation_required() on %s found no verified caller: it reads what "
    "PersonalAgentMiddleware verified under its prefix; elsewhere put "
    "personal_agent_required(verifier, delegation_provider=..., delegation_brand=...) above it"
)

#: Where an adapter records, beside the caller it verified (in the ASGI scope or the WSGI
#: environ), whether the guard that verified it takes delegations: a check that asks for
#: scopes reads it to say why every caller is refused (`scopes_without_delegation`).
TAKES_DELEGATION_KEY = "pactmw.takes_delegation"

#: What a check asking for delegated scopes says once when the caller was verified by a
#: guard that takes no delegation (`{what}`: the check as the app wrote it; `{checker}`: what
#: verified the caller; `%s`: the path).
_SCOPES_WITHOUT_DELEGATION = (
    "{what} on %s refuses every caller: {checker} takes no delegation; give it "
    "delegation_provider=... and delegation_brand=..."
)

#: What verified a caller, as `scopes_without_delegation` names it by default.
_ANY_CHECKER = (
    "the check that verified it (PersonalAgentMiddleware, PersonalAgentBackend or "
    "personal_agent_required)"
)

#: What a middleware that refused one of a Provider's public routes says once
#: (`Guard.guards_a_providers_public_route`).
REFUSED_PUBLIC_ROUTE = (
    "PersonalAgentMiddleware refused %s, a Provider's public route (an Agent Card, an "
    "authorization server's metadata or JWKS, a consent page): when the app behind it serves "
    "the Provider (a2a_routes, A2AProviderApp), give the middleware serves_provider=provider"
)

#: The answer to a path nothing serves, the same bare 404 on every adapter.
NOT_FOUND = error_response(RequestRefused(404))


def provider_of(guard: Guard, setting: str) -> Provider:
    """The Provider `guard` serves; a RuntimeError naming `setting` (where the adapter reads
    pactmw's settings) when it lists no brands. Every adapter's `get_provider()`, and so
    every management command, says it in these words."""
    if guard.provider is None:
        raise RuntimeError(
            f"{setting} lists no brands: there is no Provider, and no store of agents, grants "
            "or conversations (add brands)"
        )
    return guard.provider


#: The attribute Flask's and Django's `poppy_session_required` (and Flask's
#: `poppy_discovery_view`) leave on the view they make: the Brand it names and the call as
#: the app wrote it. Their Provider is built after the views are made, so the extension
#: (`init_app`) and the system check find the views by it to check the Brand at startup;
#: `functools.wraps` copies it through the app's own decorators.
_POPPY_BRAND_ATTRIBUTE = "pactmw_poppy_brand"


def poppy_setting(brand_id: str) -> str:
    """The decorator as the app wrote it, which a `ConfigError` names."""
    return f"poppy_session_required({brand_id!r})"


def tag_poppy_view(view: _T, brand_id: str, setting: str | None = None) -> _T:
    """Leave `brand_id` on a view `poppy_session_required` made, or the helper `setting`
    names (see `poppy_view_problems`)."""
    setattr(view, _POPPY_BRAND_ATTRIBUTE, (brand_id, setting or poppy_setting(brand_id)))
    return view


def poppy_view_problems(brands: Iterable[Brand], views: Iterable[object]) -> list[ConfigError]:
    """What `check_session_brand` says of each of `views` whose `poppy_session_required`
    (or other tagged helper) names a Brand without Poppy."""
    brands = tuple(brands)
    problems: list[ConfigError] = []
    for view in views:
        tag = getattr(view, _POPPY_BRAND_ATTRIBUTE, None)
        if not (isinstance(tag, tuple) and len(tag) == 2):
            continue
        brand_id, setting = tag
        try:
            check_session_brand(brands, brand_id, setting)
        except ConfigError as exc:
            problems.append(exc)
    return problems


#: The attribute Flask's and Django's `delegation_required` leave on the view they make: the
#: decorator as the app wrote it. As with `poppy_session_required`, the extension
#: (`init_app`) and the system check find the views by it, to say at startup that settings
#: without `delegation_brand` refuse every caller of them.
_DELEGATION_ATTRIBUTE = "pactmw_delegation_required"


def _delegation_decorator(scopes: Iterable[str]) -> str:
    """`delegation_required(*scopes)` as the app wrote it."""
    return f"delegation_required({', '.join(repr(scope) for scope in scopes)})"


def tag_delegation_view(view: _T, scopes: Iterable[str]) -> _T:
    """Leave on a view `delegation_required(*scopes)` made the decorator as written."""
    setattr(view, _DELEGATION_ATTRIBUTE, _delegation_decorator(scopes))
    return view


def delegation_tag(view: object) -> str | None:
    """The `delegation_required(...)` (as written) a view, or a method Django's
    `method_decorator` decorated (it copies the attribute), carries; None for another."""
    decorator = getattr(view, _DELEGATION_ATTRIBUTE, None)
    return decorator if isinstance(decorator, str) else None


def no_delegation_brand(settings: str, check: str, path: str) -> str:
    """What a check of a delegation (`check`: `delegation_required(...)` or DRF's
    `HasDelegatedScope`, as the app wrote it, on `path`) says when the app's settings
    (`settings`, as the adapter names where it reads them) have no `delegation_brand`: no
    delegation is verified, so every caller is refused."""
    return (
        f"{check} on {path} refuses every caller: {settings}['delegation_brand'] is not "
        "set, so no delegation is verified; set it to the Brand (one with "
        "[brands.X.delegation]) whose grants the view checks"
    )


def delegation_offered(brands: Iterable[Brand]) -> bool:
    """Whether one of `brands` offers the Delegated profile: only then can
    `delegation_brand` name one, and a view checking delegations without it is a setting
    forgotten rather than a view this deployment cannot serve."""
    return any(brand.delegation is not None for brand in brands)


def no_delegation_offered(check: str, path: str) -> str:
    """What a check of a delegation (`check`, as the app wrote it, on `path`) says where no
    Brand offers delegation: it refuses every caller until one does."""
    return (
        f"{check} on {path} refuses every caller: no Brand offers delegation "
        "([brands.X.delegation]), so no delegation can be verified"
    )


def delegation_view_problem(settings: str, check: str, path: str, *, offered: bool) -> str:
    """What startup says of a view checking delegations (`check`, as written, on `path`)
    where the settings (`settings`) have no `delegation_brand`: the setting forgotten where a
    Brand offers delegation (`offered`: an error), else a view this deployment cannot serve
    (said without stopping the app: one configured without delegation)."""
    if offered:
        return no_delegation_brand(settings, check, path)
    return no_delegation_offered(check, path)


def delegation_view_problems(
    settings: str, routes: Iterable[tuple[str, object]], *, offered: bool
) -> list[str]:
    """`delegation_view_problem` of each routed view (`routes`: its path and the view) that
    `delegation_required` made: the extension's reports at startup."""
    return [
        delegation_view_problem(settings, check, path, offered=offered)
        for path, view in routes
        if (check := delegation_tag(view)) is not None
    ]


def delegation_brand_unset(
    settings: str, scopes: Iterable[str], check: str | None = None
) -> OnceWarning:
    """The log line, at ERROR once, of a view `delegation_required(*scopes)` made (or
    another `check` of a delegation, as written) refusing a caller while the settings
    (`settings`) have no `delegation_brand`: said where no startup check saw the view
    (Flask's added after `init_app`, Django's under a server that runs no system check)."""
    written = _delegation_decorator(scopes) if check is None else check
    # The message is a format string whose one `%s` is the path: a `%` in a scope is kept.
    return OnceWarning(
        no_delegation_brand(settings, written.replace("%", "%%"), "%s"), level=logging.ERROR
    )


#: The attribute Flask's and Django's `parafe_action` leave on the view they make: the
#: decorator as the app wrote it and the Brand it names (None: the settings' `parafe_brand`,
#: else the one Brand with Parafé). As with `delegation_required`, the extension (`init_app`)
#: and the system check find the views by it, to say at startup which cannot check consent.
_PARAFE_ATTRIBUTE = "pactmw_parafe_action"

#: The answer of an endpoint behind `parafe_action` whose configuration gives it no Parafé
#: runtime: 503 (the server cannot serve it until its operator fixes that, as a store that
#: does not open), with the RFC 6749-shaped body of pactmw's other 503s that have one, not
#: cacheable. It names no setting: the log says which (`ParafeViewCheck`). ASCII only, as
#: RFC 6749 §5.2 asks of `error_description`.
PARAFE_UNAVAILABLE = error_response(
    OAuthError(
        "temporarily_unavailable",
        "This endpoint cannot check its action's consent: the server's Parafe "
        "configuration is missing",
        503,
    )
)


def _parafe_decorator(action: str, brand: str | None) -> str:
    """`parafe_action(action[, brand=...])` as the app wrote it."""
    if brand is None:
        return f"parafe_action({action!r})"
    return f"parafe_action({action!r}, brand={brand!r})"


def tag_parafe_view(view: _T, action: str, brand: str | None) -> _T:
    """Leave on a view `parafe_action(action, brand=brand)` made the decorator as written and
    its Brand (see `parafe_view_problems`)."""
    setattr(view, _PARAFE_ATTRIBUTE, (_parafe_decorator(action, brand), brand))
    return view


def parafe_tag(view: object) -> tuple[str, str | None] | None:
    """The `parafe_action(...)` (as written) and the Brand it names that a view, or a method
    Django's `method_decorator` decorated (it copies the attribute), carries; None for
    another."""
    tag = getattr(view, _PARAFE_ATTRIBUTE, None)
    if isinstance(tag, tuple) and len(tag) == 2 and isinstance(tag[0], str):
        written, brand = tag
        return written, brand if isinstance(brand, str) else None
    return None


@frozen
class ParafeViewProblem:
    """Why a view behind `parafe_action` cannot check consent: `message` (naming the view
    and what to fix), and whether it `stops` the app at startup (an argument or a setting
    to fix) or is said without stopping it (a deployment configured without Parafé)."""

    message: str
    stops: bool


def parafe_view_problem(
    brands: Iterable[Brand],
    parafe_brand: str | None,
    settings: str,
    check: str,
    path: str,
    brand: str | None,
) -> ParafeViewProblem | None:
    """The problem of a view (`check`: its `parafe_action(...)` as written, on `path`, naming
    `brand`) under settings (`settings`, as the adapter names where it reads them) with
    `brands` and `parafe_brand`; None when it has its Brand's Parafé runtime.

    No Brand with Parafé is no error: test sites and examples route Parafé views under
    settings without it, and the view cannot work in that deployment (said, not stopped). A
    Brand named that has no Parafé, or none named where several have it, is a mistake to
    fix before the app serves anything."""
    by_id = {found.id: found for found in brands}
    with_parafe = [found_id for found_id, found in by_id.items() if found.parafe is not None]
    refuses = f"{check} on {path} refuses every request"
    if not with_parafe:
        return ParafeViewProblem(
            f"{refuses}: no Brand configures Parafé ([brands.X.parafe]), so no consent can "
            "be checked",
            stops=False,
        )
    listed = ", ".join(repr(found_id) for found_id in with_parafe)
    if brand is not None:
        if brand not in by_id:
            why = f"{brand!r} is not one of brands"
        elif brand not in with_parafe:
            why = f"Brand {brand!r} has no [brands.{brand}.parafe]"
        else:
            return None
        return ParafeViewProblem(
            f"{refuses}: {why}; name a Brand with Parafé ({listed}) in brand=...", stops=True
        )
    if parafe_brand is not None:
        if parafe_brand in with_parafe:
            return None
        # `guard_settings` refuses such a setting: only a guard built otherwise has one.
        return ParafeViewProblem(
            f"{refuses}: {settings}['parafe_brand'] {parafe_brand!r} has no "
            f"[brands.X.parafe]; name a Brand with Parafé ({listed})",
            stops=True,
        )
    if len(with_parafe) > 1:
        return ParafeViewProblem(
            f"{refuses}: several Brands configure Parafé ({listed}); pass brand=... or set "
            f"{settings}['parafe_brand']",
            stops=True,
        )
    return None


def _brands_of(guard: Guard) -> Iterable[Brand]:
    """The Brands of the Provider `guard` serves (none without one)."""
    return guard.provider.brands.values() if guard.provider is not None else ()


def parafe_view_problems(
    guard: Guard, settings: str, routes: Iterable[tuple[str, object]]
) -> list[ParafeViewProblem]:
    """`parafe_view_problem` of each routed view (`routes`: its path and the view) that
    `parafe_action` made, under `guard`'s settings: the extension's reports at startup."""
    problems: list[ParafeViewProblem] = []
    for path, view in routes:
        tag = parafe_tag(view)
        if tag is None:
            continue
        check, brand = tag
        problem = parafe_view_problem(
            _brands_of(guard), guard.parafe_brand, settings, check, path, brand
        )
        if problem is not None:
            problems.append(problem)
    return problems


class ParafeViewCheck:
    """What Flask's and Django's `parafe_action(action, brand=...)` run at each request: the
    `ParafeEndpoint` of its Brand, or, where its configuration gives it none (a view no
    startup check saw: Flask's added after `init_app`, Django's under a server that runs no
    system check), `PARAFE_UNAVAILABLE`, the problem said once at ERROR. Made once a
    decorator, not once a view: Django's `method_decorator` decorates the method anew at
    each request, so a line said once a view would be said every time."""

    def __init__(self, settings: str, action: str, brand: str | None, refusal_status: int) -> None:
        self.settings = settings
        self.action = action
        self.brand = brand
        self.refusal_status = refusal_status
        self.written = _parafe_decorator(action, brand)
        self._said = False

    def endpoint(self, guard: Guard, path: str) -> ParafeEndpoint | Response:
        """The endpoint's check under `guard`, or the 503 to answer (`path`: the request's,
        what the caller wrote, so escaped and cut short in the log)."""
        if self._problem(guard, path) is None:
            return guard.parafe_endpoint(
                self.action, brand=self.brand, refusal_status=self.refusal_status
            )
        if not self._said:
            self._said = True
            problem = self._problem(guard, loggable(path))
            logger.error("%s", problem.message if problem is not None else self.written)
        return PARAFE_UNAVAILABLE

    def _problem(self, guard: Guard, path: str) -> ParafeViewProblem | None:
        brands = _brands_of(guard)
        return parafe_view_problem(
            brands, guard.parafe_brand, self.settings, self.written, path, self.brand
        )


def no_parafe_agent(action: str, state: str) -> OnceWarning:
    """The log line, at ERROR once, of an ASGI endpoint `parafe_action(action)` made that was
    given no agent and finds none in the app's state (`state`: `app.state.<name>`)."""
    return OnceWarning(
        f"{_parafe_decorator(action, None).replace('%', '%%')} on %s refuses every request: "
        f"it was given no agent and {state} is no ParafeAgent; pass the Brand's ParafeAgent "
        f"(provider.parafe_agent(brand_id)) as agent=..., or set {state} to it",
        level=logging.ERROR,
    )


def require_framework(package: str, adapter: str, framework: str, extra: str) -> None:
    """Raise `MissingExtra` naming `extra` when `package` (the framework `adapter` is written
    for) is not installed. An adapter calls it before its first import of the framework, so
    a missing framework is named with the extra that installs it instead of surfacing as a
    bare ModuleNotFoundError."""
    if find_spec(package) is None:
        raise MissingExtra(adapter, framework, extra)


def declared_length(value: str | None) -> int | None:
    """The body length a request declares in `Content-Length` (None: none declared).

    Raises `RequestRefused(400)` for a value that is not ASCII digits (`+5`, `0x10`, `١٥`, a
    list): such framing is invalid (RFC 9112 §6.3), uvicorn refuses it itself, and the WSGI
    servers pass it on to frameworks that read it each their own way (Django's
    `request.body` raises ValueError, a 500; Werkzeug reads no body). Every body reader of a
    WSGI adapter asks here first, so each refuses it alike.
    """
    if not value:
        return None
    if not is_ascii_digits(value):
        raise RequestRefused(400)
    return int(value)


def whole_body(body: bytes, declared: int | None) -> bytes:
    """`body` when it is as long as its `declared` length (or none was declared).

    Raises `RequestRefused(400)` when the upload ended before it (the client closed its side
    early): Werkzeug raises its own ClientDisconnected then and Django returns the bytes that
    came, so the body readers of the WSGI adapters check here, as the ASGI reader refuses a
    disconnect with 400.
    """
    if declared is not None and len(body) < declared:
        raise RequestRefused(400)
    return body


def bounded_body(
    content_length: str | None, limit: int, read: Callable[[int], bytes]
) -> bytes | None:
    """The request body, or None when it is longer than `limit`, declared or not: a declared
    length over it is refused before anything is read, and `read(n)` (at most `n` bytes of
    the body, the framework's blocking read) stops one byte past it, so a chunked body is
    never read further. Raises `RequestRefused(400)` for a `Content-Length` that is not
    digits (`declared_length`) or a body that ended before it (`whole_body`): the rules of
    every blocking body reader (WSGI, Flask, Django), which only say how to read."""
    declared = declared_length(content_length)
    if declared is not None and declared > limit:
        return None
    body = read(limit + 1)
    if len(body) > limit:
        return None
    return whole_body(body, declared)


def instance_or_none(found: object, kind: type[_T]) -> _T | None:
    """`found` when it is a `kind`, else None: how an adapter reads back what a middleware or
    decorator left on the request (an ASGI scope, a WSGI environ, Flask's `g`), where anything
    else may sit under the same key."""
    return found if isinstance(found, kind) else None


def scope_refusal(caller: PersonalAgent | None, scopes: Iterable[str]) -> Response | None:
    """The answer to a caller without a delegation holding `scopes` (`require_scopes`: no
    delegation is 401 `invalid_token`, a missing scope 403 `insufficient_scope`), or None
    when it holds them: what an adapter that answers with responses (not exceptions) sends."""
    try:
        require_scopes(caller, scopes)
    except (AuthenticationFailed, InsufficientScope) as exc:
        return refusal_response(exc)
    return None


def refusal_detail(exc: AuthenticationFailed | InsufficientScope) -> str:
    """A sentence saying why a caller was refused, for an adapter whose refusals carry a
    body for people (DRF's `detail`; PACT's own 401 and 403 have none): the reason code in
    parentheses, never the refusal's own detail, which may hold what a key fetch or a JOSE
    parser said (the log has it)."""
    if isinstance(exc, InsufficientScope):
        needed = "a scope" if len(exc.missing) == 1 else "scopes"
        return f"The delegation lacks {needed} this endpoint needs: {' '.join(exc.missing)}."
    if isinstance(exc, DelegationRejected):
        if exc.reason == "required":
            return "This endpoint needs a delegation token (X-A2A-User-Delegation)."
        return f"The delegation token was refused ({exc.reason})."
    return f"The personal agent's token was refused ({exc.reason})."


class OnceWarning:
    """A WARNING (or another `level`) on `pactmw.adapters`, said once per decorated
    endpoint: a decorator that reads what a middleware verified, on a request that nothing
    verified, refuses every caller (a valid one too), and the log is the only place that can
    say why. `message` takes the path (what the caller wrote, so escaped and cut short)."""

    def __init__(self, message: str, *, level: int = logging.WARNING) -> None:
        self.message = message
        self.level = level
        self.said = False

    def __call__(self, path: str) -> None:
        if not self.said:
            self.said = True
            logger.log(self.level, self.message, loggable(path))


def scopes_without_delegation(what: str, checker: str = _ANY_CHECKER) -> OnceWarning:
    """The warning of a check (`what`, as the app wrote it) that asks for delegated scopes
    of a caller `checker` verified without taking delegations: it refuses every caller."""
    return OnceWarning(_SCOPES_WITHOUT_DELEGATION.format(what=what, checker=checker))


def record_checker(recorded: MutableMapping[str, object], guard: Guard) -> None:
    """Record beside the verified caller (`recorded`: the ASGI scope, the WSGI environ)
    whether `guard`, which verified it, takes delegations."""
    recorded[TAKES_DELEGATION_KEY] = guard.takes_delegation


def takes_no_delegation(recorded: Mapping[str, object]) -> bool:
    """Whether the caller of this request was verified by a guard that takes no delegation
    (`record_checker`), so that no scope asked of it can ever be held."""
    return recorded.get(TAKES_DELEGATION_KEY) is False


def require_provider(given: object, call: str) -> None:
    """A `ConfigError` naming `call` (as the app writes it) when `given` is no Provider (its
    settings, or arguments swapped), raised where the app, route or decorator is built rather
    than as an AttributeError on the first request."""
    if not isinstance(given, Provider):
        raise ConfigError(f"{call}: provider must be a Provider, not {type(given).__name__}")


#: The values an error shows as they were given: plain data, short once cut by `reprlib`. Of
#: anything else (a view, a Provider) only the type is said: its repr says nothing useful.
_PLAIN = (type(None), bool, int, float, str, bytes, list, tuple, set, frozenset, dict)


def _shown(value: object) -> str:
    """`value` as an error about a name (an action, a scope, a Brand's id) shows it."""
    if isinstance(value, str) and not value:
        return "an empty string"
    if value is None:
        return "None"
    if isinstance(value, _PLAIN):
        return f"{type(value).__name__} {reprlib.repr(value)}"
    return type(value).__name__


def _is_name(value: object) -> bool:
    """Whether `value` can name an action or a scope: a non-empty string (an empty one names
    nothing, so no consent and no grant could ever hold it)."""
    return isinstance(value, str) and value != ""


def require_application(given: object, call: str, what: str) -> None:
    """A `ConfigError` naming `call` when `given`, the app a Provider app passes other paths
    to (`what`: "an ASGI application"), is given and is none: an import string or settings
    there failed at the first request the Provider does not serve."""
    if given is not None and not callable(given):
        raise ConfigError(f"{call}: app must be {what}, not {type(given).__name__}")


def require_current_user(given: object, call: str) -> None:
    """A `ConfigError` naming `call` when `current_user` is given and is no function:
    `current_user=signed_in()` (called, not passed) gives a user, which fails on every
    same-app consent page."""
    if given is not None and not callable(given):
        raise ConfigError(
            f"{call}: current_user must be a function that says who is signed in, "
            f"not {type(given).__name__}"
        )


def require_provider_app(
    provider: object, app: object, current_user: object, application: str
) -> None:
    """The checks of `A2AProviderApp(provider, app=..., current_user=...)`, ASGI's and
    WSGI's alike (`application`: what `app` must be, "an ASGI application")."""
    written = "A2AProviderApp(provider, app=...)"
    require_provider(provider, written)
    require_application(app, written, application)
    require_current_user(current_user, written)


def require_strings(given: Iterable[object], call: str, what: str, example: str) -> None:
    """A `ConfigError` when one of `given` (the arguments of the decorator `call`: its
    scopes, its action, its Brand's id) is no non-empty string. Something other than plain
    data (a view, a Provider) means the decorator was written without its parentheses
    (`@call`, not `@call(...)`) or with another adapter's arguments: it would take the view
    for its argument and fail on every request (a 500). Plain data that is no name (a list
    for `*scopes`, bytes, None, "") would fail at the request or never be held. Either is
    said where the view is decorated. `what` says what `call` takes; `example`, one written
    right."""
    for value in given:
        if _is_name(value):
            continue
        if isinstance(value, _PLAIN):
            raise ConfigError(f"{call} takes {what}: @{call}({example!r}), not {_shown(value)}")
        raise ConfigError(
            f"{call} takes {what}: @{call}({example!r}), not @{call}; got {_shown(value)}"
        )


def require_view(given: object, call: str) -> None:
    """A `ConfigError` naming `call` when its positional argument, the view it decorates
    (Flask's and Django's `personal_agent_required`), is given and is no callable:
    `@personal_agent_required(True)`, meant as `optional=True`, took True for the view, and
    the decorator it returned then ran as the view (an error, or another view's answer)."""
    if given is not None and not callable(given):
        raise ConfigError(
            f"{call} takes the view it decorates, not {_shown(given)}: optional= is "
            f"keyword-only, @{call}(optional=True)"
        )


def require_verifier_not_optional(given: object, call: str, written: str) -> None:
    """A `ConfigError` naming `call` when its verifier, its first argument, is a bool:
    `optional` given by position (`written`, the call written right, says where it goes).
    Anything else that is no verifier is `make_guard`'s to say."""
    if isinstance(given, bool):
        raise ConfigError(
            f"{call}: verifier must be an IdentityVerifier, not {_shown(given)}: optional= is "
            f"keyword-only, {written}"
        )


def require_scope_names(scopes: Iterable[object], call: str) -> None:
    """A `ConfigError` naming `call` (as its signature reads, `poppy_session_required(provider,
    brand_id, *scopes)`) when one of `scopes`, after its other arguments, is no non-empty
    string: a list for `*scopes`, bytes or None failed at the request, and a scope no Session
    can approve refused every caller."""
    for scope in scopes:
        if not _is_name(scope):
            raise ConfigError(
                f"{call}: a scope is a non-empty string, one argument each; not {_shown(scope)}"
            )


def require_brand_id(given: object, call: str, argument: str = "brand_id") -> None:
    """A `ConfigError` naming `call` and its `argument` when `given` is no string: a Brand's
    id, never the Brand (or a list of ids), which failed where the Brand is looked up (an
    unhashable TypeError) or only at the request. An unknown id is the Brand check's to say
    (`check_session_brand`, where the Provider is known)."""
    if not isinstance(given, str):
        raise ConfigError(
            f"{call}: {argument} must be a Brand's id (a string), not {_shown(given)}"
        )


def require_parafe_agent(given: object, call: str) -> None:
    """A `ConfigError` naming `call` when `given` is no `ParafeAgent` (the Provider, its
    settings): the consent check would fail with an AttributeError at each request."""
    if not isinstance(given, ParafeAgent):
        raise ConfigError(
            f"{call}: agent must be a ParafeAgent (provider.parafe_agent(brand_id)), "
            f"not {type(given).__name__}"
        )


def make_guard(
    verifier: IdentityVerifier,
    delegation_provider: Provider | None,
    delegation_brand: str | None,
    path_prefix: str | None = None,
    serves_provider: Provider | None = None,
) -> Guard:
    """The guard behind an adapter's middleware (`path_prefix`: the paths it protects, minus
    the routes of the Provider the app `serves_provider`) or decorators (None), from the
    arguments every adapter takes under the same names, checked here so that a wrong one is
    an error where the adapter is built, naming the argument, never a 500 on the first
    request that needs it."""
    require_verifier(verifier)
    for name, given in (
        ("delegation_provider", delegation_provider),
        ("serves_provider", serves_provider),
    ):
        if given is not None and not isinstance(given, Provider):
            raise ConfigError(f"{name} must be a Provider, not {type(given).__name__}")
    if (delegation_provider is None) != (delegation_brand is None):
        raise ConfigError("delegation_provider and delegation_brand go together: give both")
    if delegation_provider is not None and delegation_brand is not None:
        check_delegation_brand(delegation_provider.brands, delegation_brand)
    if None not in (delegation_provider, serves_provider) and (
        delegation_provider is not serves_provider
    ):
        # The guard knows one Provider: the one whose grants it checks is the one it serves.
        raise ConfigError("delegation_provider and serves_provider must be the same Provider")
    return Guard(
        verifier,
        provider=delegation_provider or serves_provider,
        delegation_brand=delegation_brand,
        protect_prefix=path_prefix,
        serves_provider=serves_provider is not None,
    )


class GuardedMiddleware(Generic[_App]):
    """What the ASGI and the WSGI `PersonalAgentMiddleware` are made of: the application
    they wrap (`app`) and the guard of the requests under `path_prefix` (a path starting with
    "/", "/" for all; None: none, use the decorators; anything else is a `ConfigError`).
    With `delegation_provider` and `delegation_brand`, an `X-A2A-User-Delegation` token for
    that Brand is verified too; one sent without them is refused. With `serves_provider`, the
    Provider the wrapped app serves (`a2a_routes`), its paths are left to it: they
    authenticate themselves, and its Agent Card and consent pages are public. Each middleware
    only adds its framework's `__call__`."""

    def __init__(
        self,
        app: _App,
        verifier: IdentityVerifier,
        *,
        path_prefix: str | None = MOUNT,
        delegation_provider: Provider | None = None,
        delegation_brand: str | None = None,
        serves_provider: Provider | None = None,
    ) -> None:
        self.app = app
        prefix = guarded_prefix(path_prefix, "path_prefix", empty_is_none=False)
        self.guard = make_guard(
            verifier, delegation_provider, delegation_brand, prefix, serves_provider
        )
        self._refused_public_route = OnceWarning(REFUSED_PUBLIC_ROUTE)

    def refused(self, method: str, path: str) -> None:
        """Called when the middleware refused `method` on `path`: one of a Provider's public
        routes refused (a Brand's Agent Card above all) is the usual mistake (the Provider
        inside the app, the middleware not told with `serves_provider`), said once in the
        log."""
        if self.guard.guards_a_providers_public_route(method, path):
            self._refused_public_route(path)
