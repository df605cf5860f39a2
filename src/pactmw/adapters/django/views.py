"""The Provider as a Django view: `urlpatterns += a2a_urlpatterns()`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt

from pactmw.adapters.django._config import configured
from pactmw.adapters.django._http import body_reader, neutral_request, refused, to_django
from pactmw.core.errors import RequestRefused
from pactmw.provider.delegated import SignedInUser
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

    try:
        provider = configured.guard().provider
    except RequestRefused as exc:
        return refused(exc)
    if provider is None:
        return refused(RequestRefused(404))
    response = provider.handle(neutral_request(request), body_reader(request), current_user)
    return to_django(response)


def a2a_urlpatterns() -> list[URLPattern]:
    """URL patterns for the Provider: `urlpatterns += a2a_urlpatterns()` in the root urls.py."""
    return [re_path(f"^{MOUNT.lstrip('/')}", a2a_view, name="pactmw-a2a")]


__all__ = [
    "a2a_urlpatterns",
    "a2a_view",
]
