"""Settings of tests/adapters/test_django_middleware_check.py: the contract site with
pactmw's middleware written as `PACTMW_TEST_MIDDLEWARE` says (left out when it is empty),
and with `PACTMW_TEST_AUTH=1`, django.contrib.auth and its middleware (`request.user`)."""

from __future__ import annotations

import os

from pactmw_testsite.contract_settings import *  # noqa: F403
from pactmw_testsite.contract_settings import INSTALLED_APPS as CONTRACT_APPS
from pactmw_testsite.contract_settings import MIDDLEWARE as CONTRACT_MIDDLEWARE

_SHORT = "pactmw.adapters.django.PersonalAgentMiddleware"
_WRITTEN = os.environ["PACTMW_TEST_MIDDLEWARE"]

MIDDLEWARE = [
    _WRITTEN if entry == _SHORT else entry
    for entry in CONTRACT_MIDDLEWARE
    if entry != _SHORT or _WRITTEN
]

if os.environ.get("PACTMW_TEST_AUTH") == "1":
    INSTALLED_APPS = [
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        *CONTRACT_APPS,
    ]
    MIDDLEWARE = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        *MIDDLEWARE,
    ]
