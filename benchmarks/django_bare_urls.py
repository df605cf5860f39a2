"""The Django example's URLs without pactmw: see `benchmarks.django_bare_settings`."""

from __future__ import annotations

from benchmarks.bench_apps import ACTOR_ID, ISSUER, SUB
from django.http import HttpRequest, JsonResponse
from django.urls import path
from shopsite.urls import urlpatterns as _example_urlpatterns


def whoami(request: HttpRequest) -> JsonResponse:
    """The example's `whoami` view without `@personal_agent_required`: a fixed caller."""
    return JsonResponse({"issuer": ISSUER, "sub": SUB, "actor_id": ACTOR_ID})


def _without_pactmw(pattern: object) -> object:
    if getattr(pattern, "name", None) == "agent-whoami":
        return path("api/agent/whoami", whoami, name="agent-whoami")
    return pattern


urlpatterns = [
    _without_pactmw(pattern)
    for pattern in _example_urlpatterns
    if not getattr(getattr(pattern, "callback", None), "__module__", "").startswith("pactmw.")
]
