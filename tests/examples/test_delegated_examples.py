"""The Delegated profile (PACT §5) of the Flask and Django example shops, over real servers.

Each example runs as its own process (the launch commands of test_examples.py) with a TOML
config (PACTMW_CONFIG) that registers one personal agent and offers delegation on one Brand,
with the example's own bot, tools and login. httpx plays both sides: the personal agent
(PACT JWT, A2A and OAuth calls) and the person in a browser (a cookie-keeping client that
follows the consent link, logs in to the shop and decides on the consent page).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from pactmw.core.jose import parse_compact, verify_signature
from pactmw.core.jwk import KeySet, PrivateJWK, generate_private_jwk, parse_jwks
from pactmw.protocols.delegation import args_hash
from tests.examples.test_examples import EXAMPLES
from tests.support.agent import identity_token, user_message
from tests.support.net import free_port, loopback_client
from tests.support.servers import REPO, process_server
from tests.support.toml import toml_value

A2A = "application/a2a+json"
ISSUER = "https://agent.example"
BRAND = "acme"
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SCOPES = {
    "orders:read": "See your orders and their status",
    "orders:return": "Start a return for an order",
}
SIGNING_ALGS = frozenset({"ES256", "RS256"})
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
#: The dev-only customers both examples seed (see their READMEs): (username, password).
JANE = ("jane", "jane-dev-only")
ALEX = ("alex", "alex-dev-only")


# -- a tiny HTML form reader (the person's browser) ---------------------------------------------


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


# -- the running shop, its personal agent and a person -------------------------------------------


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


def _write_config(
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
    config = _write_config(tmp, port, key, launch.handler, example.tools, example.login_path)
    env = {"PACTMW_CONFIG": str(config), **launch.env(tmp)}
    if launch.prepare is not None:
        subprocess.run(launch.prepare, cwd=REPO, env={**os.environ, **env}, check=True)
    base_url = f"http://127.0.0.1:{port}"
    with (
        process_server(launch.argv(port), port, env=env, cwd=REPO, log=tmp / "server.log"),
        loopback_client(base_url=base_url, timeout=10) as agent,
    ):
        yield Shop(example, base_url, key, agent, tmp)


# -- assertions -----------------------------------------------------------------------------------


def task_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == A2A
    task: dict[str, Any] = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    return task


def message_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == A2A
    message: dict[str, Any] = response.json()["message"]
    assert message["role"] == "ROLE_AGENT"
    return message


def oauth_error(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    error: str = response.json()["error"]
    return error


def verified_receipt(shop: Shop, message: dict[str, Any]) -> dict[str, Any]:
    """The message's receipt claims, after checking the JWS against the published keys."""
    receipt = message["metadata"]["pact.receipt"]
    jws = parse_compact(receipt["jws"], allowed_algs=SIGNING_ALGS)
    assert jws.header["typ"] == "pact-receipt+jws"
    _verify(jws, shop.signing_keys())
    assert jws.claims() == receipt["claims"]
    claims: dict[str, Any] = receipt["claims"]
    return claims


def verified_token_claims(shop: Shop, access_token: str) -> dict[str, Any]:
    jws = parse_compact(access_token, allowed_algs=SIGNING_ALGS)
    _verify(jws, shop.signing_keys())
    return jws.claims()


def _verify(jws: Any, keys: KeySet) -> None:
    candidates = keys.candidates(jws.kid, jws.alg)
    assert candidates, "the signing key is not published at jwks_uri"
    errors = []
    for key in candidates:
        try:
            verify_signature(jws, key)
            return
        except Exception as exc:
            errors.append(exc)
    raise AssertionError(f"no published key verifies the JWS: {errors}")


def assert_invalid_token(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="a2a", error="invalid_token"'
    assert response.content == b""


# -- the tests ------------------------------------------------------------------------------------


def test_card_and_metadata_advertise_user_delegation(shop: Shop) -> None:
    card = shop.agent.get(f"/a2a/{BRAND}/.well-known/agent-card.json").json()
    interface = f"{shop.base_url}/a2a/{BRAND}"
    scheme = card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]
    flow = scheme["flows"]["deviceCode"]
    assert flow["scopes"] == SCOPES
    assert list(flow["scopes"]) == list(SCOPES)
    assert flow["deviceAuthorizationUrl"] == f"{interface}/oauth/device_authorization"
    assert flow["tokenUrl"] == f"{interface}/oauth/token"
    identity = next(iter(card["securityRequirements"][0]["schemes"]))
    assert card["securityRequirements"] == [
        {"schemes": {identity: {"list": []}}},
        {"schemes": {identity: {"list": []}, "userDelegation": {"list": []}}},
    ]
    metadata = shop.agent.get(scheme["oauth2MetadataUrl"])
    assert metadata.status_code == 200
    document = metadata.json()
    assert document["issuer"] == f"{interface}/oauth"
    assert document["device_authorization_endpoint"] == flow["deviceAuthorizationUrl"]
    assert document["token_endpoint"] == flow["tokenUrl"]
    assert document["scopes_supported"] == list(SCOPES)
    assert shop.signing_keys().keys


def test_delegated_story(shop: Shop) -> None:
    """Step-up, device flow with the shop's own login, a delegated turn with a verified
    receipt, a second step-up, refresh rotation and reuse detection."""
    sub = "story-user"
    jane = shop.account_of("jane")

    # Identity alone still answers order-status questions.
    status = message_of(shop.send("order A-1001 status", sub=sub))
    assert "A-1001" in status["parts"][0]["text"]
    assert "metadata" not in status

    # An account action without a delegation token is a step-up task, not a failure.
    task = task_of(shop.send("show my orders", sub=sub))
    context_id = task["contextId"]
    assert task["metadata"]["pact.missingScopes"] == ["orders:read"]
    assert task["metadata"]["pact.verificationUriComplete"].startswith(shop.base_url)

    # The personal agent asks for both scopes; nobody has decided yet.
    device = shop.device_authorization("orders:read orders:return", sub=sub)
    assert device["interval"] == INTERVAL
    assert oauth_error(shop.poll(device["device_code"], sub=sub)) == "authorization_pending"

    # The person opens the link: off to the shop's login, back to consent, `orders:return`
    # unticked.
    with shop.person() as browser:
        signed_out = browser.get(device["verification_uri_complete"])
        assert signed_out.status_code in (302, 303)
        page = shop.consent(browser, device["verification_uri_complete"], JANE)
        assert SCOPES["orders:read"] in page.text
        assert SCOPES["orders:return"] in page.text
        assert "jane" in page.text
        decided = shop.decide(browser, page, "allow", ["orders:read"])
        assert decided.status_code == 303, decided.text
        location = decided.headers["location"]
        assert location.startswith(f"{shop.base_url}/a2a/{BRAND}/oauth/connected?status=approved")
        assert browser.get(location).status_code == 200

        # The token holds what the person approved, not what was asked.
        granted = shop.poll(device["device_code"], sub=sub)
        assert granted.status_code == 200, granted.text
        tokens = granted.json()
        assert tokens["token_type"] == "Bearer"
        assert tokens["scope"] == "orders:read"
        claims = verified_token_claims(shop, tokens["access_token"])
        assert claims["sub"] == jane
        assert claims["scope"] == "orders:read"
        assert claims["client_id"] == ISSUER
        assert oauth_error(shop.poll(device["device_code"], sub=sub)) == "invalid_grant"

        # The same conversation, now as Jane: her orders, and a receipt that verifies.
        reply = message_of(
            shop.send(
                "show my orders",
                sub=sub,
                context_id=context_id,
                access_token=tokens["access_token"],
            )
        )
        assert reply["contextId"] == context_id
        text = reply["parts"][0]["text"]
        assert "A-1001" in text
        assert "A-1003" in text
        assert "A-1002" not in text  # Alex's order
        assert [o["number"] for o in reply["parts"][1]["data"]["orders"]] == ["A-1001", "A-1003"]
        receipt = verified_receipt(shop, reply)
        assert receipt["user"] == jane
        assert receipt["pa"] == ISSUER
        assert receipt["brand"] == f"{shop.base_url}/a2a/{BRAND}"
        assert receipt["grantId"] == claims["grant_id"]
        assert receipt["scopesUsed"] == ["orders:read"]
        assert receipt["actions"] == [{"tool": "list_orders"}]

        # A return needs the scope she left unticked: step-up, the conversation stays open.
        return_id = str(uuid.uuid4())
        step_up = task_of(
            shop.send(
                "return order A-1001",
                sub=sub,
                context_id=context_id,
                access_token=tokens["access_token"],
                message_id=return_id,
            )
        )
        assert step_up["contextId"] == context_id
        assert step_up["metadata"]["pact.missingScopes"] == ["orders:return"]
        assert step_up["metadata"]["pact.verificationUriComplete"].startswith(
            f"{shop.base_url}/a2a/{BRAND}/oauth/consent?user_code="
        )
        assert shop.agent.get("/orders/A-1001").json()["return_requested"] is False

        # The agent repeats the device flow for the missing scope (spec §5.5); Jane is still
        # signed in to the shop, so the link goes straight to consent.
        more = shop.device_authorization("orders:return", sub=sub)
        page = shop.consent(browser, more["verification_uri_complete"])
        assert SCOPES["orders:return"] in page.text
        # Only the missing scope is asked; the held one is listed as kept whatever Jane picks.
        assert 'value="orders:read"' not in page.text
        assert "can already do this for you" in page.text
        assert shop.decide(browser, page, "allow", ["orders:return"]).status_code == 303
    widened = shop.poll(more["device_code"], sub=sub)
    assert widened.status_code == 200, widened.text
    tokens = widened.json()
    assert tokens["scope"].split() == ["orders:read", "orders:return"]

    # The very message that stepped up is sent again and now runs; the write is in the receipt.
    done = message_of(
        shop.send(
            "return order A-1001",
            sub=sub,
            context_id=context_id,
            access_token=tokens["access_token"],
            message_id=return_id,
        )
    )
    assert "started a return for order A-1001" in done["parts"][0]["text"]
    receipt = verified_receipt(shop, done)
    assert receipt["user"] == jane
    assert receipt["scopesUsed"] == ["orders:return"]
    assert receipt["actions"] == [
        {"tool": "start_return", "argsHash": args_hash({"order": "A-1001"})}
    ]
    assert shop.agent.get("/orders/A-1001").json()["return_requested"] is True
    # Tools act only on the signed-in customer's own orders.
    foreign = message_of(
        shop.send(
            "return order A-1002",
            sub=sub,
            context_id=context_id,
            access_token=tokens["access_token"],
        )
    )
    assert "can't find order A-1002 on your account" in foreign["parts"][0]["text"]
    assert shop.agent.get("/orders/A-1002").json()["return_requested"] is False

    # Refresh rotates: a new pair, same scopes, and the new access token works.
    rotated = shop.refresh(tokens["refresh_token"], sub=sub)
    assert rotated.status_code == 200, rotated.text
    fresh = rotated.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert fresh["scope"] == tokens["scope"]
    again = message_of(
        shop.send(
            "show my orders", sub=sub, context_id=context_id, access_token=fresh["access_token"]
        )
    )
    assert verified_receipt(shop, again)["actions"] == [{"tool": "list_orders"}]

    # The spent refresh token comes back at once (an agent that lost the answer): within the
    # reuse interval it gets the same pair, and the grant stays. After the interval a reuse
    # revokes the whole grant (tests/delegated/test_refresh_reuse.py).
    repeated = shop.refresh(tokens["refresh_token"], sub=sub)
    assert repeated.status_code == 200, repeated.text
    assert repeated.content == rotated.content
    still = message_of(
        shop.send(
            "show my orders", sub=sub, context_id=context_id, access_token=fresh["access_token"]
        )
    )
    assert verified_receipt(shop, still)["actions"] == [{"tool": "list_orders"}]
    assert shop.refresh(fresh["refresh_token"], sub=sub).status_code == 200


def test_denied_consent(shop: Shop) -> None:
    sub = "deny-user"
    device = shop.device_authorization("orders:read", sub=sub)
    with shop.person() as browser:
        page = shop.consent(browser, device["verification_uri_complete"], ALEX)
        decided = shop.decide(browser, page, "deny", [])
        assert decided.status_code == 303, decided.text
        location = decided.headers["location"]
        assert "/oauth/connected?status=denied&outcome=" in location
        # The code is spent: the link cannot be decided on again.
        assert browser.get(device["verification_uri_complete"]).status_code == 400
    assert oauth_error(shop.poll(device["device_code"], sub=sub)) == "access_denied"


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/phish",
        "//evil.example/phish",
        "/\\evil.example/phish",
        "https:evil.example",
        "javascript:alert(1)",
    ],
)
def test_login_never_redirects_off_site(shop: Shop, target: str) -> None:
    with shop.person() as browser:
        back = shop.log_in(
            browser, f"{shop.example.login_path}?{urlencode({'next': target})}", JANE
        )
        assert back.status_code in (302, 303), back.text
        assert back.headers["location"] == "/"


def test_login_keeps_on_site_targets_and_refuses_bad_passwords(shop: Shop) -> None:
    with shop.person() as browser:
        refused = shop.log_in(browser, shop.example.login_path, ("jane", "wrong"))
        assert refused.status_code == 200
        assert "do not match" in refused.text
        back = shop.log_in(browser, f"{shop.example.login_path}?next=/orders/A-1001", JANE)
        assert back.headers["location"] == "/orders/A-1001"


def test_login_form_needs_its_csrf_token(shop: Shop) -> None:
    with shop.person() as browser:
        form = post_form(browser.get(shop.example.login_path).text)
        forged = browser.post(form["action"], data={"username": "jane", "password": JANE[1]})
        assert forged.status_code in (400, 403)
        # And nobody got signed in by it: consent still sends this browser to the login.
        device = shop.device_authorization("orders:read", sub="csrf-user")
        assert browser.get(device["verification_uri_complete"]).status_code in (302, 303)
