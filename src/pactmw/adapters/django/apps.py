"""The Django app: add `"pactmw.adapters.django"` to `INSTALLED_APPS` for the system checks
and for revoking a person's grants when their account is disabled or deleted."""

from __future__ import annotations

from django.apps import AppConfig


class PactmwConfig(AppConfig):
    name = "pactmw.adapters.django"
    label = "pactmw"
    verbose_name = "pactmw (personal agents)"

    def ready(self) -> None:
        from django.apps import apps

        from pactmw.adapters.django import checks, signals  # checks register on import

        del checks
        if apps.is_installed("django.contrib.auth"):
            signals.connect()  # a disabled or deleted account loses its grants


__all__ = [
    "PactmwConfig",
]
