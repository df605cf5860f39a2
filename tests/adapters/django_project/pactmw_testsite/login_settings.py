"""Settings of tests/adapters/test_django_login_url.py: the contract site with Django's
`LOGIN_URL` as `PACTMW_TEST_LOGIN_URL` says (a URL name, a path or an absolute URL), which a
Brand that leaves out `delegation.login_url` sends a person to before consenting. With
`PACTMW_TEST_LOGIN_URL_LAZY=1` it is `reverse_lazy` of that name, as many sites write it."""

from __future__ import annotations

import os

from django.urls import reverse_lazy

from pactmw_testsite.contract_settings import *  # noqa: F403

LOGIN_URL = (
    reverse_lazy(os.environ["PACTMW_TEST_LOGIN_URL"])
    if os.environ.get("PACTMW_TEST_LOGIN_URL_LAZY") == "1"
    else os.environ["PACTMW_TEST_LOGIN_URL"]
)
