"""The HTTP answers of the authorization server: JSON documents, consent pages, redirects."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from pactmw.core.encoding import json_dumps
from pactmw.core.http import Response
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated._context import serialized_origin

NO_STORE = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))
#: Public documents (metadata, JWKS): any origin may read them, caches may keep them briefly.
PUBLIC_DOCUMENT = (("Access-Control-Allow-Origin", "*"), ("Cache-Control", "public, max-age=300"))
#: An origin a CSP source may name (IPv6 in brackets).
_ORIGIN = re.compile(r"https?://([a-z0-9.-]+|\[[0-9a-f:.]+\])(:[0-9]+)?")


def _policy(form_action: str) -> str:
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; form-action {form_action}; "
        "frame-ancestors 'none'; base-uri 'none'"
    )


#: Headers of every consent page: never framed, cached, or leaking its URL (it holds a code).
PAGE_HEADERS = (
    ("Content-Type", "text/html; charset=utf-8"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", _policy("'self'")),
    ("Cache-Control", "no-store"),
    # same-origin, not no-referrer: under no-referrer browsers send `Origin: null` on the
    # consent form's POST (Fetch spec), which the decision's Origin check must refuse. The
    # URL, which holds the user code, still never reaches another origin.
    ("Referrer-Policy", "same-origin"),
    ("X-Content-Type-Options", "nosniff"),
)


def json_response(
    body: Any, *, status: int = 200, extra: tuple[tuple[str, str], ...] = ()
) -> Response:
    return json_bytes_response(json_dumps(body), status=status, extra=extra)


def json_bytes_response(
    data: bytes, *, status: int = 200, extra: tuple[tuple[str, str], ...] = ()
) -> Response:
    """`json_response` of a document already serialized (a stored answer, sent byte for
    byte)."""
    return Response(
        status=status,
        headers=(("Content-Type", "application/json"), ("Content-Length", str(len(data))), *extra),
        body=data,
    )


def page(
    html: str,
    status: int = 200,
    extra: tuple[tuple[str, str], ...] = (),
    *,
    form_action: str = "'self'",
) -> Response:
    """A person-facing page with `PAGE_HEADERS`; `form_action` widens where its forms (and
    the redirects that answer them) may go."""
    body = html.encode("utf-8")
    base: tuple[tuple[str, str], ...] = PAGE_HEADERS
    if form_action != "'self'":
        policy = ("Content-Security-Policy", _policy(form_action))
        base = tuple(policy if name == policy[0] else (name, v) for name, v in PAGE_HEADERS)
    headers = (*base, *extra, ("Content-Length", str(len(body))))
    return Response(status=status, headers=headers, body=body)


def code_entry_page(
    config: DelegationConfig, own_origin: str, html: str, status: int = 200
) -> Response:
    """The code entry page: `page`, whose form may also lead to the login.

    Its form GETs the consent page, which sends a signed-out person (brand mode: everyone)
    on to `config.login_url` with a redirect. Browsers apply `form-action` to the redirects
    of a form submission too (Chromium blocks them), so a login on another origin than
    `own_origin` (serialized; the Brand's own login, in brand mode) is allowed there, that
    origin only.
    """
    login = urlsplit(config.login_url)
    if not login.netloc:  # a path on this origin
        return page(html, status)
    scheme = login.scheme or urlsplit(own_origin).scheme  # "//host/login": the page's
    target = serialized_origin(urlunsplit((scheme, *login[1:])))
    if target == own_origin or not _ORIGIN.fullmatch(target):
        # The page's own origin, or nothing a policy can name (no `;` may end the directive).
        return page(html, status)
    return page(html, status, form_action=f"'self' {target}")


def redirect(location: str) -> Response:
    return Response(
        status=303,
        headers=(("Location", location), ("Content-Length", "0"), ("Cache-Control", "no-store")),
    )


def login_redirect(config: DelegationConfig, here: str) -> Response:
    """Off to the Brand's login, which sends the person back to `here`: with an assertion
    POSTed to `return_to` (brand mode), or signed in to the host app at `next` (same-app)."""
    key = "return_to" if config.mode == "brand" else "next"
    return redirect(with_query(config.login_url, {key: here}))


def with_query(url: str, params: dict[str, str]) -> str:
    """`url` with `params` added to its query (a configured login URL may already have one)."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}{urlencode(params)}"


__all__ = [
    "NO_STORE",
    "PAGE_HEADERS",
    "PUBLIC_DOCUMENT",
    "code_entry_page",
    "json_bytes_response",
    "json_response",
    "login_redirect",
    "page",
    "redirect",
    "with_query",
]
