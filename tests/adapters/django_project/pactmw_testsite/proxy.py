"""docs/deployment.md's middleware for a Django site behind a reverse proxy, run as the page
writes it (the sample `django_proxy`). `PACTMW_TEST_TRUSTED_PROXIES` (comma-separated), when
set, stands in for the page's own proxy address, so a test's client on 127.0.0.1 can play
the proxy."""

from __future__ import annotations

import os

from tests.support.samples import find_samples

_SAMPLE = find_samples()["django_proxy"]
exec(compile(_SAMPLE.code, _SAMPLE.filename, "exec"), globals())  # trusted_proxy_address
if os.environ.get("PACTMW_TEST_TRUSTED_PROXIES"):
    # The middleware reads this module global at each request.
    TRUSTED_PROXIES = set(os.environ["PACTMW_TEST_TRUSTED_PROXIES"].split(","))
