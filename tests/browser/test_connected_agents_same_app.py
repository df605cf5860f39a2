"""The connected agents page in same-app mode, in headless Chromium, on Flask, Django (WSGI and
ASGI) and plain WSGI: the host app's own login and session say who is signed in.

Flask and Django are the example shops (their login, their session, `pactmw` configured as
their READMEs say); plain WSGI is a small host app with a signed cookie around
`pactmw.adapters.wsgi.A2AProviderApp(current_user=...)`. The person connects an agent, opens
the page from the result page's link, sees the agent, finds the page refused in another
origin's frame, and revokes it; the agent's next request fails. (ASGI:
test_connected_agents_page.py.)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import time
import uuid
from collections.abc import Iterable, Iterator
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from pactmw.core.jwk import PrivateJWK, generate_private_jwk
from pactmw.provider.delegated import SignedInUser
from tests.browser.support import has_consent_form, png_size, refused_in_a_frame, revoke, screenshot
from tests.examples.support import (  # noqa: F401 - `shop` is a fixture
    SCOPES,
    Shop,
    shop,
)
from tests.support.agent import identity_token, user_message
from tests.support.chromium import WAIT
from tests.support.net import free_port
from tests.support.page_sites import site_settings
from tests.support.parties import ISSUER
from tests.support.servers import werkzeug_server


def sign_in_at(browser: WebDriver, username: str, password: str) -> None:
    """Fill the host app's login form (whatever framework made it) and send it."""
    WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.NAME, "password")))
    browser.find_element(By.NAME, "username").send_keys(username)
    field = browser.find_element(By.NAME, "password")
    field.send_keys(password)
    field.submit()


def connect_and_revoke(
    browser: WebDriver,
    *,
    link: str,
    login_path: str,
    who: tuple[str, str],
    collect: Any,
    send: Any,
    agent_name: str,
    shot: str,
) -> None:
    """The person's side of the story, the same on every host: `collect()` polls the agent's
    token after the decision, `send(token)` is the agent's next request."""
    wait = WebDriverWait(browser, WAIT)
    browser.get(link)
    # Signed out: the host app's own login, which comes back to the consent page.
    wait.until(EC.presence_of_element_located((By.NAME, "password")))
    assert urlsplit(browser.current_url).path == login_path
    sign_in_at(browser, *who)
    wait.until(has_consent_form)
    browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
    wait.until(lambda d: urlsplit(d.current_url).path.endswith("/oauth/connected"))
    token = collect()
    assert send(token).status_code == 200

    browser.find_element(By.LINK_TEXT, "connected agents page").click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "section.agent")))
    page = browser.current_url
    assert urlsplit(page).path.endswith("/oauth/agents")
    card = browser.find_element(By.CSS_SELECTOR, "section.agent")
    assert card.find_element(By.TAG_NAME, "h2").text == agent_name
    assert SCOPES["orders:read"] in card.text
    assert "Not yet" not in card.text  # the agent's request was recorded as its last use
    path = screenshot(browser, shot)
    assert png_size(path) == tuple(
        browser.execute_script("return [window.innerWidth, window.innerHeight]")
    )

    # Never framed by another origin, whichever framework served it.
    refused_in_a_frame(browser, page, "section.agent")

    browser.get(page)
    revoke(
        browser,
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "section.agent"))),
        agent_name,
    )
    refused = send(token)
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]


def _collect(site: Shop, device_code: str, sub: str) -> str:
    deadline = time.monotonic() + WAIT
    while True:
        answer = site.poll(device_code, sub=sub)
        if answer.status_code == 200:
            token: str = answer.json()["access_token"]
            return token
        assert time.monotonic() < deadline, answer.text


@pytest.mark.timeout(120)
def test_the_example_shops_serve_the_page_with_their_own_login(
    shop: Shop,  # noqa: F811 - the fixture imported above
    browser: WebDriver,
) -> None:
    sub = f"same-app-{uuid.uuid4().hex[:8]}"
    asked = shop.device_authorization("orders:read", sub=sub)
    connect_and_revoke(
        browser,
        link=asked["verification_uri_complete"],
        login_path=shop.example.login_path,
        who=("jane", "jane-dev-only"),
        collect=lambda: _collect(shop, asked["device_code"], sub),
        send=lambda token: shop.send("show my orders", sub=sub, access_token=token),
        agent_name="Test agent",
        shot=f"connected-agents-same-app-{shop.example.name}.png",
    )


# -- plain WSGI: a host app with its own login and a signed cookie ------------------------------

COOKIE = "host_session"
USER = SignedInUser(account="acct-jane", label="jane@example.com")
PASSWORD = "correct horse"
AGENT_KEY = generate_private_jwk("ES256", kid="pa-1")
AUDIENCE = "urn:test:pages"  # site_settings'


class WsgiHost:
    """A WSGI site's login page and signed session cookie, and who is signed in."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    def _mac(self, name: str) -> str:
        return hmac.new(self._secret, name.encode(), hashlib.sha256).hexdigest()

    def current_user(self, environ: dict[str, Any]) -> SignedInUser | None:
        cookies = dict(
            part.strip().split("=", 1)
            for part in environ.get("HTTP_COOKIE", "").split(";")
            if "=" in part
        )
        name, _, mac = cookies.get(COOKIE, "").rpartition(".")
        return USER if name == "jane" and hmac.compare_digest(mac, self._mac(name)) else None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ["PATH_INFO"] != "/login":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found"]
        if environ["REQUEST_METHOD"] == "POST":
            size = int(environ.get("CONTENT_LENGTH") or 0)
            form = parse_qs(environ["wsgi.input"].read(size).decode())
            target = form.get("next", ["/"])[0]
            good = form.get("username") == ["jane"] and form.get("password") == [PASSWORD]
            if good and target.startswith("http://127.0.0.1:"):
                cookie = f"{COOKIE}=jane.{self._mac('jane')}; HttpOnly; SameSite=Lax; Path=/"
                start_response("303 See Other", [("Location", target), ("Set-Cookie", cookie)])
                return [b""]
            start_response("401 Unauthorized", [("Content-Type", "text/plain")])
            return [b"wrong"]
        target = parse_qs(environ.get("QUERY_STRING", "")).get("next", ["/"])[0]
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
        return [
            (
                "<!doctype html><title>Sign in</title><form method='post' action='/login'>"
                f"<input type='hidden' name='next' value='{escape(target)}'>"
                "<label>Username <input name='username'></label>"
                "<label>Password <input name='password' type='password'></label>"
                "<button type='submit'>Sign in</button></form>"
            ).encode()
        ]


@contextlib.contextmanager
def wsgi_site(tmp_path: Path, key: PrivateJWK) -> Iterator[str]:
    from pactmw.adapters.wsgi import A2AProviderApp
    from pactmw.provider import Provider
    from pactmw.provider.settings import ProviderSettings

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings = ProviderSettings.from_mapping(
        site_settings(
            tmp_path,
            base,
            delegation={"scopes": SCOPES, "login_url": "/login", "interval": 1},
            agents=[
                {"issuer": ISSUER, "name": "Demo PA", "jwks": {"keys": [key.public.to_dict()]}}
            ],
        )
    )
    provider = Provider.from_settings(settings)
    host = WsgiHost()
    try:
        with werkzeug_server(
            A2AProviderApp(provider, host, current_user=host.current_user), port=port
        ):
            yield base
    finally:
        provider.close()


@pytest.mark.timeout(120)
def test_a_plain_wsgi_host_serves_the_page_with_its_own_login(
    browser: WebDriver, tmp_path: Path
) -> None:
    with wsgi_site(tmp_path, AGENT_KEY) as base:
        oauth = f"{base}/a2a/acme/oauth"

        def headers() -> dict[str, str]:
            jwt = identity_token(AGENT_KEY, ISSUER, AUDIENCE, sub="pa-user-1")
            return {"authorization": f"Bearer {jwt}"}

        asked = httpx.post(
            f"{oauth}/device_authorization",
            data={"client_id": ISSUER, "scope": "orders:read"},
            headers=headers(),
        ).json()

        def collect() -> str:
            deadline = time.monotonic() + WAIT
            while True:
                form = {
                    "client_id": ISSUER,
                    "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                    "device_code": asked["device_code"],
                }
                answer = httpx.post(f"{oauth}/token", data=form, headers=headers())
                if answer.status_code == 200:
                    token: str = answer.json()["access_token"]
                    return token
                assert time.monotonic() < deadline, answer.text
                time.sleep(1)

        def send(token: str) -> httpx.Response:
            return httpx.post(
                f"{base}/a2a/acme/message:send",
                json={"message": user_message("where is my order?")},
                headers={**headers(), "x-a2a-user-delegation": f"Bearer {token}"},
            )

        connect_and_revoke(
            browser,
            link=asked["verification_uri_complete"],
            login_path="/login",
            who=("jane", PASSWORD),
            collect=collect,
            send=send,
            agent_name="Demo PA",
            shot="connected-agents-same-app-wsgi.png",
        )
