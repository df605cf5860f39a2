"""Settings of the adapter-test Django project.

`PACTMW` is read from the JSON file named by `PACTMW_TEST_CONFIG`, which the test session
writes once it knows the ports of its JWKS servers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SECRET_KEY = "pactmw-adapter-tests-not-a-secret"  # a throwaway test project
# Set by a test that reads a view's exception in the server's log (Django logs it with DEBUG).
DEBUG = os.environ.get("PACTMW_TEST_DEBUG") == "1"
# shop.example: the Poppy tests ask for a Brand's poppy.json by its own Host.
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "shop.example", "www.shop.example"]
INSTALLED_APPS = ["pactmw.adapters.django"]
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Test-only: reports on each response whether the pactmw middleware runs sync or async.
    "pactmw_testsite.probe.MiddlewareModeProbe",
    "pactmw.adapters.django.PersonalAgentMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]

ROOT_URLCONF = "pactmw_testsite.urls"
WSGI_APPLICATION = "pactmw_testsite.wsgi.application"

PACTMW = json.loads(Path(os.environ["PACTMW_TEST_CONFIG"]).read_text())

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"pactmw": {"handlers": ["console"], "level": "INFO"}},
}
