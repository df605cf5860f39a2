"""Django settings for the shop (an example: DEBUG is on, read the marked lines before deploying).

pactmw is configured by the one `PACTMW` dict at the end: the TOML file named by the
PACTMW_CONFIG environment variable, else a built-in development configuration.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pactmw.provider import load_toml

BASE_DIR = Path(__file__).resolve().parent.parent

# DEV FALLBACK: set DJANGO_SECRET_KEY in any real deployment; this key is public.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-insecure-example-shop-dev-only-key")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # pactmw: system checks (manage.py check reports a bad PACTMW), the tables of
    # store = "django" (manage.py migrate), the admin of agents, grants and conversations,
    # and `manage.py pactmw grants|agents|cleanup`.
    "pactmw.adapters.django",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # pactmw: sets request.personal_agent; the Provider's /a2a/ routes authenticate themselves.
    "pactmw.adapters.django.PersonalAgentMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "shopsite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "shopsite.wsgi.application"

# The shop's database (gitignored). SHOP_DATABASE points it elsewhere (the tests use a tmp file).
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DATABASE") or BASE_DIR / "db.sqlite3",
    }
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The shop's own login (django.contrib.auth). pactmw's consent page uses the customer signed
# in here, and sends a signed-out one to LOGIN_URL with ?next= back to the consent page.
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

#: The Delegated profile's scopes (PACT §5.2): shown verbatim on the card and consent page.
DELEGATION_SCOPES = {
    "orders:read": "See your orders and their status",
    "orders:return": "Start a return for an order",
}


def _dev_pactmw(base_url: str) -> dict[str, Any]:
    """The built-in development configuration: one brand, no personal agent registered.

    The brand offers delegation: customers sign in with this site's login, the bot's account
    actions are `shop.tools:shop_tools`, and the development signing key is generated once
    under .pactmw/. With no agent listed every `message:send` answers 401; list yours in a
    TOML file.
    """
    return {
        "base_url": base_url,
        "audience": f"{base_url}/a2a",
        # pactmw's state (conversations, grants, agents added in the admin) lives in the
        # shop's own database, in the tables of the pactmw app's migrations.
        "store": "django",
        "data_dir": str(BASE_DIR / ".pactmw"),
        "agents": [],
        "brands": {
            "shop": {
                "name": "Acme Lamp Co. support",
                "description": "Order status and returns for Acme Lamp Co. orders.",
                "handler": "shop.bot:support_bot",
                "skills": [
                    {
                        "id": "order-status",
                        "name": "Order status",
                        "description": "Where an order is and when it arrives.",
                        "tags": ["orders"],
                        "examples": ["Where is my order A-1001?"],
                    }
                ],
                "delegation": {
                    "scopes": dict(DELEGATION_SCOPES),
                    "login": "same-app",
                    "login_url": LOGIN_URL,
                    # An import path: shop.tools imports the models, so it loads on first use.
                    "tools": "shop.tools:shop_tools",
                },
            }
        },
        # Whose grants the site's own API checks (shop.views.AgentOrders, HasDelegatedScope):
        # without it no delegation is verified there, and `manage.py check` says so.
        "delegation_brand": "shop",
    }


# pactmw: the one settings dict (same keys as the TOML of `pactmw serve`).
PACTMW = (
    load_toml(os.environ["PACTMW_CONFIG"])
    if os.environ.get("PACTMW_CONFIG")
    else _dev_pactmw(os.environ.get("PACTMW_BASE_URL", "http://127.0.0.1:8000"))
)
