"""`error_response` renders every error of the family, byte for byte as the protocols say."""

from __future__ import annotations

import json
import logging

import pytest

from pactmw.core.errors import (
    A2AError,
    AuthenticationFailed,
    InsufficientScope,
    PactmwError,
    RequestRefused,
)
from pactmw.core.http import Response
from pactmw.protocols.delegation import DelegationRejected
from pactmw.provider import ConsentPages
from pactmw.provider.delegated import ConsentRefused, OAuthError
from pactmw.provider.delegated._responses import PAGE_HEADERS
from pactmw.provider.errors import error_response
from pactmw.provider.guard import refusal_response
from pactmw.store.base import StoreUnavailable

EMPTY_401 = (
    ("WWW-Authenticate", 'Bearer realm="a2a"'),
    ("Content-Length", "0"),
    ("Cache-Control", "no-store"),
)


def test_oauth_error_is_its_json_body_not_cached() -> None:
    response = error_response(OAuthError("slow_down", "Poll less often"))
    body = b'{"error":"slow_down","error_description":"Poll less often"}'
    assert response == Response(
        400,
        (
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("Pragma", "no-cache"),
        ),
        body,
    )
    assert error_response(OAuthError("invalid_client", "x", 401)).status == 401


class Pages(ConsentPages):
    # Written before the error pages had links (the Provider still renders it, without them).
    def error(self, title: str, message: str) -> str:  # type: ignore[override]
        return f"<p>{title}|{message}</p>"


def test_consent_refusal_is_an_html_page_of_the_brand() -> None:
    response = error_response(ConsentRefused("No <such> code.", 410), pages=Pages())
    body = b"<p>That did not work|No <such> code.</p>"
    assert response == Response(410, (*PAGE_HEADERS, ("Content-Length", str(len(body)))), body)


def test_consent_refusal_without_pages_uses_the_default_pages() -> None:
    response = error_response(ConsentRefused("Expired.", 400))
    assert response.body == ConsentPages().error("That did not work", "Expired.").encode()
    assert response.headers[: len(PAGE_HEADERS)] == PAGE_HEADERS


def test_a_consent_refusal_links_on_to_the_page_given() -> None:
    entry = error_response(ConsentRefused("Expired.", 400), code_entry_url="https://s.example/c")
    assert b'<p>Expired.</p>\n<p><a href="https://s.example/c">Enter a code</a></p>' in entry.body
    agents = error_response(ConsentRefused("Expired.", 400), manage_url="https://s.example/a?x&y")
    assert b'<a href="https://s.example/a?x&amp;y">Go to your connected agents page</a>' in (
        agents.body
    )
    assert b"<a " not in error_response(ConsentRefused("Expired.", 400)).body


def test_an_error_override_without_the_links_still_renders_its_page() -> None:
    """A Brand's `error(self, title, message)`, written before the error pages had links."""
    response = error_response(
        ConsentRefused("Gone.", 400), pages=Pages(), code_entry_url="https://s.example/c"
    )
    assert response.body == b"<p>That did not work|Gone.</p>"

    class Linked(ConsentPages):
        def error(self, title: str, message: str, **links: str | None) -> str:
            return f"<p>{message}|{sorted(links.items())}</p>"

    linked = error_response(ConsentRefused("Gone.", 400), pages=Linked(), manage_url="/a")
    assert linked.body == b"<p>Gone.|[('manage_url', '/a')]</p>"


def test_refused_credentials_are_a_challenge_with_no_body() -> None:
    assert error_response(AuthenticationFailed("expired")) == Response(401, EMPTY_401)
    delegation = error_response(DelegationRejected("expired", "old"))
    assert delegation.status == 401
    assert delegation.headers[0] == (
        "WWW-Authenticate",
        'Bearer realm="a2a", error="invalid_token"',
    )
    assert delegation.body == b""


def test_missing_scopes_are_403_naming_them() -> None:
    assert error_response(InsufficientScope(("orders:read", "orders:write"))) == Response(
        403,
        (
            (
                "WWW-Authenticate",
                'Bearer realm="a2a", error="insufficient_scope", scope="orders:read orders:write"',
            ),
            ("Content-Length", "0"),
            ("Cache-Control", "no-store"),
        ),
    )


def test_a2a_error_is_the_aip193_envelope() -> None:
    response = error_response(A2AError("TASK_NOT_FOUND", "Task not found: t-1"))
    assert response.status == 404
    assert response.headers == (
        ("Content-Type", "application/a2a+json"),
        ("Content-Length", str(len(response.body))),
    )
    assert json.loads(response.body) == {
        "error": {
            "code": 404,
            "status": "NOT_FOUND",
            "message": "Task not found: t-1",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                }
            ],
        }
    }


def test_refused_request_is_a_bare_status() -> None:
    refused = RequestRefused(429, (("Retry-After", "3"),))
    assert error_response(refused) == Response(429, (("Content-Length", "0"), ("Retry-After", "3")))


def test_unavailable_store_is_503_retry_soon(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="pactmw.provider"):
        response = error_response(StoreUnavailable("down"))
    assert response == Response(503, (("Content-Length", "0"), ("Retry-After", "1")))
    assert [r.getMessage() for r in caplog.records] == ["store unavailable: down"]


@pytest.mark.parametrize("exc", [RuntimeError("bug"), PactmwError("not an answer")])
def test_anything_else_is_an_internal_error_logged_with_its_traceback(
    exc: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="pactmw.provider"):
        response = error_response(exc)
    assert response.status == 500
    assert json.loads(response.body)["error"]["details"][0]["reason"] == "INTERNAL"
    assert caplog.records[-1].exc_info is not None
    assert caplog.records[-1].exc_info[1] is exc


def test_the_guard_renders_its_refusals_the_same_way() -> None:
    for exc in (AuthenticationFailed("missing_token"), InsufficientScope(("a",))):
        assert refusal_response(exc) == error_response(exc)
    with pytest.raises(TypeError, match="not a refusal: A2AError"):
        refusal_response(A2AError("INTERNAL", "x"))
