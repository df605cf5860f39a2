"""Settings of tests/adapters/test_django_login_url.py: the contract site with Django's
`LOGIN_URL` as `PACTMW_TEST_LOGIN_URL` says (a URL name, a path or an absolute URL), which a
Brand that leaves out `delegation.login_url` sends a person to before consenting."""

from __future__ import annotations

import os

from pactmw_testsite.contract_settings import *  # noqa: F403

LOGIN_URL = os.environ["PACTMW_TEST_LOGIN_URL"]
