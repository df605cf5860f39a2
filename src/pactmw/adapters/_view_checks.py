"""What Flask's and Django's decorators leave on the views they make (`poppy_session_required`,
`poppy_discovery_view`, `delegation_required`, `parafe_action`), and what their startup
checks (Flask's `init_app`, Django's system checks) and, where no check saw a view, its
requests say of them: framework-neutral, no framework is imported here."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TypeVar

from attrs import frozen

from pactmw.adapters._common import Once, OnceWarning, UnofferedScopesWarning
from pactmw.config import ConfigError
from pactmw.core.encoding import loggable
from pactmw.core.http import Response
from pactmw.protocols.poppy import PoppyError
from pactmw.provider.brand import Brand
from pactmw.provider.delegated import OAuthError
from pactmw.provider.errors import error_response
from pactmw.provider.guard import Guard, ParafeEndpoint
from pactmw.provider.poppy import check_session_brand, session_brand_problem

__all__ = [
    "PARAFE_UNAVAILABLE",
    "POPPY_UNAVAILABLE",
    "ParafeViewCheck",
    "ParafeViewProblem",
    "PoppyViewCheck",
    "delegation_brand_unset",
    "delegation_decorator",
    "delegation_offered",
    "delegation_scopes_tag",
    "delegation_tag",
    "delegation_view_problem",
    "delegation_view_problems",
    "no_delegation_brand",
    "no_delegation_offered",
    "no_parafe_agent",
    "parafe_tag",
    "parafe_view_problem",
    "parafe_view_problems",
    "poppy_setting",
    "poppy_view_problems",
    "tag_delegation_view",
    "tag_parafe_view",
    "tag_poppy_view",
]

_T = TypeVar("_T")

logger = logging.getLogger("pactmw.adapters")


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


#: The answer of a view `poppy_session_required` or `poppy_discovery_view` made whose Brand
#: is not one of brands or has no Poppy: 503, as `PARAFE_UNAVAILABLE` and rendered by the
#: same `error_response`, but with Poppy's error body (`{"error": "temporarily_unavailable"}`,
#: not cacheable), not RFC 6749's: its callers are Poppy agents, which read Poppy's `error`
#: member on every answer of a Brand's APIs and documents (Poppy's own 503s, a store or a bot
#: that failed, say the same), and Poppy's errors carry codes, never words (the detail is
#: for logs). No `Retry-After`: the operator fixes it, at no time anyone can tell.
POPPY_UNAVAILABLE = error_response(
    PoppyError(503, "temporarily_unavailable", "the view's Brand has no Poppy")
)


class PoppyViewCheck:
    """What Flask's and Django's `poppy_session_required` and `poppy_discovery_view` run at
    each request before anything else: nothing where the Provider's Brands serve the view's
    Brand, else, where no startup check saw the view (Flask's added after `init_app`,
    Django's under a server that runs no system check), `POPPY_UNAVAILABLE`, the problem
    said once at ERROR naming the view, its Brand and what to fix. Made once a decorator,
    not once a view (see `ParafeViewCheck`)."""

    def __init__(self, brand_id: str, setting: str | None = None) -> None:
        self.brand_id = brand_id
        #: The decorator or helper as the app wrote it (`poppy_setting`'s by default).
        self.written = setting or poppy_setting(brand_id)
        self._once = Once()

    def refusal(self, brands: Iterable[Brand], path: str) -> Response | None:
        """None where `brands` (the Provider's) serve the view's Brand, else the 503 to answer
        (`path`: the request's, what the caller wrote, so escaped and cut short in the log)."""
        problem = session_brand_problem(brands, self.brand_id)
        if problem is None:
            return None
        if self._once.first():
            logger.error(
                "%s on %s refuses every request: %s; name one of the Brands with Poppy in it, "
                "or give the Brand a [brands.X.poppy] table",
                self.written,
                loggable(path),
                problem,
            )
        return POPPY_UNAVAILABLE


#: The attribute Flask's and Django's `delegation_required` leave on the view they make: the
#: decorator as the app wrote it. As with `poppy_session_required`, the extension
#: (`init_app`) and the system check find the views by it, to say at startup that settings
#: without `delegation_brand` refuse every caller of them.
_DELEGATION_ATTRIBUTE = "pactmw_delegation_required"
#: The attribute they leave beside it: the scopes it asks for, and the warning that says,
#: once, that the Brand does not offer one (`UnofferedScopesWarning`), which a startup check
#: that said it first uses up, so that the first request does not say it again.
_DELEGATION_SCOPES_ATTRIBUTE = "pactmw_delegation_scopes"


def delegation_decorator(scopes: Iterable[str]) -> str:
    """`delegation_required(*scopes)` as the app wrote it."""
    return f"delegation_required({', '.join(repr(scope) for scope in scopes)})"


def tag_delegation_view(
    view: _T, scopes: Iterable[str], unoffered: UnofferedScopesWarning | None = None
) -> _T:
    """Leave on a view `delegation_required(*scopes)` made the decorator as written, its
    scopes and the warning (`unoffered`) it says of a scope the Brand does not offer."""
    scopes = tuple(scopes)
    setattr(view, _DELEGATION_ATTRIBUTE, delegation_decorator(scopes))
    setattr(view, _DELEGATION_SCOPES_ATTRIBUTE, (scopes, unoffered))
    return view


def delegation_scopes_tag(
    view: object,
) -> tuple[str, tuple[str, ...], UnofferedScopesWarning | None] | None:
    """The `delegation_required(...)` (as written), its scopes and its warning of a scope
    not offered that a view, or a method Django's `method_decorator` decorated, carries;
    None for another."""
    written = delegation_tag(view)
    tag = getattr(view, _DELEGATION_SCOPES_ATTRIBUTE, None)
    if written is None or not (isinstance(tag, tuple) and len(tag) == 2):
        return None
    scopes, unoffered = tag
    if not isinstance(unoffered, UnofferedScopesWarning):
        unoffered = None
    return written, tuple(scopes), unoffered


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
    written = delegation_decorator(scopes) if check is None else check
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
        self._once = Once()

    def endpoint(self, guard: Guard, path: str) -> ParafeEndpoint | Response:
        """The endpoint's check under `guard`, or the 503 to answer (`path`: the request's,
        what the caller wrote, so escaped and cut short in the log)."""
        problem = parafe_view_problem(
            _brands_of(guard),
            guard.parafe_brand,
            self.settings,
            self.written,
            loggable(path),
            self.brand,
        )
        if problem is None:
            return guard.parafe_endpoint(
                self.action, brand=self.brand, refusal_status=self.refusal_status
            )
        if self._once.first():
            logger.error("%s", problem.message)
        return PARAFE_UNAVAILABLE


def no_parafe_agent(action: str, state: str) -> OnceWarning:
    """The log line, at ERROR once, of an ASGI endpoint `parafe_action(action)` made that was
    given no agent and finds none in the app's state (`state`: `app.state.<name>`)."""
    return OnceWarning(
        f"{_parafe_decorator(action, None).replace('%', '%%')} on %s refuses every request: "
        f"it was given no agent and {state} is no ParafeAgent; pass the Brand's ParafeAgent "
        f"(provider.parafe_agent(brand_id)) as agent=..., or set {state} to it",
        level=logging.ERROR,
    )
