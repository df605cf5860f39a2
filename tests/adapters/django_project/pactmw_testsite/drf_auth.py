"""The test project's own DRF scheme next to pactmw's (its own module: DRF imports it from
its settings while `rest_framework.views` loads, so it must not import views itself)."""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request


class ApiKeyAuthentication(BaseAuthentication):  # type: ignore[misc]
    """`Authorization: Bearer key-123`."""

    def authenticate(self, request: Request) -> tuple[str, str] | None:
        if request.META.get("HTTP_AUTHORIZATION") == "Bearer key-123":
            return ("api-client", "key-123")
        return None
