"""A same-app Brand's consent pages ask the host app who is signed in. An app that gives them
no way to know (no `current_user`, no Flask-Login, no Django `request.user`) is reported at
startup, naming the setting, on every adapter: before, every consent link went to
`login_url` and back, for ever, and nothing said why."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask

from pactmw.adapters import asgi, wsgi
from pactmw.adapters import flask as flask_adapter
from pactmw.core.jwk import generate_private_jwk
from pactmw.provider import SignedInUser
from pactmw.provider.app import Provider
from pactmw.provider.guard import guard_from_mapping
from tests.adapters.commands import django_check
from tests.support.servers import uvicorn_server, werkzeug_server

pytestmark = pytest.mark.timeout(120)

SAID = 'brands.acme.delegation.login is "same-app" (the default), but '
ASGI_CURRENT_USER = "A2AProviderApp's, a2a_routes' or a2a_mount's current_user"
DELEGATION = {"scopes": {"orders:read": "See your orders"}, "login_url": "/login"}


def settings(tmp_path: Path, *, delegation: bool = True) -> dict[str, Any]:
    key = tmp_path / "signing.jwk"
    key.write_text(json.dumps(generate_private_jwk("ES256", kid="s1").to_dict()))
    brand: dict[str, Any] = {"name": "Acme", "handler": "examples.bots:order_bot"}
    if delegation:
        brand["delegation"] = DELEGATION
    return {
        "base_url": "https://shop.example",
        "audience": "https://shop.example/a2a",
        "agents": [],
        "store": "memory://",
        "signing_keys": [str(key)],
        "brands": {"acme": brand},
    }


def provider_of(config: dict[str, Any]) -> Provider:
    provider = guard_from_mapping(config).provider
    assert provider is not None
    return provider


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("pactmw")]


def nobody() -> SignedInUser | None:
    return None


@pytest.mark.parametrize(
    ("build", "missing"),
    [
        (asgi.a2a_routes, ASGI_CURRENT_USER),
        (asgi.a2a_mount, ASGI_CURRENT_USER),
        (asgi.A2AProviderApp, ASGI_CURRENT_USER),
        (wsgi.A2AProviderApp, "A2AProviderApp's current_user"),
    ],
    ids=["a2a_routes", "a2a_mount", "asgi", "wsgi"],
)
def test_an_app_without_current_user_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, build: Any, missing: str
) -> None:
    provider = provider_of(settings(tmp_path))
    with caplog.at_level("WARNING", logger="pactmw"):
        build(provider)
    (message,) = said(caplog)
    assert message.startswith(SAID + f"{missing} is not set")
    assert 'or login = "brand"' in message
    caplog.clear()
    with caplog.at_level("WARNING", logger="pactmw"):
        build(provider, current_user=lambda connection: None)
    assert said(caplog) == []


def test_flask_without_current_user_or_flask_login_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = Flask("no_user")
    app.config["PACTMW"] = settings(tmp_path)
    with caplog.at_level("WARNING", logger="pactmw"):
        flask_adapter.Pactmw(app)
    (message,) = said(caplog)
    assert message.startswith(SAID + "Pactmw(app, current_user=...) (or Flask-Login's")
    caplog.clear()
    told = Flask("told")
    told.config["PACTMW"] = settings(tmp_path)
    with caplog.at_level("WARNING", logger="pactmw"):
        flask_adapter.Pactmw(told, current_user=nobody)
    assert said(caplog) == []


def test_brands_whose_pages_ask_nobody_are_not_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = provider_of(settings(tmp_path, delegation=False))
    app = Flask("no_pages")
    app.config["PACTMW"] = settings(tmp_path, delegation=False)
    with caplog.at_level("WARNING", logger="pactmw"):
        asgi.a2a_mount(provider)
        asgi.a2a_routes(provider)
        wsgi.A2AProviderApp(provider)
        flask_adapter.Pactmw(app)
    assert said(caplog) == []


def _django_check(tmp_path: Path, config: dict[str, Any], **env: str) -> str:
    done = django_check(
        config,
        tmp_path / "pactmw.json",
        DJANGO_SETTINGS_MODULE="pactmw_testsite.middleware_settings",
        PACTMW_TEST_MIDDLEWARE="pactmw.adapters.django.PersonalAgentMiddleware",
        **env,
    )
    assert done.returncode == 0, done.stderr  # a warning: the site still starts
    return done.stdout + done.stderr


def test_django_without_request_user_is_warned_by_the_checks(tmp_path: Path) -> None:
    said = _django_check(tmp_path, settings(tmp_path))
    assert "pactmw.W002" in said, said
    # Worded as a site is fixed: request.user, set by the middleware named in full.
    missing = "request.user is not set"
    assert SAID + missing in said
    remedy = (
        "Add django.contrib.auth.middleware.AuthenticationMiddleware to MIDDLEWARE "
        '(and django.contrib.auth to INSTALLED_APPS), or login = "brand"'
    )
    assert remedy in " ".join(said.split()), said
    assert "pactmw.W002" not in _django_check(tmp_path, settings(tmp_path, delegation=False))


def test_django_with_authentication_middleware_is_not_warned(tmp_path: Path) -> None:
    said = _django_check(tmp_path, settings(tmp_path), PACTMW_TEST_AUTH="1")
    assert "pactmw.W002" not in said, said
    assert "no issues" in said, said


def _wsgi_site(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("404 Not Found", [("Content-Length", "0")])
    return [b""]


def _served(
    adapter: str, config: dict[str, Any], current_user: Callable[..., Any]
) -> AbstractContextManager[str]:
    """The Provider of `config` served by `adapter` with `current_user`, on a real server:
    its base URL."""
    if adapter == "asgi":
        asgi_app = asgi.A2AProviderApp(provider_of(config), current_user=current_user)
        return uvicorn_server(asgi_app)
    if adapter == "wsgi":
        provider = provider_of(config)
        return werkzeug_server(
            wsgi.A2AProviderApp(provider, app=_wsgi_site, current_user=current_user)
        )
    app = Flask("site")
    app.config["PACTMW"] = config
    flask_adapter.Pactmw(app, current_user=lambda: current_user(None))
    return werkzeug_server(app)


def _a_name(source: Any) -> str:
    return "jane"  # the account alone, where a SignedInUser goes


def _broken(source: Any) -> SignedInUser | None:
    raise RuntimeError("the host app's own bug")


@pytest.mark.parametrize("adapter", ["asgi", "wsgi", "flask"])
@pytest.mark.parametrize(
    ("current_user", "logged"),
    [
        (
            _a_name,
            "consent page of brand 'acme' failed: current_user returned str, not a "
            "SignedInUser(account=..., label=...) or None",
        ),
        (
            _broken,
            "consent page of brand 'acme' failed (if current_user reads what the host app's "
            "middleware sets, its session or signed-in user, the Provider must run after "
            "that middleware: inside a Starlette app with pactmw.adapters.asgi.a2a_routes, "
            "or with that middleware around the WSGI A2AProviderApp)",
        ),
    ],
    ids=["returns-a-name", "raises"],
)
def test_a_current_user_that_fails_is_logged_saying_what_it_did(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    adapter: str,
    current_user: Callable[..., Any],
    logged: str,
) -> None:
    # Found in a plain WSGI trial: a current_user returning the account's name was an
    # AttributeError ('str' object has no attribute 'account') logged with a hint to use
    # `pactmw.adapters.asgi.a2a_routes`, which a WSGI app has not.
    served = _served(adapter, settings(tmp_path), current_user)
    with caplog.at_level("ERROR", logger="pactmw"), served as url:
        response = httpx.get(url + "/a2a/acme/oauth/consent")
    assert response.status_code == 500
    assert "Something went wrong on our side" in response.text
    assert said(caplog) == [logged]
