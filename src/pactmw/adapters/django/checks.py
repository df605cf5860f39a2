"""System checks for `settings.PACTMW`: `manage.py check` (and `runserver`, `migrate`)
report a bad configuration at startup, each problem with an id and the setting's name."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.utils.module_loading import import_string

from pactmw.adapters._view_checks import (
    delegation_offered,
)
from pactmw.adapters.django._config import (
    LOGIN_URL,
    MISSING,
    SETTING,
    brands_using_login_url,
    naming_login_url,
    raw_settings,
    setting_is_missing,
    with_login_url,
)
from pactmw.adapters.django._url_checks import (
    check_delegation_views,
    check_login_urls,
    check_offered_scopes,
    check_parafe_views,
    check_poppy_views,
    check_required_scopes,
    check_routes,
)
from pactmw.adapters.django.middleware import PersonalAgentMiddleware
from pactmw.config import ConfigError
from pactmw.provider.app import signed_in_user_unknown
from pactmw.provider.guard import guard_settings
from pactmw.store import parse_store_url

MIDDLEWARE_PATH = "pactmw.adapters.django.PersonalAgentMiddleware"
_AUTH_MIDDLEWARE = "django.contrib.auth.middleware.AuthenticationMiddleware"


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
        messages.extend(check_routes([brand.id for brand in provider.brands]))
        defaulted = brands_using_login_url(raw_settings())
        messages.extend(check_login_urls(provider.brands, defaulted))
        messages.extend(check_poppy_views(provider.brands))
    if builds and delegation_brand is None:
        messages.extend(
            check_delegation_views(provider is not None and delegation_offered(provider.brands))
        )
    if builds and provider is not None and delegation_brand is not None:
        messages.extend(check_offered_scopes(provider.brands, delegation_brand))
    if builds:
        messages.extend(check_required_scopes())
        brands = provider.brands if provider is not None else ()
        messages.extend(check_parafe_views(brands, parafe_brand))
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
