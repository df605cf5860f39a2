"""System checks for `settings.PACTMW`: `manage.py check` (and `runserver`, `migrate`)
report a bad configuration at startup, each problem with an id and the setting's name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib.util import find_spec
from typing import Any, TypeVar
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve
from django.utils.module_loading import import_string

from pactmw.adapters._common import scopes_not_offered
from pactmw.adapters._view_checks import (
    delegation_offered,
    delegation_scopes_tag,
    delegation_tag,
    delegation_view_problem,
    parafe_tag,
    parafe_view_problem,
    poppy_view_problems,
)
from pactmw.adapters.django._config import (
    LOGIN_URL,
    MISSING,
    SETTING,
    brands_using_login_url,
    login_url_not_set,
    naming_login_url,
    raw_settings,
    setting_is_missing,
    with_login_url,
)
from pactmw.adapters.django.middleware import PersonalAgentMiddleware
from pactmw.adapters.django.views import a2a_view
from pactmw.config import ConfigError
from pactmw.provider.app import signed_in_user_unknown
from pactmw.provider.brand import Brand
from pactmw.provider.guard import guard_settings
from pactmw.provider.routes import MOUNT
from pactmw.store import parse_store_url

MIDDLEWARE_PATH = "pactmw.adapters.django.PersonalAgentMiddleware"
_AUTH_MIDDLEWARE = "django.contrib.auth.middleware.AuthenticationMiddleware"
#: What a view's tag says (`delegation_tag`'s decorator, `parafe_tag`'s with its Brand).
_Tag = TypeVar("_Tag")


@register("pactmw")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """pactmw.E001: `PACTMW` does not build; pactmw.E002: it is missing or not a dict;
    pactmw.W001: the middleware is not installed, so no request has `personal_agent`;
    pactmw.W002: a same-app Brand's consent pages cannot know who is signed in;
    pactmw.W003: the URLconf does not route the Brands' paths to pactmw's view;
    pactmw.W004: a Brand's `delegation.login_url` (or, where it is not set, Django's
    `LOGIN_URL`) is a path of this site no URL serves; pactmw.E009: `LOGIN_URL`, which a Brand
    without `delegation.login_url` uses, is no URL name, path or absolute URL;
    pactmw.E004: a routed view's `poppy_session_required` (or `poppy_discovery_view`) names
    a Brand without Poppy; pactmw.E005: a routed view's `delegation_required` (a class-based
    view's method's too) or DRF `HasDelegatedScope` while `delegation_brand` is not set and a
    Brand offers delegation; pactmw.W005: the same where no Brand offers it; pactmw.E007: a
    routed view's `parafe_action` (a class-based view's method's too) names a Brand without
    Parafé, or none where several have it and `parafe_brand` is not set; pactmw.W007: a
    routed `parafe_action` view where no Brand configures Parafé; pactmw.W006: a routed
    view's `delegation_required` or DRF `HasDelegatedScope` asks for a scope the
    `delegation_brand` does not offer; pactmw.E006: a routed DRF
    `HasDelegatedScope` view whose `required_scopes` is no list of scope names (a string, a
    number, an empty name, a generator); pactmw.E008: one without `required_scopes`."""
    messages: list[CheckMessage] = []
    if setting_is_missing():
        messages.append(
            Error(
                f"{MISSING}.",
                hint=(
                    'Set PACTMW = {"audience": "...", "agents": [...]} '
                    "(see pactmw's documentation, Getting started: Django)."
                ),
                obj=SETTING,
                id="pactmw.E002",
            )
        )
        return messages
    provider, delegation_brand, parafe_brand = None, None, None
    data = raw_settings()
    try:
        # What the server builds: Django's LOGIN_URL for a Brand without its own login_url.
        data = with_login_url(data)
    except ConfigError as exc:  # settings.LOGIN_URL's, named in it: nothing else is read
        messages.append(
            Error(
                f"{exc}.",
                hint=f"Set {LOGIN_URL} to your login view's URL name or path (django.contrib."
                "auth's is 'login', with `path('accounts/', include('django.contrib.auth."
                "urls'))`), or set the Brand's delegation.login_url; until then pactmw "
                "answers 503 on the paths it serves.",
                obj=LOGIN_URL,
                id="pactmw.E009",
            )
        )
        # A stand-in, so that the rest of PACTMW is still checked and said at once.
        data = with_login_url(data, "/")
    try:
        checked = guard_settings(data)
        provider, delegation_brand = checked.provider, checked.delegation_brand
        parafe_brand = checked.parafe_brand
        if provider is not None and provider.signing_key_files:
            # Read them now (the files only: nothing is generated), not at the first request.
            provider.signing_keys()
    except ConfigError as exc:
        if (named := naming_login_url(exc, brands_using_login_url(raw_settings()))) is not exc:
            # About the LOGIN_URL a Brand defaulted to: said as LOGIN_URL's, as E009 is (once:
            # a LOGIN_URL already refused above stood in as "/", which this is about).
            if not messages:
                messages.append(
                    Error(
                        f"{named}.",
                        hint=f"Set {LOGIN_URL} to a login page the message allows, or set the "
                        "Brand's delegation.login_url; until then pactmw answers 503 on the "
                        "paths it serves.",
                        obj=LOGIN_URL,
                        id="pactmw.E009",
                    )
                )
        else:
            messages.append(_invalid(str(exc)))
    except Exception as exc:  # anything else is reported as it is
        messages.append(_invalid(f"{type(exc).__name__}: {exc}"))
    messages.extend(_check_store(raw_settings().get("store"), reported=bool(messages)))
    builds = not messages  # the warnings below are about settings that build
    middleware = getattr(django_settings, "MIDDLEWARE", None) or []
    if builds and provider is not None and not _knows_the_user(middleware):
        problem = signed_in_user_unknown(
            provider.brands,
            "request.user",
            remedy=f"Add {_AUTH_MIDDLEWARE} to MIDDLEWARE (and django.contrib.auth to "
            "INSTALLED_APPS)",
        )
        if problem is not None:
            messages.append(Warning(f"{problem}.", obj=SETTING, id="pactmw.W002"))
    if builds and provider is not None:
        messages.extend(_check_routes([brand.id for brand in provider.brands]))
        defaulted = brands_using_login_url(raw_settings())
        messages.extend(_check_login_urls(provider.brands, defaulted))
        messages.extend(_check_poppy_views(provider.brands))
    if builds and delegation_brand is None:
        messages.extend(
            _check_delegation_views(provider is not None and delegation_offered(provider.brands))
        )
    if builds and provider is not None and delegation_brand is not None:
        messages.extend(_check_offered_scopes(provider.brands, delegation_brand))
    if builds:
        messages.extend(_check_required_scopes())
        brands = provider.brands if provider is not None else ()
        messages.extend(_check_parafe_views(brands, parafe_brand))
    if not _has_middleware(middleware, PersonalAgentMiddleware):
        messages.append(
            Warning(
                f"{MIDDLEWARE_PATH} is not in MIDDLEWARE.",
                hint="Add it so requests get request.personal_agent and the prefix is guarded.",
                obj=SETTING,
                id="pactmw.W001",
            )
        )
    return messages


def _invalid(detail: str) -> Error:
    """pactmw.E001: `PACTMW` does not build, for the reason `detail`."""
    return Error(
        f"settings.{SETTING} is invalid: {detail}",
        hint="Fix that key; until then pactmw answers 503 on the paths it serves.",
        obj=SETTING,
        id="pactmw.E001",
    )


@register("pactmw", deploy=True)
def check_deployment(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """pactmw.W009, with Django's own deployment checks (`manage.py check --deploy`):
    `PACTMW["base_url"]` is http://. The Agent Cards advertise it and the consent pages link
    to it, so agents would send their JWTs and the person's delegation tokens in clear, and
    people would sign in and consent over it. Fine in development (runserver, no `--deploy`),
    where it is `http://127.0.0.1:8000`; a URL that is no string is pactmw.E001's."""
    data = raw_settings()
    base_url = data.get("base_url") if isinstance(data, dict) else None
    if not isinstance(base_url, str) or not base_url.lower().startswith("http://"):
        return []
    return [
        Warning(
            f"settings.{SETTING}['base_url'] is {base_url!r}: the Agent Cards advertise it, so "
            "agents would send their tokens (and the person's delegation) in clear, and "
            "people would sign in and consent over it.",
            hint="Set it to the site's public https:// URL (the one your TLS proxy serves).",
            obj=SETTING,
            id="pactmw.W009",
        )
    ]


def _check_routes(brand_ids: list[str]) -> list[CheckMessage]:
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


def _check_login_urls(brands: Iterable[Brand], defaulted: list[Any]) -> list[CheckMessage]:
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


def _check_poppy_views(brands: Iterable[Brand]) -> list[CheckMessage]:
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


def _check_delegation_views(offered: bool) -> list[CheckMessage]:
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


def _check_offered_scopes(brands: Iterable[Brand], delegation_brand: str) -> list[CheckMessage]:
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


def _check_parafe_views(brands: Iterable[Brand], parafe_brand: str | None) -> list[CheckMessage]:
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


def _check_required_scopes() -> list[CheckMessage]:
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


def _has_middleware(entries: list[str], middleware: type) -> bool:
    """Whether an entry of `MIDDLEWARE` is `middleware`, named by the package's path or its
    module's, or a site's subclass of it (found as Django's admin checks find
    `AuthenticationMiddleware`: importing each entry, passing one that does not import)."""
    for entry in entries:
        try:
            found = import_string(entry)
        except ImportError:
            continue
        if isinstance(found, type) and issubclass(found, middleware):
            return True
    return False


def _knows_the_user(entries: list[str]) -> bool:
    """Whether the Provider's views get `request.user`: django.contrib.auth installed, and its
    `AuthenticationMiddleware` (or a subclass) in `MIDDLEWARE`. Its module imports the auth
    models, so it is looked at only where the app is installed."""
    if not apps.is_installed("django.contrib.auth"):
        return False
    from django.contrib.auth.middleware import AuthenticationMiddleware

    return _has_middleware(entries, AuthenticationMiddleware)


def _check_store(store: Any, *, reported: bool) -> list[CheckMessage]:
    """pactmw.E001: `store` is not a store URL (`sqlite://x.db`, `django:`), which otherwise
    shows only at the first request, as a 503; pactmw.E003: `store = "django[:ALIAS]"` names
    a database Django does not have, or one the Django store cannot speak to (neither sqlite
    nor PostgreSQL). `reported`: E001 already stands (a store without brands, say)."""
    if not isinstance(store, str):
        return []
    try:
        parsed = parse_store_url(store)
    except ValueError as exc:  # its message never repeats the URL, which may hold a password
        if reported:
            return []
        return [
            Error(
                f"settings.{SETTING} is invalid: store: {exc}",
                hint="Fix that key; until then pactmw answers 503 on the paths it serves.",
                obj=SETTING,
                id="pactmw.E001",
            )
        ]
    if parsed.alias is None:
        return []
    databases = getattr(django_settings, "DATABASES", {})
    problem = None
    if parsed.alias not in databases:
        problem = f"names database {parsed.alias!r}, which is not in settings.DATABASES"
    else:
        engine = str(databases[parsed.alias].get("ENGINE", ""))
        if not engine.endswith(("sqlite3", "postgresql")):
            problem = f"needs a sqlite or PostgreSQL database; {parsed.alias!r} uses {engine}"
    if problem is None:
        return []
    return [
        Error(
            f"settings.{SETTING}['store'] = {store!r} {problem}.",
            hint='Use "django" (the default database) or "django:ALIAS" of a sqlite or '
            "PostgreSQL entry of DATABASES.",
            obj=SETTING,
            id="pactmw.E003",
        )
    ]


__all__ = [
    "MIDDLEWARE_PATH",
    "check_deployment",
    "check_settings",
]
