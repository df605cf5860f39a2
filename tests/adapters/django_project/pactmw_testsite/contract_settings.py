"""Settings of the adapter contract suite's Django server (see tests/adapters/contract_apps.py):
the shared test project, with the contract's routes and its `PACTMW` (brands included)."""

from __future__ import annotations

from pactmw_testsite.settings import *  # noqa: F403
from pactmw_testsite.settings import INSTALLED_APPS as BASE_APPS

ROOT_URLCONF = "pactmw_testsite.contract_urls"

INSTALLED_APPS = [*BASE_APPS, "rest_framework"]
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "pactmw.adapters.django.rest_framework.PersonalAgentAuthentication",
        "pactmw_testsite.drf_auth.ApiKeyAuthentication",  # the app's other scheme
    ],
    "UNAUTHENTICATED_USER": None,  # no django.contrib.auth in this project
}
