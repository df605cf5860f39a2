"""A site's own subclass of pactmw's middleware (tests/adapters/test_django_middleware_check.py)."""

from __future__ import annotations

from pactmw.adapters.django.middleware import PersonalAgentMiddleware


class SiteAgentMiddleware(PersonalAgentMiddleware):
    """What a site may add around pactmw's check (here nothing)."""
