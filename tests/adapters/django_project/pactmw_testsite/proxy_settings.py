"""Settings of the reverse-proxy test's Django server
(tests/adapters/test_django_client_address.py): the shared test project and the Provider's
routes, with docs/deployment.md's proxy middleware first in `MIDDLEWARE`, as the page says."""

from __future__ import annotations

from pactmw_testsite.settings import *  # noqa: F403
from pactmw_testsite.settings import MIDDLEWARE

ROOT_URLCONF = "pactmw_testsite.pages_urls"
MIDDLEWARE = ["pactmw_testsite.proxy.trusted_proxy_address", *MIDDLEWARE]
