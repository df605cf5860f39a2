"""Django settings for store test subprocesses: pactmw's app and the databases the parent
test put in PACTMW_TEST_DATABASES (JSON), so `open_store("django:ALIAS")` finds its alias."""

from __future__ import annotations

import json
import os

__all__ = ["DATABASES", "DEBUG", "INSTALLED_APPS", "SECRET_KEY", "USE_TZ"]

SECRET_KEY = "test-only"
INSTALLED_APPS = ["pactmw.adapters.django"]
USE_TZ = True
DEBUG = True  # Django then logs every query, formatting it with its parameters
DATABASES = json.loads(os.environ["PACTMW_TEST_DATABASES"])
