"""Brand mode (`login = "brand"`, spec §5.3): the Brand's own login hands over a signed assertion.

A tiny Werkzeug app plays the Brand login: it checks that `return_to` is exactly the
Provider's consent URL, signs the person in and answers with the auto-post form the reference
Brand renders (`action` = consent URL, hidden `assertion` minted by `mint_login_assertion`).
Its JWKS is served by the shared `JwksServer`, fetched by the Provider over real HTTP.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote, urljoin, urlsplit

import httpx
import pytest
from werkzeug.wrappers import Request, Response

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.protocols.delegation import mint_login_assertion
from pactmw.provider.brand import Brand, DelegationConfig
from tests.delegated.support import (
    ANSWERED,
    SCOPES,
    USER_CODE,
    Env,
    assert_answered,
    assert_page_headers,
    bot,
    form_action,
    hidden,
    jws_claims,
    make_tools,
    new_sub,
    serve,
)
from tests.support.clock import OffsetClock
from tests.support.jwks_server import JwksServer
from tests.support.net import free_port
from tests.support.parties import AGENT_NAME
from tests.support.servers import werkzeug_server

ACCOUNTS = {"alex.rivera@example.com": ("skyline", "sky-4471")}


class BrandLogin:
    """The Brand's login: `POST /login` with `return_to`, `email`, `password`."""

    def __init__(self, key: PrivateJWK, consent_url: str) -> None:
        self.key = key
        self.consent_url = consent_url
        self.issuer = ""  # set once the server listens
        self.seen: list[str] = []

    def __call__(self, environ: Any, start_response: Any) -> Any:
        request = Request(environ)
        if request.path != "/login" or request.method != "POST":
            return Response("not found", status=404)(environ, start_response)
        return_to = request.form.get("return_to", "")
        self.seen.append(return_to)
        parts = urlsplit(return_to)
        user_code = parse_qs(parts.query).get("user_code", [""])[0]
        if f"{parts.scheme}://{parts.netloc}{parts.path}" != self.consent_url or not user_code:
            return Response("bad return_to", status=400)(environ, start_response)
        email = request.form.get("email", "")
        password, account = ACCOUNTS.get(email, (None, ""))
        if password is None or request.form.get("password") != password:
            return Response("wrong password", status=401)(environ, start_response)
        assertion = mint_login_assertion(
            key=self.key,
            brand_issuer=self.issuer,
            consent_url=self.consent_url,
            account=account,
            user_code=user_code,
            email=email,
        )
        html = (
            "<!doctype html><html><body>"
            f'<form method="post" action="{escape(self.consent_url)}">'
            f'<input type="hidden" name="assertion" value="{escape(assertion)}">'
            '<button type="submit">Continue</button></form>'
            "<script>document.forms[0].submit()</script></body></html>"
        )
        return Response(html, content_type="text/html; charset=utf-8")(environ, start_response)


class BrandEnv:
    def __init__(self, env: Env, login: BrandLogin, jwks: JwksServer, key: PrivateJWK) -> None:
        self.env = env
        self.login = login
        self.jwks = jwks
        self.key = key

    @property
    def consent_url(self) -> str:
        return self.login.consent_url

    @property
    def issuer(self) -> str:
        return self.login.issuer

    def pending_code(self, sub: str = "u1") -> dict[str, Any]:
        answer = self.env.device_authorization("skyline", "orders:read orders:cancel", sub=sub)
        assert answer.status_code == 200, answer.text
        document: dict[str, Any] = answer.json()
        return document

    def assertion(self, user_code: str, **overrides: Any) -> str:
        arguments: dict[str, Any] = {
            "key": self.key,
            "brand_issuer": self.issuer,
            "consent_url": self.consent_url,
            "account": "sky-4471",
            "user_code": user_code,
            "email": "alex.rivera@example.com",
        }
        arguments.update(overrides)
        return mint_login_assertion(**arguments)

    def post_assertion(self, assertion: str) -> httpx.Response:
        return self.env.http.post(self.consent_url, data={"assertion": assertion})


@pytest.fixture(scope="module")
def brand(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrandEnv]:
    with brand_env(tmp_path_factory) as env:
        yield env


@contextlib.contextmanager
def brand_env(
    tmp_path_factory: pytest.TempPathFactory, clock: Callable[[], float] = time.time
) -> Iterator[BrandEnv]:
    """A brand-mode Provider (on `clock`) with its Brand login and the login's JWKS."""
    key = generate_private_jwk("ES256", kid="brand-1")
    provider_port = free_port()
    consent_url = f"http://127.0.0.1:{provider_port}/a2a/skyline/oauth/consent"
    login = BrandLogin(key, consent_url)
    with JwksServer(keys=public_key_set([key])) as jwks, werkzeug_server(login) as brand_base:
        login.issuer = brand_base
        calls: list[tuple[str, str, dict[str, Any]]] = []
        skyline = Brand(
            id="skyline",
            name="Skyline Air",
            handler=bot,
            delegation=DelegationConfig(
                scopes=SCOPES,
                login_url=brand_base + "/login",
                mode="brand",
                brand_issuer=brand_base,
                brand_jwks_uri=jwks.url,
                tools=make_tools(calls),
                interval=1,
            ),
        )
        store = f"sqlite:///{tmp_path_factory.mktemp('brand')}/pactmw.db"
        with serve(store, [skyline], port=provider_port, calls=calls, clock=clock) as env:
            yield BrandEnv(env, login, jwks, key)


def assert_refused_page(answer: httpx.Response, status: int | tuple[int, ...]) -> None:
    expected = status if isinstance(status, tuple) else (status,)
    assert answer.status_code in expected, (answer.status_code, answer.text)
    assert_page_headers(answer)
    assert 'name="session"' not in answer.text
    assert "<h1>" in answer.text


def test_verification_uris_start_at_the_brand_login(brand: BrandEnv) -> None:
    document = brand.pending_code()
    login = brand.issuer + "/login"
    assert document["verification_uri"] == f"{login}?return_to={quote(brand.consent_url, '')}"
    complete = document["verification_uri_complete"]
    assert "/login?return_to=" in complete
    assert complete.startswith(login + "?return_to=")
    (return_to,) = parse_qs(urlsplit(complete).query)["return_to"]
    assert return_to == f"{brand.consent_url}?user_code={document['user_code']}"
    assert USER_CODE.fullmatch(document["user_code"])


def test_consent_get_sends_the_person_to_the_brand_login(brand: BrandEnv) -> None:
    env = brand.env
    code = brand.pending_code()["user_code"]
    answer = env.http.get(brand.consent_url, params={"user_code": code.lower()})
    assert answer.status_code == 303
    (return_to,) = parse_qs(urlsplit(answer.headers["location"]).query)["return_to"]
    assert answer.headers["location"].startswith(brand.issuer + "/login?return_to=")
    assert return_to == f"{brand.consent_url}?user_code={code}"
    entry = env.http.get(brand.consent_url)
    assert entry.status_code == 200
    assert_page_headers(entry)
    assert 'name="user_code"' in entry.text


def test_brand_login_then_consent_then_decision(brand: BrandEnv) -> None:
    env, sub = brand.env, new_sub()
    document = brand.pending_code(sub)
    complete = document["verification_uri_complete"]
    # What the conformance suite does: POST the login form to the origin's /login.
    (return_to,) = parse_qs(urlsplit(complete).query)["return_to"]
    login = env.http.post(
        urljoin(complete, "/login"),
        data={"return_to": return_to, "email": "alex.rivera@example.com", "password": "skyline"},
    )
    assert login.status_code == 200, login.text
    assert brand.login.seen[-1] == return_to
    action = form_action(login.text)
    assert action == brand.consent_url
    assert "&" not in action
    assertion = hidden(login.text, "assertion")
    assert jws_claims(assertion)["user_code"] == document["user_code"]

    page = env.http.post(action, data={"assertion": assertion})
    assert page.status_code == 200, page.text
    assert_page_headers(page)
    assert "Skyline Air" in page.text
    assert AGENT_NAME in page.text
    assert "https://pa.example" in page.text
    assert "alex.rivera@example.com" in page.text
    for description in SCOPES.values():
        assert description in page.text
    decision_url = form_action(page.text)
    assert decision_url == env.oauth("skyline", "consent/decision")
    session = hidden(page.text, "session")

    # The assertion is single-use.
    replay = brand.post_assertion(assertion)
    assert_refused_page(replay, 400)
    assert "already used" in replay.text

    decided = env.decide(decision_url, session, list(SCOPES))
    assert decided.status_code == 303
    assert re.search(r"/connected\?.*status=approved", decided.headers["location"])
    # Back after the decision posts the spent assertion again: the person sees the answer
    # they gave (no form, nothing decided again), not a sign-in error after it had worked.
    assert_answered(brand.post_assertion(assertion), "Connected")
    # A spent sign-in of another account shows nothing of this person's decision.
    other = brand.assertion(document["user_code"], account="sky-9000", email="sam@example.com")
    assert brand.post_assertion(other).status_code == 400  # first use: the code is not theirs
    reused = brand.post_assertion(other)
    assert_refused_page(reused, 400)
    assert "already used" in reused.text
    assert ANSWERED not in reused.text
    tokens = env.poll("skyline", document["device_code"], sub=sub)
    assert tokens.status_code == 200, tokens.text
    claims = jws_claims(tokens.json()["access_token"])
    assert claims["sub"] == "sky-4471"
    assert set(claims["scope"].split()) == set(SCOPES)
    turn = env.send("skyline", "show my orders", token=tokens.json()["access_token"], sub=sub)
    assert turn.status_code == 200, turn.text
    assert turn.json()["message"]["metadata"]["pact.receipt"]["claims"]["user"] == "sky-4471"


def test_a_spent_sign_in_stays_spent_through_its_last_accepted_instant(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    clock = OffsetClock()
    with brand_env(tmp_path_factory, clock) as brand:
        document = brand.pending_code(new_sub())
        start = float(int(time.time()))
        clock.frozen = start
        # Issued 30 s ahead (the skew allowed) and valid for longer than it may be used: it
        # is accepted until iat + 300 s, start + 330 s, that instant included.
        assertion = brand.assertion(document["user_code"], now=start + 30, lifetime=600)
        assert brand.post_assertion(assertion).status_code == 200
        clock.frozen = start + 330
        replay = brand.post_assertion(assertion)
        assert_refused_page(replay, 400)
        assert "already used" in replay.text


def form_targets(answer: httpx.Response) -> list[str]:
    """The sources of the page's CSP `form-action` directive."""
    for directive in answer.headers["content-security-policy"].split(";"):
        name, _, sources = directive.strip().partition(" ")
        if name == "form-action":
            return sources.split()
    raise AssertionError(answer.headers["content-security-policy"])


def test_the_code_entry_form_may_go_on_to_the_brand_login(brand: BrandEnv) -> None:
    """A code typed at the Provider's code entry page (after a code that did not work, or
    opened directly) is answered with a redirect to the Brand's login, on another origin:
    Chromium applies `form-action` to that redirect, so the login's origin must be allowed
    there, or the form is blocked and the person is stuck on it."""
    env = brand.env
    entry = env.http.get(brand.consent_url)
    assert 'name="user_code"' in entry.text
    assert form_targets(entry) == ["'self'", brand.issuer]
    mistyped = env.http.get(brand.consent_url, params={"user_code": "AEIO-UAEI"})
    assert mistyped.status_code == 400
    assert form_targets(mistyped) == ["'self'", brand.issuer]
    # The consent form posts to the Provider only, and so does nothing else here.
    opened = brand.post_assertion(brand.assertion(brand.pending_code(new_sub())["user_code"]))
    assert hidden(opened.text, "session")
    assert form_targets(opened) == ["'self'"]


def test_the_brand_login_refuses_a_foreign_return_to(brand: BrandEnv) -> None:
    # (A check of the test's Brand login itself: it never signs an assertion for elsewhere.)
    answer = brand.env.http.post(
        brand.issuer + "/login",
        data={
            "return_to": "https://evil.example/a2a/skyline/oauth/consent?user_code=BCDF-GHJK",
            "email": "alex.rivera@example.com",
            "password": "skyline",
        },
    )
    assert answer.status_code == 400


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _forged(claims: dict[str, Any], header: dict[str, Any], signature: bytes = b"") -> str:
    return ".".join(
        (_b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode()), _b64(signature))
    )


def test_refused_assertions_never_500(brand: BrandEnv) -> None:
    document = brand.pending_code()
    code = document["user_code"]
    now = time.time()
    attacker = generate_private_jwk("ES256", kid="brand-1")  # the Brand's kid, not its key
    good = jws_claims(brand.assertion(code))
    cases: dict[str, tuple[str, int | tuple[int, ...]]] = {
        "older than 5 minutes": (brand.assertion(code, now=now - 301, lifetime=600), 400),
        "expired": (brand.assertion(code, now=now - 200, lifetime=120), 400),
        "issued in the future": (brand.assertion(code, now=now + 600), 400),
        "wrong aud (decision URL)": (
            brand.assertion(code, consent_url=brand.consent_url + "/decision"),
            401,
        ),
        "wrong aud (other Brand)": (
            brand.assertion(code, consent_url=brand.consent_url.replace("skyline", "other")),
            401,
        ),
        "wrong iss": (brand.assertion(code, brand_issuer="https://evil.example"), 401),
        "bad signature": (brand.assertion(code, key=attacker), 401),
        "unknown kid": (brand.assertion(code, key=generate_private_jwk("ES256", kid="k9")), 401),
        "tampered sub": (
            ".".join(
                (
                    brand.assertion(code).split(".")[0],
                    _b64(json.dumps({**good, "sub": "admin", "jti": "t1"}).encode()),
                    brand.assertion(code).split(".")[2],
                )
            ),
            401,
        ),
        "alg none": (_forged({**good, "jti": "n1"}, {"alg": "none", "typ": "JWT"}), 401),
        "HS256": (_forged({**good, "jti": "h1"}, {"alg": "HS256"}, b"x" * 32), 401),
        "EdDSA": (
            sign_compact({**good, "jti": "e1"}, generate_private_jwk("EdDSA", kid="brand-1")),
            401,
        ),
        "no jti": (sign_compact({k: v for k, v in good.items() if k != "jti"}, brand.key), 401),
        "no sub": (
            sign_compact({k: v for k, v in good.items() if k != "sub"} | {"jti": "s1"}, brand.key),
            401,
        ),
        "string iat": (sign_compact({**good, "jti": "i1", "iat": str(now)}, brand.key), 401),
        "garbage": ("not-a-jwt", 401),
        "empty": ("", 401),
        "unknown user code": (brand.assertion("BCDF-GHJK"), 400),
        "unreadable user code": (brand.assertion("hello!"), 400),
    }
    for name, (assertion, status) in cases.items():
        answer = brand.post_assertion(assertion)
        assert answer.status_code != 500, name
        assert_refused_page(answer, status)
    # Two assertions, a missing field, a non-UTF-8 body: refused pages too.
    for body in (
        f"assertion={brand.assertion(code)}&assertion={brand.assertion(code)}".encode(),
        b"",
        b"other=1",
        b"assertion=\xff\xfe",
    ):
        answer = brand.env.http.post(
            brand.consent_url,
            content=body,
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert_refused_page(answer, (400, 401))
    # None of it consumed the code: a good assertion still reaches the consent page.
    answer = brand.post_assertion(brand.assertion(code))
    assert answer.status_code == 200, answer.text
    assert hidden(answer.text, "session")


def test_jwks_outage_refuses_without_500(brand: BrandEnv) -> None:
    code = brand.pending_code()["user_code"]
    rotated = generate_private_jwk("ES256", kid="brand-rotated")
    brand.jwks.mode = "fail"
    try:
        answer = brand.post_assertion(brand.assertion(code, key=rotated))
    finally:
        brand.jwks.mode = "ok"
    assert_refused_page(answer, 401)


# -- Post/Redirect/Get: a browser's sign-in lands on a GET page --------------------------------

#: What a browser sends with a form's navigation (Fetch Metadata): a scripted client does not.
NAVIGATION = {"sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}


def signed_in_cookie(answer: httpx.Response) -> tuple[str, list[str]]:
    """The sign-in cookie a 303 sets: its `name=value` and its attributes, lower case."""
    (set_cookie,) = answer.headers.get_list("set-cookie")
    pair, *attributes = (part.strip() for part in set_cookie.split(";"))
    return pair, [attribute.lower() for attribute in attributes]


def test_a_browsers_sign_in_is_redirected_to_the_consent_page(brand: BrandEnv) -> None:
    """The sign-in POST answered the consent page itself: Back from the result page then
    showed Chromium's "Confirm Form Resubmission" (a POST's page, not cached). A browser's
    navigation is answered 303 to the page's GET, which a short-lived cookie signs in (the
    assertion is single-use); Back and Reload GET it again."""
    code = brand.pending_code(new_sub())["user_code"]
    posted = httpx.post(
        brand.consent_url, data={"assertion": brand.assertion(code)}, headers=NAVIGATION
    )
    assert posted.status_code == 303, posted.text
    assert posted.headers["location"] == f"{brand.consent_url}?user_code={code}"
    assert posted.headers["cache-control"] == "no-store"
    cookie, attributes = signed_in_cookie(posted)
    path = urlsplit(brand.consent_url).path
    assert {"httponly", "samesite=lax", f"path={path}", "max-age=600"} <= set(attributes)
    assert "secure" not in attributes  # an http:// base URL; https gets Secure
    assert code not in cookie  # a signed token, never shown

    shown = httpx.get(posted.headers["location"], headers={"cookie": cookie})
    assert shown.status_code == 200, shown.text
    assert_page_headers(shown)
    assert "alex.rivera@example.com" in shown.text
    session = hidden(shown.text, "session")
    # Reload: the same page again, nothing spent.
    again = httpx.get(posted.headers["location"], headers={"cookie": cookie})
    assert hidden(again.text, "session")

    # The cookie names one code: another code, or none, goes to the Brand's login.
    other = brand.pending_code(new_sub())["user_code"]
    for url in (f"{brand.consent_url}?user_code={other}", posted.headers["location"]):
        cookies = {"cookie": cookie} if other in url else {}
        elsewhere = httpx.get(url, headers=cookies)
        assert elsewhere.status_code == 303, url
        assert elsewhere.headers["location"].startswith(brand.issuer + "/login?")
    forged = httpx.get(posted.headers["location"], headers={"cookie": cookie[:-4] + "AAAA"})
    assert forged.status_code == 303
    assert forged.headers["location"].startswith(brand.issuer + "/login?")

    # After the decision, Back (the GET again) shows the answer given, not the form.
    decided = brand.env.decide(form_action(shown.text), session, ["orders:read"])
    assert decided.status_code == 303
    assert_answered(httpx.get(posted.headers["location"], headers={"cookie": cookie}), "Connected")


def test_a_scripted_sign_in_still_gets_the_consent_page(brand: BrandEnv) -> None:
    """PACT's delegated suite POSTs the assertion and reads the consent form from the answer
    (200, pact-provider.md §5.3): a client that is not a browser's navigation gets the page,
    and no cookie."""
    code = brand.pending_code(new_sub())["user_code"]
    for headers in ({}, {"sec-fetch-mode": "cors", "sec-fetch-dest": "empty"}):
        answer = httpx.post(
            brand.consent_url, data={"assertion": brand.assertion(code)}, headers=headers
        )
        assert answer.status_code == 200, answer.text
        assert hidden(answer.text, "session")
        assert "set-cookie" not in answer.headers
