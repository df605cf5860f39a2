"""Django adapter: hybrid (WSGI and ASGI) middleware, `request.personal_agent`, decorators,
the Provider's URL patterns, and system checks.

Configure with one settings dict::

    INSTALLED_APPS = [..., "pactmw.adapters.django"]          # system checks (pactmw.E001)
    MIDDLEWARE = [..., "pactmw.adapters.django.PersonalAgentMiddleware"]
    PACTMW = {"audience": "https://provider.example/a2a", "agents": [...]}

Requests under `PACTMW["protect_prefix"]` (default `/a2a/`) must carry a valid personal-agent
JWT; every request gets `request.personal_agent` (the `PersonalAgent`, or None). Every rule
is the guard's (`pactmw.provider.guard`); this package only translates.
"""

from __future__ import annotations

from pactmw.adapters import _common

_common.require_framework("django", __name__, "Django", "django")

from pactmw.adapters.django._config import configured, get_provider, get_verifier
from pactmw.adapters.django._http import to_django
from pactmw.adapters.django.decorators import (
    delegation_required,
    parafe_action,
    personal_agent_required,
    poppy_session_required,
)
from pactmw.adapters.django.middleware import PersonalAgentMiddleware
from pactmw.adapters.django.views import a2a_urlpatterns, a2a_view, poppy_discovery_view

__all__ = [
    "PersonalAgentMiddleware",
    "a2a_urlpatterns",
    "a2a_view",
    "configured",
    "delegation_required",
    "get_provider",
    "get_verifier",
    "parafe_action",
    "personal_agent_required",
    "poppy_discovery_view",
    "poppy_session_required",
    "to_django",
]
