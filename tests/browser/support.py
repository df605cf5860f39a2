"""What the browser tests share: the consent-page site (a host app with a real login page
and the Provider on uvicorn), a brand-mode site, and the helpers that drive Chromium through
the person's pages (sign in, open the consent page, press a decision, revoke, screenshot,
axe-core's audit).

Kept here, not in a test module, so that changing one test never breaks another.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import struct
import time
from collections.abc import Iterator
from functools import cache
from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
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
from pactmw.brand_login import BrandUser, DevelopmentBrandLogin, consent_url_for
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, parse_jwks, public_key_set
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
from pactmw.store.base import Grant, Store
from tests.support.agent import identity_token
from tests.support.chromium import WAIT
from tests.support.net import free_port
from tests.support.parties import AGENT_NAME
from tests.support.servers import REPO, uvicorn_server

ARTIFACTS = REPO / "test-artifacts" / "browser"
BRAND_ID = "acme"
BRAND_NAME = "Acme Outdoor"
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

    def agent_headers(self, sub: str = "pa-user-1") -> dict[str, str]:
        """The agent's identity token for its user `sub`."""
        jwt = identity_token(self._agent_key, self.issuer, AUDIENCE, sub=sub)
        return {"authorization": f"Bearer {jwt}"}

    def device_authorization(
        self,
        scope: str = " ".join(SCOPES),
        details: list[dict[str, Any]] | None = None,
        *,
        sub: str = "pa-user-1",
    ) -> dict[str, Any]:
        """Ask for `scope` (and RFC 9396 authorization `details`, when given) for the agent's
        user `sub`."""
        form = {"client_id": self.issuer, "scope": scope}
        if details is not None:
            form["authorization_details"] = json.dumps(details)
        response = httpx.post(
            f"{self.oauth}/device_authorization", headers=self.agent_headers(sub), data=form
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


# -- helpers of the person's pages --------------------------------------------------------------


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


def open_consent(
    browser: WebDriver, site: Site, scope: str, *, sub: str = "pa-user-1"
) -> dict[str, Any]:
    """The agent asks for `scope` for its user `sub`; the (signed-in) person opens the
    consent link. The value is the device authorization."""
    asked = site.device_authorization(scope, sub=sub)
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


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def revoke(browser: WebDriver, card: WebElement, agent_name: str) -> None:
    """Press the Revoke button in `card`; the page then says the agent can no longer act."""
    card.find_element(By.CSS_SELECTOR, "button[name=action][value=revoke]").click()
    notice = WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "notice")))
    assert notice.text == f"{agent_name} can no longer act for you."


def press(browser: WebDriver, decision: str) -> str:
    """Press Allow or Deny; the heading of the page the decision leads to: the result page
    of a decision, or, for a request already answered, that answer shown where it was sent."""
    browser.find_element(By.CSS_SELECTOR, f"button[name=decision][value={decision}]").click()
    WebDriverWait(browser, WAIT).until(
        lambda d: urlsplit(d.current_url).path.endswith(("/consent/decision", "/oauth/connected"))
    )
    return str(browser.find_element(By.TAG_NAME, "h1").text)


ANSWERED = "You had already answered this request. Your first answer stands."


def two_tabs_on_the_form(browser: WebDriver, link: str) -> tuple[str, str]:
    """The consent page of `link` open in two tabs (as a form left open, then opened again)."""
    browser.get(link)
    WebDriverWait(browser, WAIT).until(has_consent_form)
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(link)
    WebDriverWait(browser, WAIT).until(has_consent_form)
    return first, browser.current_window_handle


# -- the pages' conditions: an RFC 9396 authorization detail type ------------------------

CANCEL = "https://acme.example/authorization/order-cancel/v1"
ORDER_CANCEL = AuthorizationDetailType(
    type=CANCEL,
    scope="orders:cancel",
    schema={
        "type": "object",
        "properties": {"type": {"const": CANCEL}, "order": {"type": "string"}},
        "required": ["type", "order"],
    },
    render=lambda entry: f"Only order {entry['order']}",
)


# -- brand mode: the Brand's own login (DevelopmentBrandLogin) signs the person in -------------

JANE = "jane@example.com"
#: Jane's password at `brand_mode_site`'s Brand login.
BRAND_PASSWORD = "correct horse"


@contextlib.contextmanager
def brand_mode_site(
    tmp_path: Path, email: str | None = JANE
) -> Iterator[tuple[str, DevelopmentBrandLogin, Store]]:
    """A brand-mode Provider on uvicorn and the development Brand login in front of it, whose
    one user is jane (`email`: hers, or None)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    login = DevelopmentBrandLogin(
        consent_url=consent_url_for(base, BRAND_ID),
        users=[BrandUser("jane", BRAND_PASSWORD, account="acct-jane", email=email)],
        brand_name=BRAND_NAME,
    ).start()
    agent_key = generate_private_jwk("ES256", kid="pa-1")
    registry = AgentRegistry(
        [RegisteredAgent(issuer=PA_ISSUER, name=AGENT_NAME, jwks=public_key_set([agent_key]))]
    )
    delegation = DelegationConfig(
        scopes=SCOPES,
        login_url=login.login_url,
        mode="brand",
        brand_issuer=login.issuer,
        brand_jwks=parse_jwks(login.jwks()),
    )
    store = open_store(f"sqlite:///{tmp_path}/brand.db")
    provider = Provider(
        base_url=base,
        verifier=IdentityVerifier(audience="browser-test", registry=registry),
        store=store,
        brands=[Brand(id=BRAND_ID, name=BRAND_NAME, handler=lambda _: "hi", delegation=delegation)],
        signing_keys=SigningKeys((generate_private_jwk("ES256"),)),
    )
    try:
        with uvicorn_server(A2AProviderApp(provider), port=port):
            yield base, login, store
    finally:
        login.close()
        store.close()


def sign_in_at_brand(browser: WebDriver, wait: WebDriverWait[WebDriver]) -> None:
    """Sign in as jane at `brand_mode_site`'s Brand login, once its form is shown."""
    wait.until(EC.presence_of_element_located((By.NAME, "username")))
    browser.find_element(By.NAME, "username").send_keys("jane")
    browser.find_element(By.NAME, "password").send_keys(BRAND_PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def janes_grant(store: Store, grant_id: str) -> Grant:
    """A day-long `orders:read` grant of jane's (`acct-jane`) to the agent's user
    `pa-user-1`, as the connected agents page lists it."""
    now = time.time()
    return store.upsert_grant(
        grant_id=grant_id,
        brand_id=BRAND_ID,
        account="acct-jane",
        client_id=PA_ISSUER,
        pa_sub="pa-user-1",
        scopes=("orders:read",),
        now=now,
        expires_at=now + 86400,
    )


# -- axe-core --------------------------------------------------------------------------------

#: The rules of WCAG 2.0 and 2.1, levels A and AA (axe-core's tags for them).
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


@cache
def axe_source() -> str:
    return (files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")


def axe_violations(browser: WebDriver) -> list[dict[str, Any]]:
    """axe-core's WCAG 2.1 A/AA violations on the page the browser shows now."""
    if not browser.execute_script("return typeof window.axe === 'object'"):
        browser.execute_script(axe_source())
    answer = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        axe.run(document, {runOnly: {type: "tag", values: arguments[0]},
                           resultTypes: ["violations"]})
            .then(results => done(JSON.stringify(results)))
            .catch(error => done(JSON.stringify({error: String(error)})));
        """,
        WCAG_21_AA,
    )
    results: dict[str, Any] = json.loads(answer)
    assert "error" not in results, results
    assert results["testEngine"]["name"] == "axe-core"
    violations: list[dict[str, Any]] = results["violations"]
    return violations
