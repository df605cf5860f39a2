"""The system checks that read the URLconf (`manage.py check`, from `checks.check_settings`):
which views the routed patterns reach, and what each one's pactmw decorators ask of the
settings (the Brands' paths routed, the login page served, a scope offered, a Parafé or Poppy
Brand that exists)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib.util import find_spec
from typing import Any, TypeVar
from urllib.parse import urlsplit

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Warning
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve

from pactmw.adapters._common import scopes_not_offered
from pactmw.adapters._view_checks import (
    delegation_scopes_tag,
    delegation_tag,
    delegation_view_problem,
    parafe_tag,
    parafe_view_problem,
    poppy_view_problems,
)
from pactmw.adapters.django._config import (
    LOGIN_URL,
    SETTING,
    login_url_not_set,
)
from pactmw.adapters.django.views import a2a_view
from pactmw.provider.brand import Brand
from pactmw.provider.routes import MOUNT

#: What a view's tag says (`delegation_tag`'s decorator, `parafe_tag`'s with its Brand).
_Tag = TypeVar("_Tag")


def check_routes(brand_ids: list[str]) -> list[CheckMessage]:
    """pactmw.W003: a Brand's path (`/a2a/{brand}/...`) does not reach `a2a_view`, so every
    agent gets the site's 404 and nothing says why (`a2a_urlpatterns()` left out)."""
    unrouted = [brand_id for brand_id in brand_ids if not _routed(brand_id)]
    if not unrouted:
        return []
    paths = ", ".join(f"{MOUNT}{brand_id}/" for brand_id in unrouted)
    return [
        Warning(
            f"settings.{SETTING} lists brands, but no URL pattern routes {paths} to pactmw's "
            "view: agents would get 404.",
            hint="Add `urlpatterns += a2a_urlpatterns()` (from pactmw.adapters.django) to "
            "the ROOT_URLCONF's urls.py.",
            obj=SETTING,
            id="pactmw.W003",
        )
    ]


def _routed(brand_id: str) -> bool:
    # The card's path: every Brand route is under the same pattern.
    try:
        return resolve(f"{MOUNT}{brand_id}/.well-known/agent-card.json").func is a2a_view
    except Resolver404:
        return False


def check_login_urls(brands: Iterable[Brand], defaulted: list[Any]) -> list[CheckMessage]:
    """pactmw.W004: a Brand's `delegation.login_url` is a path on this site (the consent
    pages redirect to it relative to themselves) that the URLconf does not resolve, so a
    person sent to sign in gets the site's 404. An absolute URL (or `//host/...`) is another
    site's business and is not looked at. The Brands `defaulted` leave it out: theirs is
    Django's `LOGIN_URL` (resolved), which the warning names."""
    messages: list[CheckMessage] = []
    for brand in brands:
        if brand.delegation is None:
            continue
        login_url = brand.delegation.login_url
        login = urlsplit(login_url)
        if login.scheme or login.netloc or _resolves(login.path):
            continue
        if brand.id in defaulted:
            written = getattr(django_settings, LOGIN_URL, None)
            messages.append(
                Warning(
                    f"settings.{LOGIN_URL} is {written!r} ({login_url_not_set([brand.id])}), "
                    f"but no URL pattern of the ROOT_URLCONF serves {login.path}: they would "
                    "get 404.",
                    hint="Route your login view at that path (django.contrib.auth's is "
                    "`path('accounts/', include('django.contrib.auth.urls'))`: "
                    f"/accounts/login/), or set {LOGIN_URL} to its URL name or path, or set "
                    "the Brand's delegation.login_url.",
                    obj=LOGIN_URL,
                    id="pactmw.W004",
                )
            )
            continue
        messages.append(
            Warning(
                f"settings.{SETTING}'s brands.{brand.id}.delegation.login_url is "
                f"{login_url!r}, but no URL pattern of the ROOT_URLCONF serves {login.path}: "
                "a person sent to sign in before consenting would get 404.",
                hint="Route your login view at that path (django.contrib.auth's is "
                "`path('accounts/', include('django.contrib.auth.urls'))`: "
                "/accounts/login/), or set login_url to your login page's path or URL.",
                obj=SETTING,
                id="pactmw.W004",
            )
        )
    return messages


def check_poppy_views(brands: Iterable[Brand]) -> list[CheckMessage]:
    """pactmw.E004: a view the URLconf routes is decorated with `poppy_session_required` (or
    made by `poppy_discovery_view`) for a Brand that is not one of the Provider's or has no
    Poppy (a typo): every request to it would fail. A view no URL routes, or any view under
    a server that runs no check, answers 503 instead, said once at ERROR (`PoppyViewCheck`)."""
    views = [view for _, view in _routed_views(get_resolver().url_patterns)]
    return [
        Error(
            f"settings.{SETTING}: {problem}.",
            hint="Name one of the Brands with Poppy in poppy_session_required(...) or "
            "poppy_discovery_view(...), or add [brands.X.poppy] to the Brand.",
            obj=SETTING,
            id="pactmw.E004",
        )
        for problem in poppy_view_problems(brands, views)
    ]


def check_delegation_views(offered: bool) -> list[CheckMessage]:
    """pactmw.E005: a view the URLconf routes checks a delegation (`delegation_required` on
    a function, or with `method_decorator` on a class-based view's method or `dispatch`;
    DRF's `HasDelegatedScope`) while `PACTMW` has no `delegation_brand`: no delegation is
    verified, so every caller would be refused. `offered`: a Brand offers delegation, so the
    setting was forgotten (an error); where none does (pactmw.W005), the view cannot work in
    this deployment, which is said without stopping the site (an example app configured
    without delegation). A view no URL routes says so at its first refused request."""
    messages: list[CheckMessage] = []
    said: set[tuple[str, int]] = set()
    for path, view in _routed_views(get_resolver().url_patterns):
        for check, where in _delegation_checks(path, view):
            # A view routed twice (DRF's router adds a format suffix's route) is said once.
            if (check, id(view)) in said:
                continue
            said.add((check, id(view)))
            said_of_it = delegation_view_problem(
                f"settings.{SETTING}", check, where, offered=offered
            )
            if offered:  # the setting was forgotten
                messages.append(
                    Error(
                        f"{said_of_it}.",
                        hint="Set PACTMW['delegation_brand'] to one of brands whose delegation "
                        "the views check, or remove delegation_required (or HasDelegatedScope) "
                        "from them.",
                        obj=SETTING,
                        id="pactmw.E005",
                    )
                )
            else:
                messages.append(
                    Warning(
                        f"{said_of_it}.",
                        hint="Give a Brand a delegation table and name it in "
                        "PACTMW['delegation_brand'], or leave the view unrouted.",
                        obj=SETTING,
                        id="pactmw.W005",
                    )
                )
    return messages


def check_offered_scopes(brands: Iterable[Brand], delegation_brand: str) -> list[CheckMessage]:
    """pactmw.W006: a view the URLconf routes asks for a delegated scope the
    `delegation_brand` does not offer (`delegation_required`, on a function or a class-based
    view's method, or DRF's `HasDelegatedScope`'s `required_scopes`): no person can grant
    it (a misspelt scope), so every caller would be refused. A warning, as the same line is
    at the first refused request where no check runs (`UnofferedScopesWarning`)."""
    brands = tuple(brands)
    messages: list[CheckMessage] = []
    said: set[tuple[str, int]] = set()
    for path, view in _routed_views(get_resolver().url_patterns):
        for (check, scopes), where in _scoped_checks(path, view):
            if (check, id(view)) in said:  # a view routed twice is said once
                continue
            said.add((check, id(view)))
            problem = scopes_not_offered(brands, delegation_brand, scopes)
            if problem is not None:
                messages.append(
                    Warning(
                        f"{check} on {where} refuses every caller: {problem}.",
                        hint="Ask for one of the scopes the Brand offers, or add it to "
                        "[brands.X.delegation.scopes].",
                        obj=SETTING,
                        id="pactmw.W006",
                    )
                )
    return messages


def _scoped_checks(path: str, view: object) -> Iterator[tuple[tuple[str, tuple[str, ...]], str]]:
    """Each check of a delegation the view routed at `path` makes, as written, with the
    scopes it asks for and where it is (see `_delegation_checks`); a DRF view whose
    `required_scopes` is wrong is pactmw.E006's or E008's, not here."""
    for (check, scopes, _), where in _tagged(path, view, delegation_scopes_tag):
        yield (check, scopes), where
    view_class = _view_class(view)
    permission = _drf_delegated_scope_check(view_class) if view_class is not None else None
    if view_class is not None and permission is not None:
        from pactmw.adapters.django.rest_framework import _required_scopes_problem

        if _required_scopes_problem(view_class) is None:
            scopes = tuple(view_class.required_scopes)  # type: ignore[attr-defined]
            yield (permission, scopes), f"{path} ({view_class.__name__})"


def check_parafe_views(brands: Iterable[Brand], parafe_brand: str | None) -> list[CheckMessage]:
    """pactmw.E007: a view the URLconf routes is behind `parafe_action` (on a function, or
    with `method_decorator` on a class-based view's method or `dispatch`) naming a Brand that
    is not one of brands or has no Parafé, or naming none where several Brands configure it
    and `parafe_brand` is not set: every request to it would be refused (a 503). Where no
    Brand configures Parafé (pactmw.W007), the view cannot work in this deployment, which is
    said without stopping the site (a test site configured without Parafé). A view no URL
    routes says so at its first request."""
    brands = tuple(brands)
    messages: list[CheckMessage] = []
    said: set[tuple[str, int]] = set()
    for path, view in _routed_views(get_resolver().url_patterns):
        for (check, brand), where in _tagged(path, view, parafe_tag):
            if (check, id(view)) in said:  # a view routed twice is said once
                continue
            said.add((check, id(view)))
            problem = parafe_view_problem(
                brands, parafe_brand, f"settings.{SETTING}", check, where, brand
            )
            if problem is None:
                continue
            if problem.stops:
                messages.append(
                    Error(
                        f"{problem.message}.",
                        hint="Name a Brand with [brands.X.parafe] in parafe_action(..., "
                        "brand=...) or PACTMW['parafe_brand'], or give the Brand a parafe "
                        "table.",
                        obj=SETTING,
                        id="pactmw.E007",
                    )
                )
            else:
                messages.append(
                    Warning(
                        f"{problem.message}.",
                        hint="Give a Brand a parafe table ([brands.X.parafe]), or leave the "
                        "view unrouted.",
                        obj=SETTING,
                        id="pactmw.W007",
                    )
                )
    return messages


def check_required_scopes() -> list[CheckMessage]:
    """pactmw.E006: a routed DRF view under `HasDelegatedScope` whose `required_scopes` is a
    string: each character would be a scope, so every delegation would be refused.
    pactmw.E008: one without `required_scopes` (or None), which cannot say which scopes it
    needs (an empty list, written out, admits any delegation). Either view's requests are
    refused (503) and said once in the log (`_required_scopes_problem` says both)."""
    messages: list[CheckMessage] = []
    said: set[int] = set()
    for path, view in _routed_views(get_resolver().url_patterns):
        view_class = _view_class(view)
        if view_class is None or id(view) in said:
            continue
        said.add(id(view))
        if _drf_delegated_scope_check(view_class) is None:
            continue
        from pactmw.adapters.django.rest_framework import _required_scopes_problem

        problem = _required_scopes_problem(view_class)
        if problem is not None:
            messages.append(
                Error(
                    f"HasDelegatedScope on {path}: {problem.message}.",
                    hint="Its requests are refused (503) until it is fixed.",
                    obj=SETTING,
                    id=problem.check,
                )
            )
    return messages


def _view_class(view: object) -> type | None:
    """The class of a view `as_view()` made: Django leaves it as `view_class`, DRF too and as
    `cls` (a ViewSet's only that); None for a function view."""
    view_class = getattr(view, "view_class", None) or getattr(view, "cls", None)
    return view_class if isinstance(view_class, type) else None


def _delegation_checks(path: str, view: object) -> Iterator[tuple[str, str]]:
    """Each check of a delegation the view routed at `path` makes, as written, with where it
    is (`/api/x (SupportView.get)` for a class-based view's method)."""
    yield from _tagged(path, view, delegation_tag)
    view_class = _view_class(view)
    permission = _drf_delegated_scope_check(view_class) if view_class is not None else None
    if view_class is not None and permission is not None:
        yield permission, f"{path} ({view_class.__name__})"


def _tagged(
    path: str, view: object, tag: Callable[[object], _Tag | None]
) -> Iterator[tuple[_Tag, str]]:
    """What `tag` reads on the view routed at `path` (a decorator of ours, as written), with
    where it is: the view itself, or each method a class-based view's request may run
    (`/api/x (SupportView.get)`), found as `method_decorator` left the tag on it."""
    # A class-based view's function is the class's machinery; its methods are the app's.
    view_class = _view_class(view)
    if view_class is None:
        found = tag(view)
        if found is not None:
            yield found, path
        return
    for name in _handler_names(view, view_class):
        found = tag(getattr(view_class, name, None))
        if found is not None:
            yield found, f"{path} ({view_class.__name__}.{name})"


def _handler_names(view: object, view_class: type) -> list[str]:
    """The methods of `view_class` a request may run: `dispatch`, one a method of HTTP, and
    a DRF ViewSet's actions (`as_view({"get": "list"})`)."""
    actions = getattr(view, "actions", None)
    names = [
        "dispatch",
        *getattr(view_class, "http_method_names", ()),
        *(actions.values() if isinstance(actions, dict) else ()),
    ]
    return list(dict.fromkeys(name for name in names if isinstance(name, str)))


def _drf_delegated_scope_check(view_class: type) -> str | None:
    """`HasDelegatedScope (required_scopes [...])` for a DRF view class that needs it; None
    for another, and where Django REST framework is not installed (no view can use it)."""
    if find_spec("rest_framework") is None:
        return None
    from pactmw.adapters.django.rest_framework import _delegated_scope_check

    return _delegated_scope_check(view_class)


def _routed_views(patterns: Iterable[Any], prefix: str = "/") -> Iterator[tuple[str, object]]:
    """The views of the URLconf's `patterns`, through every `include(...)`, each with its
    route as written (`/api/orders`; a regex pattern's as it is), as Django's own URL checks
    walk them (`URLResolver.url_patterns`)."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routed_views(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern.callback


def _resolves(path: str) -> bool:
    """Whether the URLconf serves `path`, a path as the browser asks for it: under
    `FORCE_SCRIPT_NAME` the site's paths start with it, which `resolve` does not expect."""
    script = (getattr(django_settings, "FORCE_SCRIPT_NAME", None) or "").rstrip("/")
    if script and (path == script or path.startswith(script + "/")):
        path = path[len(script) :] or "/"
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


__all__ = [
    "check_delegation_views",
    "check_login_urls",
    "check_offered_scopes",
    "check_parafe_views",
    "check_poppy_views",
    "check_required_scopes",
    "check_routes",
]
