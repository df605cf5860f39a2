"""The Flask and Django example shops run as real server processes: how each is launched,
the TOML configuration it is given, and (for the Delegated profile) the running shop with its
personal agent and a person, shared by the examples and browser tests."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from pactmw.core.jwk import KeySet, PrivateJWK, generate_private_jwk, parse_jwks
from tests.support.agent import identity_token, user_message
from tests.support.net import free_port, loopback_client
from tests.support.servers import REPO, process_server
from tests.support.toml import toml_value

A2A = "application/a2a+json"
ISSUER = "https://agent.example"
BRAND = "acme"


@dataclass(frozen=True)
class Example:
    """How to start one example and which bot its config names."""

    argv: Callable[[int], list[str]]
    handler: str
    env: Callable[[Path], dict[str, str]] = lambda tmp: {}
    #: A command to run before the server starts (uvicorn does not migrate like manage.py).
    prepare: list[str] | None = None


def _django_env(tmp: Path) -> dict[str, str]:
    return {"DJANGO_SETTINGS_MODULE": "shopsite.settings", "SHOP_DATABASE": str(tmp / "shop.db")}


EXAMPLES = {
    "flask": Example(
        argv=lambda port: [sys.executable, "examples/flask_app/app.py", "--port", str(port)],
        handler="examples.flask_app.app:support_bot",
    ),
    "django": Example(
        argv=lambda port: [
            sys.executable,
            "examples/django_app/manage.py",
            "runserver",
            f"127.0.0.1:{port}",
            "--noreload",
        ],
        handler="shop.bot:support_bot",
        env=_django_env,
    ),
    # The same Django project under ASGI: the middleware's async path and shopsite/asgi.py.
    "django-asgi": Example(
        argv=lambda port: [
            sys.executable,
            "-m",
            "uvicorn",
            "shopsite.asgi:application",
            "--app-dir",
            "examples/django_app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        handler="shop.bot:support_bot",
        env=_django_env,
        prepare=[sys.executable, "examples/django_app/manage.py", "migrate", "--noinput", "-v0"],
    ),
}


def write_config(
    tmp: Path, port: int, key: PrivateJWK, handler: str, *, store_url: str | None = None
) -> Path:
    base_url = f"http://127.0.0.1:{port}"
    store = tmp / "pactmw" / "pactmw.db"
    config = tmp / "pactmw.toml"
    config.write_text(
        f"""
base_url = {toml_value(base_url)}
audience = {toml_value(base_url + "/a2a")}
store = {toml_value(store_url or f"sqlite:///{store}")}

[[agents]]
issuer = {toml_value(ISSUER)}
name = "Test agent"
jwks = {toml_value({"keys": [key.public.to_dict()]})}

[brands.{BRAND}]
name = "Acme support"
description = "Order status and returns."
handler = {toml_value(handler)}
"""
    )
    return config


# -- the Delegated profile: a running shop, its personal agent and a person --------------------

DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SCOPES = {
    "orders:read": "See your orders and their status",
    "orders:return": "Start a return for an order",
}
INTERVAL = 1  # the polling interval the test config asks for (seconds)


@dataclass(frozen=True)
class ShopExample:
    """One example shop: how it is launched, what the config names, how its login looks."""

    name: str
    tools: str
    login_path: str


SHOPS = {
    "flask": ShopExample("flask", "examples.flask_app.app:shop_tools", "/login"),
    "django": ShopExample("django", "shop.tools:shop_tools", "/accounts/login/"),
    # The same Django project under uvicorn (ASGI): shopsite/asgi.py, sessions and consent.
    "django-asgi": ShopExample("django-asgi", "shop.tools:shop_tools", "/accounts/login/"),
}


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({**values, "hidden": {}})
        elif tag == "input" and values.get("type") == "hidden" and self.forms:
            self.forms[-1]["hidden"][values.get("name", "")] = values.get("value", "")


def browser_origin(page: httpx.Response) -> str:
    """The `Origin` a browser sends when it posts a form of `page` to the page's own origin.

    Under `Referrer-Policy: no-referrer` browsers send `Origin: null` on POST (Fetch spec,
    "serializing a request origin"), so the consent page's policy decides what is sent.
    """
    if page.headers.get("referrer-policy", "").strip().lower() == "no-referrer":
        return "null"
    url = page.request.url
    return f"{url.scheme}://{url.netloc.decode('ascii')}"


def post_form(html: str) -> dict[str, Any]:
    """The page's one `method="post"` form: its action and hidden fields (unescaped)."""
    parser = _Forms()
    parser.feed(html)
    forms = [form for form in parser.forms if form.get("method", "").lower() == "post"]
    assert len(forms) == 1, html
    return forms[0]


@dataclass
class Shop:
    example: ShopExample
    base_url: str
    key: PrivateJWK
    agent: httpx.Client
    tmp: Path
    _last_poll: dict[str, float] = field(default_factory=dict)

    # the personal agent ---------------------------------------------------------------------

    def auth(self, sub: str) -> dict[str, str]:
        token = identity_token(self.key, ISSUER, f"{self.base_url}/a2a", sub=sub)
        return {"Authorization": f"Bearer {token}"}

    def send(
        self,
        text: str,
        *,
        sub: str,
        context_id: str | None = None,
        access_token: str | None = None,
        message_id: str | None = None,
    ) -> httpx.Response:
        message = user_message(text, message_id=message_id, context_id=context_id)
        headers = {**self.auth(sub), "Content-Type": A2A, "A2A-Version": "1.0"}
        if access_token is not None:
            headers["X-A2A-User-Delegation"] = f"Bearer {access_token}"
        return self.agent.post(
            f"/a2a/{BRAND}/message:send", content=json.dumps({"message": message}), headers=headers
        )

    def oauth(self, endpoint: str, sub: str, **form: str) -> httpx.Response:
        return self.agent.post(
            f"/a2a/{BRAND}/oauth/{endpoint}",
            data={"client_id": ISSUER, **form},
            headers=self.auth(sub),
        )

    def device_authorization(self, scope: str, *, sub: str) -> dict[str, Any]:
        response = self.oauth("device_authorization", sub, scope=scope)
        assert response.status_code == 200, response.text
        document: dict[str, Any] = response.json()
        return document

    def poll(self, device_code: str, *, sub: str) -> httpx.Response:
        """One token request, never sooner than `interval` after the last one (no slow_down)."""
        last = self._last_poll.get(device_code)
        if last is not None:
            time.sleep(max(0.0, last + INTERVAL + 0.05 - time.monotonic()))
        self._last_poll[device_code] = time.monotonic()
        return self.oauth("token", sub, grant_type=DEVICE_CODE_GRANT, device_code=device_code)

    def refresh(self, refresh_token: str, *, sub: str) -> httpx.Response:
        return self.oauth("token", sub, grant_type="refresh_token", refresh_token=refresh_token)

    def signing_keys(self) -> KeySet:
        """The keys at the RFC 8414 metadata's `jwks_uri`, found from the Agent Card."""
        card = self.agent.get(f"/a2a/{BRAND}/.well-known/agent-card.json").json()
        scheme = card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]
        metadata = self.agent.get(scheme["oauth2MetadataUrl"]).json()
        return parse_jwks(self.agent.get(metadata["jwks_uri"]).json())

    # the person ---------------------------------------------------------------------------------

    def person(self) -> httpx.Client:
        """A browser: keeps cookies, does not follow redirects by itself (the test does)."""
        return loopback_client(base_url=self.base_url, timeout=10, follow_redirects=False)

    def log_in(self, browser: httpx.Client, login_url: str, who: tuple[str, str]) -> httpx.Response:
        """Open the shop's login page and post its form; the response is the redirect."""
        page = browser.get(login_url)
        assert page.status_code == 200, page.text
        form = post_form(page.text)
        username, password = who
        return browser.post(
            form["action"], data={**form["hidden"], "username": username, "password": password}
        )

    def consent(
        self, browser: httpx.Client, link: str, who: tuple[str, str] | None = None
    ) -> httpx.Response:
        """Open a consent link as `who`, logging in to the shop first when it asks."""
        response = browser.get(link)
        if who is not None and response.status_code in (302, 303):
            location = response.headers["location"]
            assert urlsplit(location).path == self.example.login_path, location
            assert parse_qs(urlsplit(location).query)["next"] == [link]
            back = self.log_in(browser, location, who)
            assert back.status_code in (302, 303), back.text
            assert back.headers["location"] == link
            response = browser.get(link)
        assert response.status_code == 200, response.text
        assert response.headers["x-frame-options"] == "DENY"
        return response

    def decide(
        self, browser: httpx.Client, page: httpx.Response, decision: str, scopes: list[str]
    ) -> httpx.Response:
        """Post the consent page's form with `scopes` ticked, as a browser posts it."""
        action = re.search(r'<form method="post" action="([^"]+)">', page.text)
        session = re.search(r'<input type="hidden" name="session" value="([^"]+)">', page.text)
        assert action is not None
        assert session is not None
        return browser.post(
            action.group(1),
            data={"session": session.group(1), "decision": decision, "scope": scopes},
            headers={"Origin": browser_origin(page)},
        )

    def account_of(self, username: str) -> str:
        """The Brand account id pactmw should see for a seeded customer."""
        if self.example.name == "flask":
            return {"jane": "cust-1001", "alex": "cust-1002"}[username]
        with sqlite3.connect(self.tmp / "shop.db") as db:
            (pk,) = db.execute(
                "SELECT id FROM auth_user WHERE username = ?", (username,)
            ).fetchone()
        return str(pk)


def write_delegated_config(
    tmp: Path, port: int, key: PrivateJWK, handler: str, tools: str, login: str
) -> Path:
    base_url = f"http://127.0.0.1:{port}"
    config = tmp / "pactmw.toml"
    config.write_text(
        f"""
base_url = {toml_value(base_url)}
audience = {toml_value(base_url + "/a2a")}
store = {toml_value(f"sqlite:///{tmp / 'pactmw' / 'pactmw.db'}")}
data_dir = {toml_value(str(tmp / "pactmw"))}
# Whose grants the site's own API checks (the Django example's HasDelegatedScope view):
# without it that view refuses every caller, and `manage.py check` stops runserver (E005).
delegation_brand = {toml_value(BRAND)}

[[agents]]
issuer = {toml_value(ISSUER)}
name = "Test agent"
jwks = {toml_value({"keys": [key.public.to_dict()]})}

[brands.{BRAND}]
name = "Acme support"
description = "Order status and returns."
handler = {toml_value(handler)}

[brands.{BRAND}.delegation]
login = "same-app"
login_url = {toml_value(login)}
tools = {toml_value(tools)}
interval = {INTERVAL}

[brands.{BRAND}.delegation.scopes]
{chr(10).join(f"{toml_value(k)} = {toml_value(v)}" for k, v in SCOPES.items())}
"""
    )
    return config


@pytest.fixture(scope="module", params=sorted(SHOPS))
def shop(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shop]:
    example = SHOPS[request.param]
    launch = EXAMPLES[example.name]
    tmp = tmp_path_factory.mktemp(f"delegated-{example.name}")
    port = free_port()
    key = generate_private_jwk("ES256", kid="k1")
    config = write_delegated_config(
        tmp, port, key, launch.handler, example.tools, example.login_path
    )
    env = {"PACTMW_CONFIG": str(config), **launch.env(tmp)}
    if launch.prepare is not None:
        subprocess.run(launch.prepare, cwd=REPO, env={**os.environ, **env}, check=True)
    base_url = f"http://127.0.0.1:{port}"
    with (
        process_server(launch.argv(port), port, env=env, cwd=REPO, log=tmp / "server.log"),
        loopback_client(base_url=base_url, timeout=10) as agent,
    ):
        yield Shop(example, base_url, key, agent, tmp)
