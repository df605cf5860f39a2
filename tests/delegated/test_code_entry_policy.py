"""The code entry page's `form-action`: its form may go on to the login, wherever that is.

The form GETs the consent page, which redirects a signed-out person to the configured login;
browsers apply `form-action` to that redirect too, so the login's origin must be named when
it is not the Provider's own (brand mode, or a host app signing people in elsewhere).
"""

from __future__ import annotations

import pytest

from pactmw.provider.delegated._context import serialized_origin
from pactmw.provider.delegated._responses import PAGE_HEADERS, code_entry_page
from tests.delegated.support import delegated_brand

CSP = "Content-Security-Policy"
OWN = "https://provider.example"


def form_action(login_url: str) -> str:
    brand = delegated_brand("acme", "Acme", [], login_url=login_url)
    assert brand.delegation is not None
    answer = code_entry_page(brand.delegation, OWN, "<p>code</p>", 400)
    assert answer.status == 400
    policy = dict(answer.headers)[CSP]
    (directive,) = [d.strip() for d in policy.split(";") if d.strip().startswith("form-action")]
    # Nothing else of the page's headers changes.
    assert policy == dict(PAGE_HEADERS)[CSP].replace("form-action 'self'", directive)
    others = [(k, v) for k, v in answer.headers if k != CSP]
    assert others[: len(PAGE_HEADERS) - 1] == [h for h in PAGE_HEADERS if h[0] != CSP]
    return directive


@pytest.mark.parametrize(
    ("login_url", "sources"),
    [
        ("/login", "'self'"),
        ("/account/login?from=pact", "'self'"),
        (OWN + "/login", "'self'"),
        ("https://login.acme.example/signin?x=1", "'self' https://login.acme.example"),
        ("http://127.0.0.1:8001/login", "'self' http://127.0.0.1:8001"),
        ("//sso.acme.example/login", "'self' https://sso.acme.example"),
        ("https://user:pw@sso.acme.example/login", "'self' https://sso.acme.example"),
        ("https://[::1]:8443/login", "'self' https://[::1]:8443"),
        # Origins as a browser writes them: the same origin however the URL spells it.
        ("https://PROVIDER.example:443/login", "'self'"),
        ("HTTPS://Login.Acme.Example:443/signin", "'self' https://login.acme.example"),
        ("https://bücher.example/login", "'self' https://xn--bcher-kva.example"),
    ],
)
def test_the_form_may_go_to_the_login_and_nowhere_else(login_url: str, sources: str) -> None:
    assert form_action(login_url) == f"form-action {sources}"


def test_a_login_url_a_policy_cannot_name_adds_nothing() -> None:
    # A `;` would end the directive and start another, whatever it says.
    assert form_action("https://a.example;script-src */login") == "form-action 'self'"


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://shop.example/a2a", "https://shop.example"),
        ("https://Shop.Example:443", "https://shop.example"),
        ("http://shop.example:80/x", "http://shop.example"),
        ("http://shop.example:8080/x", "http://shop.example:8080"),
        ("HTTP://LocalHost:8000", "http://localhost:8000"),
        ("https://user:pw@shop.example/", "https://shop.example"),
        ("https://[::1]:443/", "https://[::1]"),
        ("https://bücher.example", "https://xn--bcher-kva.example"),
    ],
)
def test_an_origin_is_serialized_as_a_browser_sends_it(url: str, origin: str) -> None:
    assert serialized_origin(url) == origin
