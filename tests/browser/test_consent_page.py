"""The PACT Delegated consent page, used by a person in a real headless Chromium.

A Provider (sqlite store) runs on uvicorn inside a small host app with a real login page and a
signed session cookie; the personal agent's side (device authorization, token polling) is
httpx. A second server on another port is "another origin" that tries to frame the page.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.protocols.delegation import SigningKeys
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent
from pactmw.provider import Brand, Provider
from pactmw.provider.authorization_details import AuthorizationDetailType
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.consent_pages import ConsentPages, ConsentView
from pactmw.provider.delegated import DEVICE_CODE_GRANT, SignedInUser
from pactmw.provider.ratelimit import RateLimit
from pactmw.provider.tools import ToolRegistry
from pactmw.store import open_store
from tests.support.agent import identity_token
from tests.support.chromium import WAIT
from tests.support.net import free_port
from tests.support.servers import REPO, uvicorn_server

ARTIFACTS = REPO / "test-artifacts" / "browser"
BRAND_ID = "acme"
BRAND_NAME = "Acme Outdoor"
AGENT_NAME = "Demo PA"
PA_ISSUER = "https://pa.example"
AUDIENCE = "browser-test"
SCOPES = {
    "orders:read": "Look up your orders",
    "orders:track": "Follow your deliveries",
    "orders:cancel": "Cancel an order",
}
UNTICKED = "orders:track"
INTERVAL = 1
USERNAME, PASSWORD = "jane", "correct horse battery"
USER = SignedInUser(account="acct-42", label="jane@example.com")
COOKIE = "host_session"


# -- the host app: a login page, a signed cookie, the Provider mounted at the root ------------


class HostApp:
    """What a real site around the Provider does: sign people in and say who is signed in."""

    def __init__(self, base: str, consent_url: str) -> None:
        self.base = base
        self.consent_url = consent_url
        self._secret = secrets.token_bytes(32)
        self.app = Starlette(
            routes=[
                Route("/", self.home),
                Route("/login", self.login, methods=["GET", "POST"]),
                Route("/control", self.control),
            ]
        )

    def _mac(self, username: str) -> str:
        return hmac.new(self._secret, username.encode(), hashlib.sha256).hexdigest()

    def current_user(self, conn: HTTPConnection) -> SignedInUser | None:
        """The `current_user` resolver given to `A2AProviderApp`: reads the signed cookie."""
        username, _, mac = conn.cookies.get(COOKIE, "").rpartition(".")
        if username == USERNAME and hmac.compare_digest(mac, self._mac(username)):
            return USER
        return None

    def safe_next(self, target: str) -> str | None:
        """Where a login may send the person: a same-origin path or the Provider's consent URL."""
        if target == self.consent_url or target.startswith(self.consent_url + "?"):
            return target
        parts = urlsplit(target)
        if (
            target.startswith("/")
            and not target.startswith("//")
            and "\\" not in target
            and not parts.scheme
            and not parts.netloc
        ):
            return target
        return None

    async def home(self, request: Request) -> Response:
        user = self.current_user(request)
        text = f"Signed in as {user.label}" if user else "Not signed in"
        return HTMLResponse(f"<!doctype html><title>Home</title><p id='who'>{escape(text)}</p>")

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            target = request.query_params.get("next", "/")
            if self.safe_next(target) is None:
                return HTMLResponse("<p>Bad next</p>", status_code=400)
            return self._login_page(target)
        form = parse_qs((await request.body()).decode(), keep_blank_values=True)
        safe_target = self.safe_next(form.get("next", ["/"])[0])
        if safe_target is None:
            return HTMLResponse("<p>Bad next</p>", status_code=400)
        username, password = form.get("username", [""])[0], form.get("password", [""])[0]
        if username != USERNAME or not hmac.compare_digest(password, PASSWORD):
            return self._login_page(safe_target, "Wrong username or password.", 401)
        response = RedirectResponse(safe_target, status_code=303)
        response.set_cookie(
            COOKIE, f"{username}.{self._mac(username)}", httponly=True, samesite="lax"
        )
        return response

    def _login_page(self, target: str, error: str = "", status: int = 200) -> Response:
        problem = f"<p role='alert'>{escape(error)}</p>" if error else ""
        return HTMLResponse(
            "<!doctype html><html><head><title>Sign in</title></head><body>"
            f"<h1>Sign in to {escape(BRAND_NAME)}</h1>{problem}"
            '<form id="login-form" method="post" action="/login">'
            f'<input type="hidden" name="next" value="{escape(target)}">'
            '<label>Username <input name="username" autocomplete="username"></label> '
            '<label>Password <input name="password" type="password"></label> '
            '<button id="sign-in" type="submit">Sign in</button></form></body></html>',
            status_code=status,
        )

    async def control(self, request: Request) -> Response:
        """A consent-like page with NO anti-framing headers: framing it must work."""
        view = ConsentView(
            brand_name=BRAND_NAME,
            agent_name=AGENT_NAME,
            agent_origin=PA_ISSUER,
            signed_in_as=USER.label,
            scopes=tuple(SCOPES.items()),
            decision_url=f"{self.base}/nowhere",
            session="control",
        )
        return HTMLResponse(ConsentPages().consent(view))


class Site:
    """The running host app + Provider, and the personal agent's HTTP calls to it."""

    def __init__(
        self, base: str, agent_key: PrivateJWK, host: HostApp, issuer: str = PA_ISSUER
    ) -> None:
        self.base = base
        self.host = host
        self.issuer = issuer
        self._agent_key = agent_key
        self.oauth = f"{base}/a2a/{BRAND_ID}/oauth"

    def agent_headers(self) -> dict[str, str]:
        jwt = identity_token(self._agent_key, self.issuer, AUDIENCE, sub="pa-user-1")
        return {"authorization": f"Bearer {jwt}"}

    def device_authorization(
        self, scope: str = " ".join(SCOPES), details: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Ask for `scope` (and RFC 9396 authorization `details`, when given)."""
        form = {"client_id": self.issuer, "scope": scope}
        if details is not None:
            form["authorization_details"] = json.dumps(details)
        response = httpx.post(
            f"{self.oauth}/device_authorization", headers=self.agent_headers(), data=form
        )
        assert response.status_code == 200, response.text
        document: dict[str, Any] = response.json()
        return document

    def token_answer(self, device_code: str) -> httpx.Response:
        """One token request for `device_code`, as the personal agent sends it."""
        return httpx.post(
            f"{self.oauth}/token",
            headers=self.agent_headers(),
            data={
                "client_id": self.issuer,
                "grant_type": DEVICE_CODE_GRANT,
                "device_code": device_code,
            },
        )

    def poll_token(self, device_code: str) -> dict[str, Any]:
        """Poll like a personal agent (RFC 8628: wait `interval` between polls), bounded."""
        deadline = time.monotonic() + WAIT
        while True:
            response = self.token_answer(device_code)
            if response.status_code == 200:
                token: dict[str, Any] = response.json()
                return token
            assert response.json()["error"] in ("authorization_pending", "slow_down"), response.text
            assert time.monotonic() < deadline, f"no token after {WAIT} s: {response.text}"
            time.sleep(INTERVAL)


@contextlib.contextmanager
def serve_site(
    tmp_path: Path,
    *,
    agent_name: str = AGENT_NAME,
    brand_name: str = BRAND_NAME,
    issuer: str = PA_ISSUER,
    scopes: dict[str, str] = SCOPES,
    detail_types: tuple[AuthorizationDetailType, ...] = (),
    consent_rate_limit: RateLimit | None = None,
    pages: ConsentPages | None = None,
) -> Iterator[Site]:
    """The host app and Provider on uvicorn, the Brand called `brand_name`; one registered
    personal agent, `agent_name` from `issuer`, asking for `scopes` (with authorization
    details of `detail_types`); the pages' rate limit is `consent_rate_limit` (the Provider's
    default when None); the pages are `pages` (the default English ones when None)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tools = ToolRegistry()

    @tools.tool(scope="orders:read")
    def list_orders(account: str) -> list[str]:
        return ["A-1001"]

    agent_key = generate_private_jwk("ES256", kid="pa-1")
    registry = AgentRegistry(
        [RegisteredAgent(issuer=issuer, name=agent_name, jwks=public_key_set([agent_key]))]
    )
    delegation = DelegationConfig(
        scopes=scopes,
        login_url=f"{base}/login",
        tools=tools,
        interval=INTERVAL,
        authorization_details=detail_types,
        pages=pages if pages is not None else ConsentPages(),
    )
    store = open_store(f"sqlite:///{tmp_path}/store.db")
    provider = Provider(
        base_url=base,
        verifier=IdentityVerifier(audience=AUDIENCE, registry=registry),
        store=store,
        brands=[Brand(id=BRAND_ID, name=brand_name, handler=lambda _: "hi", delegation=delegation)],
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
        consent_rate_limit=consent_rate_limit,
    )
    host = HostApp(base, f"{base}/a2a/{BRAND_ID}/oauth/consent")
    app: Any = A2AProviderApp(provider, host.app, current_user=host.current_user)
    try:
        with uvicorn_server(app, port=port):
            yield Site(base, agent_key, host, issuer)
    finally:
        store.close()


# -- other origin: a page that frames whatever `src` says ---------------------------------------


async def framer(request: Request) -> Response:
    src = escape(request.query_params["src"])
    return HTMLResponse(
        "<!doctype html><title>Framer</title><h1>Another origin</h1>"
        f'<iframe id="victim" src="{src}" width="800" height="600"'
        " onload=\"this.dataset.loaded='yes'\"></iframe>"
    )


FRAMER = Starlette(routes=[Route("/frame", framer)])


# -- helpers ------------------------------------------------------------------------------------


def screenshot(browser: WebDriver, name: str) -> Path:
    """Save a PNG under test-artifacts/browser/ and check it is a real, non-trivial image."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    path.unlink(missing_ok=True)
    assert browser.save_screenshot(str(path))
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), name
    assert len(data) > 5_000, f"{name} is only {len(data)} bytes"
    return path


def sign_in(browser: WebDriver, site: Site) -> None:
    browser.get(f"{site.base}/login")
    fill_login(browser)
    WebDriverWait(browser, WAIT).until(
        EC.text_to_be_present_in_element((By.ID, "who"), f"Signed in as {USER.label}")
    )


def fill_login(browser: WebDriver) -> None:
    WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "login-form")))
    browser.find_element(By.NAME, "username").send_keys(USERNAME)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "sign-in").click()


def open_consent(browser: WebDriver, site: Site, scope: str) -> dict[str, Any]:
    """The agent asks for `scope`; the (signed-in) person opens the consent link. The value
    is the device authorization."""
    asked = site.device_authorization(scope)
    browser.get(asked["verification_uri_complete"])
    WebDriverWait(browser, WAIT).until(has_consent_form)
    return asked


def result_heading(browser: WebDriver) -> WebElement:
    """The heading of the result page the decision leads to, once it is there."""
    heading: WebElement = WebDriverWait(browser, WAIT).until(
        lambda d: (
            urlsplit(d.current_url).path.endswith("/oauth/connected")
            and d.find_element(By.TAG_NAME, "h1")
        )
    )
    return heading


def refused_in_a_frame(browser: WebDriver, src: str, content: str) -> None:
    """Load `src` in an iframe of another origin: Chromium must refuse to render it there
    (no element matching the CSS selector `content` in the frame)."""
    with uvicorn_server(FRAMER) as other:
        browser.get(f"{other}/frame?{urlencode({'src': src})}")
        frame = browser.find_element(By.ID, "victim")
        WebDriverWait(browser, WAIT).until(lambda _: frame.get_attribute("data-loaded"))
        browser.switch_to.frame(frame)
        try:
            assert browser.execute_script("return location.href").startswith("chrome-error://")
            assert not browser.find_elements(By.CSS_SELECTOR, content)
        finally:
            browser.switch_to.default_content()


def has_consent_form(browser: WebDriver) -> bool:
    return bool(browser.find_elements(By.CSS_SELECTOR, "form input[name=session]"))


# -- tests --------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_person_signs_in_and_allows_some_scopes(browser: WebDriver, tmp_path: Path) -> None:
    # Regression: consent pages once sent `Referrer-Policy: no-referrer`, so Chromium posted
    # the decision with `Origin: null` and the Origin check refused every real Allow (403).
    variant = "consent"
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        authorization = site.device_authorization()
        link = authorization["verification_uri_complete"]
        consent_path = urlsplit(link).path

        # Signed out: the consent link sends the person to the host app's login page.
        browser.get(link)
        wait.until(EC.presence_of_element_located((By.ID, "login-form")))
        here = urlsplit(browser.current_url)
        assert (here.path, parse_qs(here.query)["next"]) == ("/login", [link])
        fill_login(browser)

        # Signed in: back on the consent page of this very code.
        wait.until(lambda d: urlsplit(d.current_url).path == consent_path and has_consent_form(d))
        assert browser.current_url == link
        heading = browser.find_element(By.TAG_NAME, "h1").text
        assert AGENT_NAME in heading
        assert BRAND_NAME in heading
        assert USER.label in browser.find_element(By.TAG_NAME, "body").text
        labels = [label.text.strip() for label in browser.find_elements(By.CSS_SELECTOR, "label")]
        assert labels == list(SCOPES.values())
        boxes = {
            box.get_attribute("value"): box
            for box in browser.find_elements(By.CSS_SELECTOR, "input[type=checkbox][name=scope]")
        }
        assert list(boxes) == list(SCOPES)
        assert all(box.is_selected() for box in boxes.values())
        boxes[UNTICKED].click()
        assert not boxes[UNTICKED].is_selected()
        assert sum(box.is_selected() for box in boxes.values()) == len(SCOPES) - 1
        screenshot(browser, f"{variant}-consent-page.png")

        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        wait.until(lambda d: urlsplit(d.current_url).path != consent_path)
        heading = wait.until(EC.presence_of_element_located((By.TAG_NAME, "h1"))).text
        text = browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, f"{variant}-after-allow.png")
        assert "did not come from the consent page" not in text
        assert urlsplit(browser.current_url).path == f"/a2a/{BRAND_ID}/oauth/connected"
        assert heading == "Connected"
        assert browser.title == "Personal agent: Connected"
        granted = [scope for scope in SCOPES if scope != UNTICKED]
        # The person reads what the agent can now do, in the Brand's words, not scope ids.
        assert all(SCOPES[scope] in text for scope in granted)
        assert SCOPES[UNTICKED] not in text
        assert not any(scope in text for scope in SCOPES)
        assert f"{AGENT_NAME} can now do this for you at {BRAND_NAME} until" in text

        token = site.poll_token(authorization["device_code"])
        assert sorted(token["scope"].split()) == sorted(granted)  # a set (RFC 6749 §3.3)


@pytest.mark.timeout(60)
def test_a_declined_step_up_says_what_the_agent_still_can_do(
    browser: WebDriver, tmp_path: Path
) -> None:
    """Issue 15 point 2: untick everything on a step-up; the earlier grant stays, and the
    result page says so (it used to say "Nothing was shared ... cannot act for you")."""
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        first = open_consent(browser, site, "orders:read")
        text = browser.find_element(By.TAG_NAME, "body").text
        assert "This approval lasts 30 days." in text
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        wait.until(lambda d: urlsplit(d.current_url).path.endswith("/oauth/connected"))
        site.poll_token(first["device_code"])

        # Step-up: the agent asks to cancel orders; the page says what it already holds.
        open_consent(browser, site, "orders:cancel")
        text = browser.find_element(By.TAG_NAME, "body").text
        assert f"{AGENT_NAME} can already do this for you" in text
        assert SCOPES["orders:read"] in text
        box = browser.find_element(By.CSS_SELECTOR, "input[type=checkbox][name=scope]")
        box.click()  # untick the only new scope
        assert not box.is_selected()
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=allow]").click()
        heading = result_heading(browser)
        assert heading.text == "Nothing new allowed"
        text = browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, "step-up-declined.png")
        assert "Your earlier approval still stands." in text
        assert "cannot act for you" not in text
        assert f"{AGENT_NAME} can now do this for you at {BRAND_NAME} until" in text
        assert SCOPES["orders:read"] in text
        assert SCOPES["orders:cancel"] not in text


@pytest.mark.timeout(60)
def test_a_declined_request_with_nothing_live_says_nothing_was_shared(
    browser: WebDriver, tmp_path: Path
) -> None:
    """Deny with nothing approved before: the page says nothing was shared and offers
    nothing to revoke, only where to see every agent that can act for the person."""
    wait = WebDriverWait(browser, WAIT)
    with serve_site(tmp_path) as site:
        sign_in(browser, site)
        open_consent(browser, site, "orders:read")
        browser.find_element(By.CSS_SELECTOR, "button[name=decision][value=deny]").click()
        heading = result_heading(browser)
        assert heading.text == "Not connected"
        text = browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, "declined-nothing-live.png")
        assert f"Nothing was shared. {AGENT_NAME} cannot act for you at {BRAND_NAME}." in text
        assert "revoke" not in text.lower()
        assert SCOPES["orders:read"] not in text
        browser.find_element(By.LINK_TEXT, "connected agents page").click()
        wait.until(EC.presence_of_element_located((By.ID, "no-agents")))
        assert urlsplit(browser.current_url).path == f"/a2a/{BRAND_ID}/oauth/agents"


@pytest.mark.timeout(60)
def test_consent_page_is_not_rendered_in_a_frame_of_another_origin(
    browser: WebDriver, tmp_path: Path
) -> None:
    with serve_site(tmp_path) as site, uvicorn_server(FRAMER) as other:
        assert urlsplit(other).netloc != urlsplit(site.base).netloc
        sign_in(browser, site)
        link = site.device_authorization()["verification_uri_complete"]
        # Top level, the very same URL shows the consent form to this person...
        browser.get(link)
        WebDriverWait(browser, WAIT).until(has_consent_form)
        # selenium's get_log has no annotations.
        browser.get_log("browser")  # type: ignore[no-untyped-call]  # drop what came before

        def framed(src: str) -> tuple[str, bool]:
            """Load `src` in an iframe of the other origin; (frame's URL, consent form in it)."""
            browser.get(f"{other}/frame?{urlencode({'src': src})}")
            frame = browser.find_element(By.ID, "victim")
            WebDriverWait(browser, WAIT).until(lambda _: frame.get_attribute("data-loaded"))
            browser.switch_to.frame(frame)
            try:
                return browser.execute_script("return location.href"), has_consent_form(browser)
            finally:
                browser.switch_to.default_content()

        # ...but framed by another origin, Chromium refuses to render it.
        url, form = framed(link)
        screenshot(browser, "framed-consent-page.png")
        assert url.startswith("chrome-error://"), url
        assert not form
        entries = browser.get_log("browser")  # type: ignore[no-untyped-call]  # as above
        logs = " ".join(entry["message"] for entry in entries)
        assert "frame-ancestors 'none'" in logs or "X-Frame-Options" in logs, logs

        # Control: the same markup without the anti-framing headers does render in the frame.
        control = f"{site.base}/control"
        url, form = framed(control)
        screenshot(browser, "framed-control-page.png")
        assert url == control
        assert form


def test_login_only_returns_to_this_site_or_the_consent_page(tmp_path: Path) -> None:
    """The test's own login page must not be an open redirect."""
    with serve_site(tmp_path) as site:
        consent = f"{site.oauth}/consent?user_code=BCDF-GHJK"
        good = {"username": USERNAME, "password": PASSWORD}
        for target in (consent, "/", "/somewhere?x=1"):
            response = httpx.post(f"{site.base}/login", data={**good, "next": target})
            assert response.status_code == 303, target
            assert response.headers["location"] == target
            assert COOKIE in response.cookies
        for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "x"):
            response = httpx.post(f"{site.base}/login", data={**good, "next": target})
            assert response.status_code == 400, target
        response = httpx.post(f"{site.base}/login", data={**good, "password": "no", "next": "/"})
        assert response.status_code == 401
        assert response.cookies.get(COOKIE) is None
