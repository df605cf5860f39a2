"""The Django example's settings with pactmw taken out (the baseline of `benchmarks/http_load.py`).

Everything of `shopsite.settings` except pactmw's `PersonalAgentMiddleware`; the URLs are the
example's with the `/a2a/...` routes dropped and `/api/agent/whoami` answering the same JSON
without verification (`benchmarks.django_bare_urls`). Served as
`DJANGO_SETTINGS_MODULE=benchmarks.django_bare_settings gunicorn shopsite.wsgi:application`
from examples/django_app, with the repository root on PYTHONPATH.
"""

from shopsite.settings import *  # noqa: F403
from shopsite.settings import MIDDLEWARE as _EXAMPLE_MIDDLEWARE

MIDDLEWARE = [name for name in _EXAMPLE_MIDDLEWARE if not name.startswith("pactmw.")]
ROOT_URLCONF = "benchmarks.django_bare_urls"
