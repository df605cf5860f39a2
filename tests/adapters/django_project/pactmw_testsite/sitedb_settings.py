"""Settings of tests/adapters/test_django_app_not_installed.py: the test site with pactmw's
app, middleware and URLs and `PACTMW["store"] = "django"` on a sqlite database that nothing
has migrated (`PACTMW_TEST_DATABASE`)."""

from __future__ import annotations

import os

from pactmw_testsite.settings import *  # noqa: F403

ROOT_URLCONF = "pactmw_testsite.sitedb_urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["PACTMW_TEST_DATABASE"],
    }
}
