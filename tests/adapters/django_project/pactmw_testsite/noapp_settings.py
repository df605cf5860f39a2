"""Settings of tests/adapters/test_django_app_not_installed.py: the test site with
`PACTMW["store"] = "django"` on a sqlite database, and pactmw's middleware and URLs, but
without `"pactmw.adapters.django"` in `INSTALLED_APPS` (so no system check runs)."""

from __future__ import annotations

import os

from pactmw_testsite.settings import *  # noqa: F403

INSTALLED_APPS: list[str] = []
ROOT_URLCONF = "pactmw_testsite.noapp_urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["PACTMW_TEST_DATABASE"],
    }
}
