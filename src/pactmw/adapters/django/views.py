"""The Provider as a Django view: `urlpatterns += a2a_urlpatterns()`."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt

from pactmw.adapters._arguments import require_brand_id
from pactmw.adapters._common import NOT_FOUND
from pactmw.adapters._view_checks import PoppyViewCheck, tag_poppy_view
from pactmw.adapters.django._config import configured, raw_settings, with_login_url
from pactmw.adapters.django._http import (
    body_reader,
    method_as_sent,
    neutral_request,
    refused,
    to_django,
)
from pactmw.core.errors import RequestRefused
from pactmw.provider.app import Provider
from pactmw.provider.delegated import SignedInUser
from pactmw.provider.guard import guard_settings
from pactmw.provider.routes import MOUNT


@csrf_exempt
def a2a_view(request: HttpRequest) -> HttpResponse:
    """Serve every `/a2a/...` request with the configured Provider.

    CSRF-exempt: callers are personal agents authenticating with a bearer JWT, never a
    browser session, so there is no ambient credential for a forged request to ride on.
    (The consent pages a person opens carry their own CSRF token.)
    """

    def current_user() -> SignedInUser | None:
        # django.contrib.auth's signed-in user, when the app uses it (same-app consent).
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return SignedInUser(account=str(user.pk), label=user.get_username())

    provider = _provider()
    if not isinstance(provider, Provider):
        return provider
    response = provider.handle(neutral_request(request), body_reader(request), current_user)
    return to_django(response)


def _provider() -> Provider | HttpResponse:
    """The configured Provider, or the answer instead: the 503 of settings that do not build,
    a 404 where they list no brands."""
    try:
        provider = configured.guard().provider
    except RequestRefused as exc:
        return refused(exc)
    return to_django(NOT_FOUND) if provider is None else provider


def a2a_urlpatterns() -> list[URLPattern]:
    """URL patterns for the Provider: `urlpatterns += a2a_urlpatterns()` in the root urls.py
    (`/a2a/...`, and, when a Brand of `settings.PACTMW` enables Poppy, Poppy's
    `/.well-known/poppy.json` and issuer metadata).

    Read when the urls.py calls it, as Django imports the URLconf (after the settings, at the
    first request or check): a site's own `/.well-known/` routes stay its own where no Brand
    has Poppy. The list is made once, so a test that changes `PACTMW` to add or remove Poppy
    (`override_settings`) also needs a URLconf that calls it again."""
    patterns = [re_path(f"^{MOUNT.lstrip('/')}", a2a_view, name="pactmw-a2a")]
    if _serves_poppy():
        # Poppy's root documents: poppy.json (chosen by Host) and the issuers' RFC 8414
        # metadata, whose well-known path comes before the issuer's path.
        patterns += [
            re_path(r"^\.well-known/poppy\.json$", a2a_view, name="pactmw-poppy"),
            re_path(
                r"^\.well-known/oauth-authorization-server/",
                a2a_view,
                name="pactmw-poppy-metadata",
            ),
        ]
    return patterns


def _serves_poppy() -> bool:
    """Whether a Brand of `settings.PACTMW` enables Poppy, from the settings as checked,
    opening nothing (a `manage.py migrate` imports the URLconf through the system checks).
    Settings that do not build keep the routes, answered 503 as pactmw's other paths are
    until the settings are fixed (the checks and the startup log say why)."""
    try:
        # Django's LOGIN_URL, which a Brand without `login_url` uses, may be a URL name that
        # cannot be reversed while the URLconf is being imported: a stand-in path, as what
        # is read here is only whether a Brand has Poppy (the checks say a bad LOGIN_URL).
        provider = guard_settings(with_login_url(raw_settings(), "/")).provider
    except Exception:  # ConfigError, or a handler that fails to import: reported elsewhere
        return True
    return provider is not None and any(brand.poppy is not None for brand in provider.brands)


def poppy_discovery_view(brand_id: str) -> Callable[[HttpRequest], HttpResponse]:
    """A view answering a Brand's `/.well-known/poppy.json` on its own site, when that site
    is not the one serving `a2a_urlpatterns()` (the document itself, chosen by `Host` among
    the Brand's `poppy.domains`; never a redirect). A Brand without Poppy is reported by
    `manage.py check` (pactmw.E004) where the URLconf routes the view; under a server that
    runs no check (gunicorn, uvicorn), each request is a 503, said once at ERROR naming this
    view. A `brand_id` that is no string is a `ConfigError` here."""
    require_brand_id(brand_id, "poppy_discovery_view(brand_id)")
    setting = f"poppy_discovery_view({brand_id!r})"
    check = PoppyViewCheck(brand_id, setting)

    def view(request: HttpRequest) -> HttpResponse:
        provider = _provider()  # answered as `a2a_view` answers without one
        if not isinstance(provider, Provider):
            return provider
        # The system check (pactmw.E004) checked the routed views, where it ran; a server
        # started without it (gunicorn, uvicorn) learns it here.
        unavailable = check.refusal(provider.brands.values(), request.path)
        if unavailable is not None:
            return to_django(unavailable)
        method = method_as_sent(request)
        return to_django(provider.poppy_discovery(brand_id, request.get_host(), method))

    return tag_poppy_view(view, brand_id, setting)


__all__ = [
    "a2a_urlpatterns",
    "a2a_view",
    "poppy_discovery_view",
]
