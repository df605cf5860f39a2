"""The Django app: add `"pactmw.adapters.django"` to `INSTALLED_APPS` for the system checks."""

from __future__ import annotations

from django.apps import AppConfig


class PactmwConfig(AppConfig):
    name = "pactmw.adapters.django"
    label = "pactmw"
    verbose_name = "pactmw (personal agents)"

    def ready(self) -> None:
        from pactmw.adapters.django import checks  # registers the system checks

        del checks


__all__ = [
    "PactmwConfig",
]
