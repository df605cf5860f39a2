"""Settings of the person-facing pages tests' Django server (tests/provider/test_pages_*.py):
the shared test project, the Provider's routes, and a template directory from the environment
(`PACTMW_TEST_TEMPLATES`) where the Brand overrides pactmw's pages as Django sites do."""

from __future__ import annotations

import os

from pactmw_testsite.settings import *  # noqa: F403

ROOT_URLCONF = "pactmw_testsite.pages_urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.environ["PACTMW_TEST_TEMPLATES"]],
        "APP_DIRS": False,
    }
]
