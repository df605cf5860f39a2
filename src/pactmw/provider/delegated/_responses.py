"""The HTTP answers of the authorization server: JSON documents, consent pages, redirects."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from pactmw.core.encoding import json_dumps
from pactmw.core.http import Response
from pactmw.provider.brand import DelegationConfig

NO_STORE = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))
#: Public documents (metadata, JWKS): any origin may read them, caches may keep them briefly.
PUBLIC_DOCUMENT = (("Access-Control-Allow-Origin", "*"), ("Cache-Control", "public, max-age=300"))
#: Headers of every consent page: never framed, cached, or leaking its URL (it holds a code).
PAGE_HEADERS = (
    ("Content-Type", "text/html; charset=utf-8"),
    ("X-Frame-Options", "DENY"),
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'",
    ),
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
    data = json_dumps(body)
    return Response(
        status=status,
        headers=(("Content-Type", "application/json"), ("Content-Length", str(len(data))), *extra),
        body=data,
    )


def page(html: str, status: int = 200, extra: tuple[tuple[str, str], ...] = ()) -> Response:
    body = html.encode("utf-8")
    headers = (*PAGE_HEADERS, *extra, ("Content-Length", str(len(body))))
    return Response(status=status, headers=headers, body=body)


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
    "json_response",
    "login_redirect",
    "page",
    "redirect",
    "with_query",
]
