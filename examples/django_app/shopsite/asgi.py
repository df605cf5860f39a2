"""ASGI entry point (`uvicorn shopsite.asgi:application`, run from examples/django_app).

pactmw's middleware is hybrid: under ASGI it verifies tokens without blocking the loop.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")

application = get_asgi_application()
