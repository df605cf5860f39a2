"""What `settings.PACTMW` builds, once per process, rebuilt when the setting changes.

A configuration that does not build is reported by the system checks (`manage.py check`,
`pactmw.E001`) at startup; at run time it is logged once and answered 503 on the paths
pactmw serves, so that a typo never turns the rest of the site into 500s.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, reverse
from django.utils.functional import Promise

from pactmw.adapters._common import provider_of
from pactmw.config import ConfigError
from pactmw.core._fork import fresh_lock_in_child
from pactmw.core.errors import RequestRefused
from pactmw.provider.app import Provider
from pactmw.provider.guard import Guard, guard_settings
from pactmw.provider.routes import MOUNT
from pactmw.store import parse_store_url
from pactmw.store.base import StoreError

logger = logging.getLogger("pactmw.django")
SETTING = "PACTMW"
SHOW_MESSAGE_TEXT = "admin_show_message_text"


def raw_settings() -> Any:
    return getattr(django_settings, SETTING, {})


#: What a site without a usable `settings.PACTMW` is told (pactmw.E002), by the system checks,
#: the server's log and `manage.py pactmw` alike.
MISSING = f"settings.{SETTING} is missing or not a dict"


#: The app whose migrations create the tables of `store = "django"`, and whose system checks
#: report a bad `PACTMW` at startup.
APP = "pactmw.adapters.django"


def missing_app() -> str | None:
    """What is wrong when `PACTMW` keeps its state in this site's database (`store =
    "django[:ALIAS]"`) but `INSTALLED_APPS` lacks pactmw's app: `migrate` never creates the
    tables, and no system check runs to say so. Read from the settings alone, so that the
    middleware can say it at startup. None when nothing is wrong (or apps are not loaded)."""
    from django.apps import apps

    if not apps.apps_ready or apps.is_installed(APP) or state_database() is None:
        return None
    return (
        f"settings.{SETTING}['store'] is {raw_settings()['store']!r}, but {APP!r} is not in "
        "INSTALLED_APPS: add it (its migrations create pactmw's tables) and run "
        "`manage.py migrate`"
    )


def setting_is_missing() -> bool:
    """Whether `settings.PACTMW` is absent or not a dict: nothing any key could be named in
    (its `audience` is not "required" of a setting that is not there)."""
    return not hasattr(django_settings, SETTING) or not isinstance(raw_settings(), dict)


def with_template_dirs(data: Any) -> Any:
    """`data` with `templates` set to the directories of Django's template engines (DIRS, and
    the apps' `templates/` under APP_DIRS) unless it names its own: a Brand overrides
    `pactmw/consent.html` and the other pages where it keeps its other templates."""
    if not isinstance(data, dict) or "templates" in data:
        return data
    from django.template import engines

    folders = [str(folder) for engine in engines.all() for folder in engine.template_dirs]
    return {**data, "templates": folders} if folders else data


#: Django's setting that a Brand's `delegation.login_url` is when the Brand leaves it out.
LOGIN_URL = "LOGIN_URL"
#: How a login page's URL starts, as the Provider requires of its own `login_url`.
_LOGIN_URL_PREFIXES = ("http://", "https://", "/")


def brands_using_login_url(data: Any) -> list[Any]:
    """The ids of the Brands of `data` (`settings.PACTMW` as written) whose `delegation`
    table leaves out `login_url` (or sets it to None), so that Django's `settings.LOGIN_URL`
    is theirs. A table of another shape is left as it is, for the settings' reader to name."""
    brands = data.get("brands") if isinstance(data, Mapping) else None
    if not isinstance(brands, Mapping):
        return []
    return [
        brand_id
        for brand_id, brand in brands.items()
        if isinstance(brand, Mapping)
        and isinstance(brand.get("delegation"), Mapping)
        and brand["delegation"].get("login_url") is None
    ]


def login_url_not_set(brand_ids: Sequence[Any]) -> str:
    """Why `settings.LOGIN_URL` is used: what a message about it says."""
    names = " and ".join(f"brands.{brand_id}.delegation.login_url" for brand_id in brand_ids)
    verb = "is" if len(brand_ids) == 1 else "are"
    return f"{names} {verb} not set, so a person is sent there to sign in before consenting"


def django_login_url(brand_ids: Sequence[Any]) -> str:
    """Django's `settings.LOGIN_URL` as `redirect_to_login` resolves it (`resolve_url`: a
    URL name is reversed, a path or an absolute URL kept), for the Brands `brand_ids`, which
    leave out their own `login_url`. Raises `ConfigError`, naming the setting and those
    Brands, when it is no URL a person can be sent to (a name no URL pattern has, or no
    path: "login.html"). It may import the URLconf: call it once the apps are ready, never
    while the URLconf is being imported."""
    value = getattr(django_settings, LOGIN_URL, None)
    url: Any = None
    if isinstance(value, str) and value.startswith(_LOGIN_URL_PREFIXES):
        # A path or a URL, as `resolve_url` would keep it (no pattern is named "/..."),
        # without its attempt to reverse it, which would import the URLconf for nothing.
        url = value
    elif isinstance(value, (str, Promise)):  # `reverse_lazy(...)` too
        try:
            url = resolve_url(str(value))
        except NoReverseMatch as exc:  # a bare word: a name no pattern has
            if isinstance(value, Promise):
                # `reverse_lazy("logn")` raises as it is evaluated, its repr too: say what
                # it is and Django's reason, which names the URL name.
                raise ConfigError(
                    f"settings.{LOGIN_URL} is {_lazy_call(value)}, which does not reverse "
                    f"({exc}): {login_url_not_set(brand_ids)}"
                ) from None
            url = None
    # The Provider's rule for its own `login_url`: a path of the site or an absolute URL.
    # `resolve_url` returns what is no URL name as it is ("login.html", "./login").
    if not isinstance(url, str) or not url.startswith(_LOGIN_URL_PREFIXES):
        raise ConfigError(
            f"settings.{LOGIN_URL} is {value!r}, which is neither the name of a URL pattern "
            f"of the ROOT_URLCONF, nor a path (/...) nor an absolute URL: "
            f"{login_url_not_set(brand_ids)}"
        )
    return url


def _lazy_call(value: Promise) -> str:
    """The call that made the lazy `value`, as written in settings ("reverse_lazy('logn')"),
    read from what pickling it keeps (the function and its arguments), since evaluating it
    is what fails."""
    try:
        reduced: Any = value.__reduce__()  # (unpickle, (func, args, kwargs, *types))
        func, args, kwargs = reduced[1][:3]
        name = "reverse_lazy" if func is reverse else f"lazy {func.__name__}"
        shown = [repr(arg) for arg in args] + [f"{key}={arg!r}" for key, arg in kwargs.items()]
    except Exception:  # another kind of lazy object: no call to show
        return "a lazy URL"
    return f"{name}({', '.join(shown)})"


def naming_login_url(exc: ConfigError, brand_ids: Sequence[Any]) -> ConfigError:
    """`exc` naming `settings.LOGIN_URL` where it names the `delegation.login_url` of one of
    `brand_ids`, the Brands that leave it out (`brands_using_login_url`): the value it is
    about is Django's, which the operator must change (a Poppy Brand's sign-in link on a
    host its settings do not allow). Any other error is `exc` itself."""
    message = str(exc)
    for brand_id in brand_ids:
        named = f"brands.{brand_id}.delegation.login_url "
        if message.startswith(named):
            return ConfigError(
                f"settings.{LOGIN_URL} {message.removeprefix(named)}: "
                f"{login_url_not_set([brand_id])}"
            )
    return exc


def with_login_url(data: Any, login_url: str | None = None) -> Any:
    """`data` with Django's `settings.LOGIN_URL` (`django_login_url`) as the `login_url`
    of each Brand's `delegation` table that leaves it out; an explicit `login_url` wins.
    `login_url` given: that instead, resolving nothing (for a reader of the settings that
    needs no login page and may run while the URLconf is being imported)."""
    brand_ids = brands_using_login_url(data)
    if not brand_ids:
        return data
    url = django_login_url(brand_ids) if login_url is None else login_url
    brands = dict(data["brands"])
    for brand_id in brand_ids:
        brand = brands[brand_id]
        brands[brand_id] = {**brand, "delegation": {**brand["delegation"], "login_url": url}}
    return {**data, "brands": brands}


def protect_prefix() -> str | None:
    """The guarded prefix as written (with its missing leading "/"), readable even when the
    rest of the settings is not."""
    data = raw_settings()
    prefix = data.get("protect_prefix", MOUNT) if isinstance(data, dict) else MOUNT
    if isinstance(prefix, str) and prefix and not prefix.startswith("/"):
        # "api/" is refused (pactmw.E001; no check runs under an ASGI server): the paths it
        # meant get the broken settings' 503 meanwhile, never served unguarded.
        return "/" + prefix
    return prefix if isinstance(prefix, str) or prefix is None else MOUNT


def show_message_text() -> bool:
    """Whether the admin shows what users and bots wrote (`PACTMW["admin_show_message_text"]`,
    default False)."""
    data = raw_settings()
    return isinstance(data, dict) and data.get(SHOW_MESSAGE_TEXT) is True


def state_in_site_database() -> bool:
    """Whether pactmw's state lives in this site's database: `PACTMW` lists `brands` and its
    `store` is `"django"` or `"django:ALIAS"`. Read from the settings as written, building
    nothing and opening nothing (it is asked on every admin page); a value that does not
    parse counts as no, and the system checks report it."""
    return state_database() is not None


def state_database() -> str | None:
    """The `DATABASES` alias of pactmw's state (`"default"` for `"django"`), or None where it
    is not in this site's database; see `state_in_site_database`."""
    data = raw_settings()
    if not isinstance(data, Mapping) or not isinstance(data.get("brands"), Mapping):
        return None
    store = data.get("store")  # the default store is a sqlite file, not this database
    if not isinstance(store, str):
        return None
    try:
        return parse_store_url(store).alias
    except ValueError:
        return None


class Configured:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # A preloading server (gunicorn --preload) builds the guard in its master and forks
        # its workers: a lock another thread held around a build would stay held for ever in
        # a worker. What was built is kept (the Provider and its store look after their own
        # connections and locks across the fork); a build the fork cut short is redone.
        fresh_lock_in_child(self)
        self._guard: Guard | None = None
        self._error: Exception | None = None

    def check_at_startup(self) -> None:
        """Build the guard (and the Provider: its store, its keys) now, logging once what is
        wrong, as `guard()` does. The middleware calls it as the server starts (Django builds
        the middleware in `get_wsgi_application()`/`get_asgi_application()`), since no
        system check runs under gunicorn or uvicorn, and they open nothing anyway: a store
        that does not open would otherwise be said at the first request to pactmw's paths.
        Not in `AppConfig.ready()`, which every management command runs (`migrate` on a
        fresh database, `collectstatic` in an image build), with no server to start."""
        with contextlib.suppress(RequestRefused):  # logged where it was built; 503 meanwhile
            self.guard()

    def _check_settings(self) -> None:
        if self._guard is not None or self._error is not None:
            return
        if setting_is_missing():
            self._error = ConfigError(MISSING)
            logger.error(
                "%s; pactmw answers 503 until it is set "
                "(manage.py check reports it as pactmw.E002)",
                MISSING,
            )
        elif (problem := missing_app()) is not None:
            self._error = ConfigError(problem)
            logger.error("%s; pactmw answers 503 until it is fixed", problem)

    def guard(self) -> Guard:
        """The guard; raises `RequestRefused(503)` (logged once) when the settings are bad."""
        with self._lock:
            self._check_settings()
            if self._guard is None and self._error is None:
                resolved = False  # whether LOGIN_URL (the first step) went through
                try:
                    # A Brand without `delegation.login_url` gets Django's `LOGIN_URL`, a
                    # URL name reversed here. That imports the URLconf, which cannot be
                    # done while the settings or the apps load; the guard is built after
                    # both, at the server's start (the middleware's `check_at_startup`) or
                    # at its first use, then kept. So the name is resolved once, with
                    # everything else a bad setting is found in, and a bad one is said at
                    # startup, never a 500 at the first redirect (resolving at each
                    # redirect, as `redirect_to_login` does, would find it there). It is
                    # resolved as `reverse` does outside a request: under FORCE_SCRIPT_NAME's
                    # prefix, where a site served below a path (SCRIPT_NAME) must set it.
                    data = with_login_url(with_template_dirs(raw_settings()))
                    resolved = True
                    self._guard = guard_settings(data).build()
                except ConfigError as exc:
                    self._error = exc
                    if not resolved:  # settings.LOGIN_URL's, which `exc` names
                        logger.error(
                            "%s; pactmw answers 503 until it is fixed "
                            "(manage.py check reports it as pactmw.E009)",
                            exc,
                        )
                    elif (
                        named := naming_login_url(exc, brands_using_login_url(raw_settings()))
                    ) is not exc:  # about the LOGIN_URL a Brand defaulted to, which it names
                        self._error = named
                        logger.error(
                            "%s; pactmw answers 503 until it is fixed "
                            "(manage.py check reports it as pactmw.E009)",
                            named,
                        )
                    else:
                        logger.error(
                            "settings.%s is invalid: %s; pactmw answers 503 until it is fixed "
                            "(manage.py check reports it as pactmw.E001)",
                            SETTING,
                            exc,
                        )
                except StoreError as exc:  # its message says which store, and why
                    self._error = exc
                    logger.error(
                        "settings.%s: the store does not open: %s; pactmw answers 503 until "
                        "it is fixed",
                        SETTING,
                        exc,
                    )
                except Exception as exc:  # a key file that cannot be read, a bug
                    self._error = exc
                    logger.exception(
                        "settings.%s could not be built; pactmw answers 503 until it is fixed",
                        SETTING,
                    )
            if self._guard is None:
                raise RequestRefused(503)
            return self._guard

    @property
    def problem(self) -> Exception | None:
        """Why the settings did not build (None when they did, or were not built yet)."""
        return self._error

    def reset(self) -> None:
        with self._lock:
            if self._guard is not None and self._guard.provider is not None:
                self._guard.provider.close()
            self._guard, self._error = None, None


configured = Configured()


def _on_setting_changed(*, setting: str, **_: Any) -> None:
    if setting in (SETTING, LOGIN_URL):  # LOGIN_URL: a Brand's login page may be it
        configured.reset()


setting_changed.connect(_on_setting_changed)


def get_guard() -> Guard:
    return configured.guard()


def get_verifier() -> Any:
    """The process's verifier built from `settings.PACTMW` (for custom views and admin)."""
    return configured.guard().verifier


def takes_delegation() -> bool:
    """Whether the settings' guard verifies delegations (a guard that does not build is
    answered 503 elsewhere, and said there)."""
    try:
        return configured.guard().takes_delegation
    except RequestRefused:
        return True


def settings_guard() -> Guard | None:
    """The settings' guard, or None where they do not build (answered 503 elsewhere, and
    said there): for the checks that only say why a view refuses every caller."""
    try:
        return configured.guard()
    except RequestRefused:
        return None


def get_provider() -> Provider:
    """The process's Provider built from `settings.PACTMW` (which must list `brands`)."""
    return provider_of(configured.guard(), f"settings.{SETTING}")


__all__ = [
    "APP",
    "LOGIN_URL",
    "MISSING",
    "SETTING",
    "SHOW_MESSAGE_TEXT",
    "Configured",
    "brands_using_login_url",
    "configured",
    "django_login_url",
    "get_guard",
    "get_provider",
    "get_verifier",
    "login_url_not_set",
    "missing_app",
    "naming_login_url",
    "protect_prefix",
    "raw_settings",
    "setting_is_missing",
    "settings_guard",
    "show_message_text",
    "state_database",
    "state_in_site_database",
    "takes_delegation",
    "with_login_url",
    "with_template_dirs",
]
