"""Attacks on the consent pages beyond `tests/delegated/test_consent_attacks.py` (SECURITY.md,
"The consent page").

That file covers CSRF, forged sessions, same-app redirects, user-code guessing and malformed
bodies. This one adds: markup injection through every name the page shows (Brand, agent,
signed-in person, scope ids and descriptions), the security headers on every consent response
of both login modes, `return_to` injection in brand mode, tokens of one kind presented as
another (a consent session as a Brand login assertion and back), sessions replayed after their
decision, and the decision URL under other methods.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.protocols.delegation import mint_login_assertion
from pactmw.provider import Brand
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated import SignedInUser
from tests.advisories.support import serve_provider
from tests.delegated.support import (
    LOGIN_URL,
    SCOPES,
    Env,
    assert_page_headers,
    form_action,
    hidden,
    new_sub,
)
from tests.support.net import unread_body_post
from tests.support.parties import ISSUER

BRAND_NAME = '<script>alert("brand")</script> & "Co"'
AGENT_NAME = "\"><script>alert('pa')</script><img src=x onerror=alert(1)>"
LABEL = "<iframe src=https://evil.example></iframe>@example.com"
HOSTILE_SCOPES = {
    "orders:read": '<img src=x onerror=alert("scope")>',
    "<b>bold</b>": "</label><script>alert(2)</script>",
    "x'onfocus='alert(3)'autofocus='": "<svg/onload=alert(4)>",
}
HOSTILE = [
    BRAND_NAME,
    AGENT_NAME,
    LABEL,
    *(scope for scope in HOSTILE_SCOPES if scope != "orders:read"),
    *HOSTILE_SCOPES.values(),
]
INJECTED_TAGS = ("<script", "<img", "<iframe", "<svg", "<b>")

BRAND_ISSUER = "https://brand.example"
BRAND_LOGIN = "https://brand.example/login"
BRAND_KEY = generate_private_jwk("ES256", kid="brand-1")


def _bot(turn: Any) -> str:
    return "hi"


def brands() -> list[Brand]:
    return [
        Brand(
            id="acme",
            name=BRAND_NAME,
            handler=_bot,
            delegation=DelegationConfig(scopes=HOSTILE_SCOPES, login_url=LOGIN_URL, interval=1),
        ),
        Brand(
            id="skyline",
            name="Skyline",
            handler=_bot,
            delegation=DelegationConfig(
                scopes=SCOPES,
                login_url=BRAND_LOGIN,
                mode="brand",
                brand_issuer=BRAND_ISSUER,
                brand_jwks=public_key_set([BRAND_KEY]),
                interval=1,
            ),
        ),
    ]


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    mallory = SignedInUser(account="acct-mallory", label=LABEL)
    with serve_provider(
        brands(), agent_names={ISSUER: AGENT_NAME}, users={"mallory": mallory}
    ) as running:
        yield running


def assert_secure_page(answer: httpx.Response) -> None:
    assert_page_headers(answer)  # X-Frame-Options, CSP frame-ancestors, no-store, Referrer
    assert answer.headers["x-content-type-options"] == "nosniff"
    policy = answer.headers["content-security-policy"]
    for directive in ("default-src 'none'", "form-action 'self'", "base-uri 'none'"):
        assert directive in policy, policy
    assert "script-src" not in policy  # nothing may run, inline or not


def assert_no_injected_markup(html: str) -> None:
    lowered = html.lower()
    for tag in INJECTED_TAGS:
        assert tag not in lowered, tag


def brand_assertion(env: Env, code: str, **overrides: Any) -> str:
    arguments: dict[str, Any] = {
        "key": BRAND_KEY,
        "brand_issuer": BRAND_ISSUER,
        "consent_url": env.oauth("skyline", "consent"),
        "account": "sky-1",
        "user_code": code,
        **overrides,
    }
    return mint_login_assertion(**arguments)


# -- markup injection ------------------------------------------------------------------------------


def test_every_name_on_the_consent_page_is_escaped(env: Env) -> None:
    scope = " ".join(HOSTILE_SCOPES)
    started = env.device_authorization("acme", scope, sub=new_sub())
    assert started.status_code == 200, started.text
    page = env.get(started.json()["verification_uri_complete"], user="mallory")
    assert page.status_code == 200, page.text
    assert_secure_page(page)
    assert_no_injected_markup(page.text)
    for text in HOSTILE:
        assert text not in page.text, text
        assert text in unescape(page.text), text  # shown, as text
    # The checkboxes still carry the scope ids, attribute-safe, so the decision works.
    decided = env.decide(
        form_action(page.text), hidden(page.text, "session"), list(HOSTILE_SCOPES), user="mallory"
    )
    assert decided.status_code == 303
    assert set(parse_qs(urlsplit(decided.headers["location"]).query)["scope"][0].split()) == set(
        HOSTILE_SCOPES
    )


def test_the_result_and_error_pages_escape_names_too(env: Env) -> None:
    query = urlencode({"status": "approved", "scope": " ".join(HOSTILE_SCOPES)})
    for url in (env.oauth("acme", "connected") + "?" + query, env.oauth("acme", "connected")):
        page = env.get(url)
        assert page.status_code == 200
        assert_secure_page(page)
        assert_no_injected_markup(page.text)
        assert BRAND_NAME in unescape(page.text)
    # A real decision: the result page names the agent and lists what it can now do.
    sub = new_sub()
    started = env.device_authorization("acme", " ".join(HOSTILE_SCOPES), sub=sub)
    page = env.get(started.json()["verification_uri_complete"], user="mallory")
    decided = env.decide(
        form_action(page.text), hidden(page.text, "session"), list(HOSTILE_SCOPES), user="mallory"
    )
    approved = env.get(decided.headers["location"])
    assert_secure_page(approved)
    assert_no_injected_markup(approved.text)
    for text in (BRAND_NAME, AGENT_NAME, *HOSTILE_SCOPES.values()):
        assert text not in approved.text, text
        assert text in unescape(approved.text), text
    refused = env.get(env.oauth("acme", "consent"), params={"user_code": "<script>x</script>"})
    assert refused.status_code == 400
    assert_secure_page(refused)
    assert_no_injected_markup(refused.text)


def test_the_connected_agents_page_escapes_names_too(env: Env) -> None:
    started = env.device_authorization("acme", " ".join(HOSTILE_SCOPES), sub=new_sub())
    page = env.get(started.json()["verification_uri_complete"], user="mallory")
    env.decide(
        form_action(page.text), hidden(page.text, "session"), list(HOSTILE_SCOPES), user="mallory"
    )
    agents = env.get(env.oauth("acme", "agents"), user="mallory")
    assert agents.status_code == 200
    assert_secure_page(agents)
    assert_no_injected_markup(agents.text)
    for text in (BRAND_NAME, AGENT_NAME, LABEL, *HOSTILE_SCOPES.values()):
        assert text not in agents.text, text
        assert text in unescape(agents.text), text


# -- security headers on every consent response ----------------------------------------------------


def test_every_consent_response_is_a_secure_page_or_has_no_body(env: Env) -> None:
    """Both login modes, every outcome: a response with a body is an unframeable, uncached
    page (an oversized form's 413 too); the others (redirects, 404) carry no body that a frame
    could show."""
    code = env.device_authorization("acme", "orders:read", sub=new_sub()).json()["user_code"]
    sky_code = env.device_authorization("skyline", "orders:read", sub=new_sub()).json()["user_code"]
    acme, sky = env.oauth("acme", "consent"), env.oauth("skyline", "consent")
    form = {"content-type": "application/x-www-form-urlencoded"}
    requests: dict[str, tuple[str, str, dict[str, Any]]] = {
        "code entry": ("GET", acme, {}),
        "invalid code": ("GET", acme, {"params": {"user_code": "AEIO-UAEI"}}),
        "unknown code": ("GET", acme, {"params": {"user_code": "BCDF-GHJK"}, "user": "alice"}),
        "consent": ("GET", acme, {"params": {"user_code": code}, "user": "alice"}),
        "signed out": ("GET", acme, {"params": {"user_code": code}}),
        "same-app POST": ("POST", acme, {"data": {"assertion": "x"}, "user": "alice"}),
        "no session": ("POST", acme + "/decision", {"data": {"decision": "allow"}}),
        "cross-origin": (
            "POST",
            acme + "/decision",
            {"data": {"session": "x"}, "headers": {"origin": "https://evil.example"}},
        ),
        "oversized decision": (
            "POST",
            acme + "/decision",
            {"content": b"session=" + b"A" * 70_000, "headers": form, "unread": True},
        ),
        "oversized consent POST": (
            "POST",
            sky,
            {"content": b"a=" + b"A" * 70_000, "headers": form, "unread": True},
        ),
        "result": ("GET", env.oauth("acme", "connected"), {"params": {"status": "denied"}}),
        "brand: to login": ("GET", sky, {"params": {"user_code": sky_code}}),
        "brand: code entry": ("GET", sky, {}),
        "brand: bad assertion": ("POST", sky, {"data": {"assertion": "not-a-jwt"}}),
        "brand: foreign assertion": (
            "POST",
            sky,
            {"data": {"assertion": brand_assertion(env, sky_code, key=generate_private_jwk())}},
        ),
        "brand: expired assertion": (
            "POST",
            sky,
            {"data": {"assertion": brand_assertion(env, sky_code, now=time.time() - 400)}},
        ),
        "brand: consent": ("POST", sky, {"data": {"assertion": brand_assertion(env, sky_code)}}),
        "brand: decision": ("POST", sky + "/decision", {"data": {"session": "x"}}),
        "unknown brand": ("GET", env.oauth("nobody", "consent"), {}),
    }
    statuses = {}
    for name, (method, url, options) in requests.items():
        options = dict(options)
        headers = {**Env.cookie(options.pop("user", None)), **options.pop("headers", {})}
        if options.pop("unread", False):  # refused from its length: a connection of its own
            answer = unread_body_post(env.http, url, headers=headers, **options)
        else:
            answer = env.http.request(method, url, headers=headers, **options)
        statuses[name] = answer.status_code
        assert answer.status_code < 500, (name, answer.status_code)
        if answer.content:
            assert_secure_page(answer)
        else:
            assert answer.status_code in (303, 404), (name, answer.status_code)
            if answer.status_code == 303:
                assert answer.headers["cache-control"] == "no-store"
                assert answer.headers["location"].startswith((LOGIN_URL, BRAND_LOGIN + "?"))
    assert statuses == {
        "code entry": 200,
        "invalid code": 400,
        "unknown code": 400,
        "consent": 200,
        "signed out": 303,
        "same-app POST": 405,
        "no session": 400,
        "cross-origin": 403,
        "oversized decision": 413,
        "oversized consent POST": 413,
        "result": 200,
        "brand: to login": 303,
        "brand: code entry": 200,
        "brand: bad assertion": 401,
        "brand: foreign assertion": 401,
        "brand: expired assertion": 400,
        "brand: consent": 200,
        "brand: decision": 400,
        "unknown brand": 404,
    }


# -- return_to injection in brand mode ----------------------------------------------------------

INJECTIONS = [
    "https://evil.example/",
    "//evil.example/BCDFGHJK",
    "BCDF-GHJK&return_to=https://evil.example",
    "BCDF-GHJK?return_to=https://evil.example",
    "BCDF-GHJK#https://evil.example",
    "BCDF\r\nGHJK",
    "BCDF-GHJK\r\nLocation: https://evil.example",
    "BCDF-GHJK%0d%0aLocation:%20https://evil.example",
    "B C D F G H J K",
    "ＢＣＤＦ-ＧＨＪＫ",  # fullwidth
    "javascript:alert(1)",
]


@pytest.mark.parametrize("typed", INJECTIONS, ids=range(len(INJECTIONS)))
def test_brand_mode_return_to_is_always_the_providers_own_consent_url(env: Env, typed: str) -> None:
    consent = env.oauth("skyline", "consent")
    answer = env.get(consent, params={"user_code": typed, "return_to": "https://evil.example"})
    assert answer.status_code in (303, 400), answer.status_code
    if answer.status_code == 400:
        assert_secure_page(answer)
        return
    location = answer.headers["location"]
    assert "\r" not in location
    assert "\n" not in location
    assert location.startswith(BRAND_LOGIN + "?return_to=")
    (return_to,) = parse_qs(urlsplit(location).query)["return_to"]
    assert return_to == consent + "?user_code=BCDF-GHJK"
    assert "evil" not in location


# -- one kind of token presented as another --------------------------------------------------------


def test_a_consent_session_is_not_a_brand_login_assertion(env: Env) -> None:
    # A session the Provider signed for acme's page (for mallory), posted as skyline's
    # Brand-login assertion: it is verified against the Brand's keys, and refused.
    started = env.device_authorization("acme", "orders:read", sub=new_sub()).json()
    page = env.get(started["verification_uri_complete"], user="mallory")
    session = hidden(page.text, "session")
    sky_code = env.device_authorization("skyline", "orders:read", sub=new_sub()).json()["user_code"]
    answer = env.post(env.oauth("skyline", "consent"), data={"assertion": session})
    assert answer.status_code == 401
    assert_secure_page(answer)
    assert 'name="session"' not in answer.text
    # The code was not touched: a genuine assertion still reaches the consent page.
    genuine = env.post(
        env.oauth("skyline", "consent"), data={"assertion": brand_assertion(env, sky_code)}
    )
    assert genuine.status_code == 200


def test_a_brand_login_assertion_is_not_a_decision_session(env: Env) -> None:
    sub = new_sub()
    started = env.device_authorization("skyline", "orders:read", sub=sub).json()
    assertion = brand_assertion(env, started["user_code"])
    for brand_id in ("skyline", "acme"):
        answer = env.decide(env.oauth(brand_id, "consent/decision"), assertion, ["orders:read"])
        assert answer.status_code == 400
        assert_secure_page(answer)
    assert env.poll("skyline", started["device_code"], sub=sub).json()["error"] == (
        "authorization_pending"
    )


# -- sessions replayed after their decision --------------------------------------------------------


def test_a_session_replayed_after_the_decision_changes_nothing(env: Env) -> None:
    sub = new_sub()
    started, action, session = env.open_consent("acme", "orders:read <b>bold</b>", sub=sub)
    assert env.decide(action, session, ["orders:read"], user="alice").status_code == 303
    # Replayed to widen the grant, and to turn it into a denial.
    widened = env.decide(action, session, ["orders:read", "<b>bold</b>"], user="alice")
    assert widened.status_code == 400
    denied = env.decide(action, session, [], decision="deny", user="alice")
    assert denied.status_code == 400
    tokens = env.poll("acme", started["device_code"], sub=sub).json()
    assert tokens["scope"] == "orders:read"
    # Replayed after the agent collected its tokens: still nothing.
    again = env.decide(action, session, ["orders:read", "<b>bold</b>"], user="alice")
    assert again.status_code == 400
    refreshed = env.refresh("acme", tokens["refresh_token"], sub=sub).json()
    assert refreshed["scope"] == "orders:read"


# -- the decision URL under other methods ----------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_the_decision_url_answers_only_post(env: Env, method: str) -> None:
    sub = new_sub()
    started, action, session = env.open_consent("acme", "orders:read", sub=sub)
    query = urlencode({"session": session, "decision": "allow", "scope": "orders:read"})
    answer = env.http.request(method, f"{action}?{query}", headers=Env.cookie("alice"))
    if method == "OPTIONS":  # what the URL takes (RFC 9110 §9.3.7), and no CORS for a page
        assert answer.status_code == 204
        assert answer.headers["allow"] == "POST, OPTIONS"
        assert "access-control-allow-origin" not in answer.headers
    else:
        assert answer.status_code in (404, 405)
    assert answer.content == b""
    # Nothing was decided: the agent is still waiting, and the page still works.
    assert env.poll("acme", started["device_code"], sub=sub).json()["error"] == (
        "authorization_pending"
    )
    assert env.decide(action, session, ["orders:read"], user="alice").status_code == 303


def test_a_decision_with_the_session_in_the_query_string_is_refused(env: Env) -> None:
    sub = new_sub()
    started, action, session = env.open_consent("acme", "orders:read", sub=sub)
    query = urlencode({"session": session, "decision": "allow", "scope": "orders:read"})
    answer = env.post(f"{action}?{query}", user="alice", data={})
    assert answer.status_code == 400
    assert_secure_page(answer)
    assert env.poll("acme", started["device_code"], sub=sub).json()["error"] == (
        "authorization_pending"
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "connected"), ("PUT", "consent"), ("DELETE", "consent"), ("GET", "token")],
)
def test_other_consent_routes_refuse_other_methods(env: Env, method: str, path: str) -> None:
    answer = env.http.request(method, env.oauth("acme", path), headers=Env.cookie("alice"))
    assert answer.status_code in (404, 405)
    assert answer.content == b""
