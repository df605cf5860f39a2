"""Settings of tests/adapters/test_django_app_not_installed.py's DRF case: the site of
`sitedb_settings` (a sqlite database nothing has migrated) with Django REST framework and
pactmw's authentication class."""

from __future__ import annotations

from pactmw_testsite.sitedb_settings import *  # noqa: F403
from pactmw_testsite.sitedb_settings import INSTALLED_APPS as BASE_APPS

ROOT_URLCONF = "pactmw_testsite.sitedb_drf_urls"
INSTALLED_APPS = [*BASE_APPS, "rest_framework"]
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "pactmw.adapters.django.rest_framework.PersonalAgentAuthentication",
    ],
    "UNAUTHENTICATED_USER": None,  # no django.contrib.auth in this project
}
