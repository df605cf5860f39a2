"""Settings of tests/adapters/test_django_app_not_installed.py: the site of `sitedb_settings`
without `"pactmw.adapters.django"` in `INSTALLED_APPS` (so no system check runs)."""

from __future__ import annotations

from pactmw_testsite.sitedb_settings import *  # noqa: F403

INSTALLED_APPS: list[str] = []
