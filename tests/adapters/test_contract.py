"""The adapter contract: the same cases against every adapter, over real servers.

Starlette and FastAPI on uvicorn, plain WSGI and Flask on Werkzeug, Django under runserver
and under uvicorn (`contract_harness.SERVERS`), all built from one settings dict and with the
same routes (`contract_apps`). A rule that holds on one adapter holds on all of them, as the
store contract suite proves for stores. Identity edge cases (keys, rotation, clocks, attack
tokens) run on the same adapters in `test_identity_over_http.py`.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pactmw.protocols.delegation import mint_access_token
from pactmw.protocols.identity import actor_id_for
from pactmw.protocols.parafe import EXTENSION_URI
from pactmw.provider.delegated import FORM_LIMIT
from tests.adapters.contract_apps import APP_UNDER_BRAND, APP_UNDER_MOUNT, WELL_KNOWN
from tests.adapters.contract_harness import (
    BASE_URL,
    POPPY,
    PROVIDER_ONLY,
    SERVERS,
    Harness,
    Target,
    harness,
)
from tests.adapters.support import INVALID_TOKEN, assert_refused
from tests.adapters.tokens import AgentKey, claims
from tests.parafe_integration.support import a2a_message
from tests.support.net import unread_body_post
from tests.support.parties import ISSUER

pytestmark = pytest.mark.timeout(120)

ACTOR = actor_id_for(ISSUER, "user-42")
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("contract")) as started:
        yield started


@pytest.fixture(params=list(SERVERS))
def target(request: pytest.FixtureRequest, servers: Harness) -> Target:
    return servers.get(request.param)


def assert_caller(response: httpx.Response, **expected: Any) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text[:300])
    body: dict[str, Any] = response.json()
    assert body["actor_id"] == expected.get("actor_id", ACTOR)
    # Where the framework's guide says to read the caller (`request.user`,
    # `request.auth.scopes`, `environ["pactmw.personal_agent"]`), it is the same caller.
    assert body.get("named", body["actor_id"]) == body["actor_id"], body
    assert body.get("granted", body["scopes"]) == body["scopes"], body
    for key, value in expected.items():
        assert body[key] == value, (key, body)
    return body


def protected(target: Target) -> list[str]:
    return ["/api/echo", *(f"/decorated-{v}" for v in target.variants)]


# -- identity ----------------------------------------------------------------------------------


def test_no_token_is_the_challenge_everywhere_protected(target: Target) -> None:
    for path in protected(target):
        assert_refused(target.client.get(path))


def test_public_routes_need_nothing(target: Target) -> None:
    assert_caller(target.client.get("/public"), actor_id=None)
    # A token sent to a public route is not looked at (and not attached).
    assert_caller(target.client.get("/public", headers=target.headers("garbage")), actor_id=None)


def test_the_prefix_ends_at_a_path_segment(target: Target) -> None:
    # Reported: `path_prefix="/api"` guarded `/apiary` too (a 401 on a route outside it).
    assert_caller(target.client.get("/apiary"), actor_id=None)
    assert_refused(target.client.get("/api/echo"))


def test_a_good_token_reaches_every_protected_route(target: Target) -> None:
    headers = target.headers(target.token())
    for path in protected(target):
        assert_caller(target.client.get(path, headers=headers), account=None, scopes=[])
    posted = target.client.post("/api/echo", content=b"{}", headers=headers)
    assert_caller(posted)


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"iat": 1_000_000_000, "exp": 1_000_000_100}, id="expired"),
        pytest.param({"aud": "https://someone-else.example/a2a"}, id="bad-audience"),
        pytest.param({"iss": "https://unknown-pa.example"}, id="unknown-issuer"),
    ],
)
def test_bad_tokens_are_refused_everywhere(target: Target, overrides: dict[str, Any]) -> None:
    headers = target.headers(target.token(**overrides))
    for path in protected(target):
        assert_refused(target.client.get(path, headers=headers))


def test_a_refused_request_is_answered_before_the_body_is_parsed(target: Target) -> None:
    # A body that is not JSON would be a 400 from the endpoint: 401 proves the guard ran first.
    assert_refused(target.client.post("/api/echo", content=b"not json"))


def test_repeated_authorization_is_missing(target: Target) -> None:
    token = target.token()
    headers = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    for path in protected(target):
        assert_refused(target.client.get(path, headers=headers))


# -- optional ------------------------------------------------------------------------------------


def test_optional_routes_take_anonymous_and_verified_callers(target: Target) -> None:
    assert_caller(target.client.get("/optional"), actor_id=None)
    assert_caller(target.client.get("/optional", headers=target.headers(target.token())))
    # A credential that is sent is checked: a bad token is never taken for no token.
    expired = target.token(iat=1_000_000_000, exp=1_000_000_100)
    assert_refused(target.client.get("/optional", headers=target.headers(expired)))


def test_optional_routes_take_a_credential_that_is_no_personal_agents_as_none(
    target: Target,
) -> None:
    # The app's other schemes (Basic, an API token, another issuer's JWT) are no personal
    # agent: anonymous, as under PersonalAgentBackend; a personal agent's bad token is not.
    stranger = AgentKey.generate("ES256", "stranger")
    for authorization in (
        "Basic dXNlcjpwYXNz",
        "Bearer an-opaque-api-token",
        f"Bearer {stranger.sign(claims('https://another-idp.example'))}",
    ):
        answer = target.client.get("/optional", headers={"Authorization": authorization})
        assert_caller(answer, actor_id=None)
        # A delegation is bound to a personal agent's identity: it is no anonymous request.
        with_delegation = {"Authorization": authorization, "X-A2A-User-Delegation": "x.y.z"}
        assert_refused(target.client.get("/optional", headers=with_delegation))
    wrong_audience = target.token(aud="https://elsewhere.example/a2a")
    assert_refused(target.client.get("/optional", headers=target.headers(wrong_audience)))
    # A repeated Authorization is missing (a WSGI server joins the repeats: the same answer).
    token = target.token()
    repeated = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    assert_caller(target.client.get("/optional", headers=repeated), actor_id=None)
    repeated_with_delegation = [*repeated, ("X-A2A-User-Delegation", "x.y.z")]
    assert_refused(target.client.get("/optional", headers=repeated_with_delegation))


# -- delegation ----------------------------------------------------------------------------------


def test_a_good_delegation_reaches_scoped_routes(target: Target) -> None:
    delegation, account = target.delegation("orders:read")
    headers = target.headers(target.token(), delegation)
    for variant in target.variants:
        response = target.client.get(f"/api/scoped-{variant}", headers=headers)
        assert_caller(response, account=account, scopes=["orders:read"], via=variant)


def test_decorators_verify_a_delegation_as_the_middleware_does(target: Target) -> None:
    delegation, account = target.delegation("orders:read")
    good = target.headers(target.token(), delegation)
    bad = target.headers(target.token(), "not-a-delegation-token")
    for path in protected(target):
        assert_caller(target.client.get(path, headers=good), account=account)
        assert_refused(target.client.get(path, headers=bad), INVALID_TOKEN)


def test_no_delegation_on_a_scoped_route_is_invalid_token(target: Target) -> None:
    headers = target.headers(target.token())
    for variant in target.variants:
        assert_refused(target.client.get(f"/api/scoped-{variant}", headers=headers), INVALID_TOKEN)


def test_a_delegation_without_the_scope_is_insufficient_scope(target: Target) -> None:
    delegation, _ = target.delegation("orders:cancel")
    headers = target.headers(target.token(), delegation)
    for variant in target.variants:
        response = target.client.get(f"/api/scoped-{variant}", headers=headers)
        assert response.status_code == 403, response.text[:300]
        assert response.headers.get_list("www-authenticate") == [
            'Bearer realm="a2a", error="insufficient_scope", scope="orders:read"'
        ]
        assert response.content == b""


def test_a_repeated_delegation_header_is_a_malformed_token(target: Target) -> None:
    delegation, _ = target.delegation("orders:read")
    headers = [
        ("Authorization", f"Bearer {target.token()}"),
        ("X-A2A-User-Delegation", delegation),
        ("X-A2A-User-Delegation", delegation),
    ]
    assert_refused(target.client.get("/api/scoped-sync", headers=headers), INVALID_TOKEN)


def test_a_delegation_for_another_sub_is_refused(target: Target) -> None:
    delegation, _ = target.delegation("orders:read", sub="someone-else")
    headers = target.headers(target.token(), delegation)
    assert_refused(target.client.get("/api/echo", headers=headers), INVALID_TOKEN)


# -- Parafé endpoints ------------------------------------------------------------------------------


def _receipts(response: httpx.Response) -> list[str]:
    body = response.json()
    receipts: list[str] = body["message"]["metadata"][EXTENSION_URI]["action_receipts"]
    return receipts


def test_a_parafe_endpoint_with_consent_runs_and_gets_a_receipt(target: Target) -> None:
    for variant in target.variants:
        message = target.parafe.presenter().attach(a2a_message(f"lamp-{variant}"))
        response = target.client.post(f"/parafe-{variant}", json={"message": message})
        assert response.status_code == 200, response.text[:500]
        assert response.json()["message"]["parts"][0]["text"] in (f"lamp-{variant}", variant)
        (receipt,) = _receipts(response)
        assert receipt.count(".") == 2
        assert int(response.headers["content-length"]) == len(response.content)
        # The same proof again is a replay: refused, with a refusal receipt.
        again = target.client.post(f"/parafe-{variant}", json={"message": message})
        assert again.status_code == 403
        data = again.json()["message"]["metadata"][EXTENSION_URI]
        assert data["error"]["code"] == "INVALID_PROOF"


def test_a_parafe_endpoint_without_consent_is_refused(target: Target) -> None:
    # The reference's code for a message without Parafé data, whatever the body; the message
    # says what is wrong with a body that holds no A2A message at all.
    cases = {
        b"": "No Parafe consent token found: the request body is empty",
        b"not json": "No Parafe consent token found: the request body is not JSON",
        b"[1, 2]": "No Parafe consent token found: the request body is not a JSON object",
        b'{"message": {"messageId": "m", "parts": []}}': (
            "No Parafe consent token found in the message."
        ),
    }
    for variant in target.variants:
        for body, said in cases.items():
            response = target.client.post(
                f"/parafe-{variant}", content=body, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 403, (variant, body, response.text[:300])
            error = response.json()["message"]["metadata"][EXTENSION_URI]["error"]
            assert error["code"] == "MISSING_PARAFE_EXTENSION", (variant, body)
            assert error["message"].startswith(said), (variant, body, error)


def _declared_only(target: Target, path: str, length: int) -> bytes:
    """POST headers declaring `length` bytes and send none: a server that answers from the
    declared length alone answers at once (no upload to race its closing connection)."""
    url = httpx.URL(str(target.client.base_url))
    with socket.create_connection((url.host, url.port or 80), timeout=20) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {url.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(head.encode("ascii"))
        return sock.recv(65536)


def test_a_parafe_endpoint_stops_reading_at_the_cap(target: Target) -> None:
    for variant in target.variants:
        path = f"/parafe-{variant}"
        if target.name == "django-asgi":
            # Django's ASGI handler buffers the whole body before any code of ours runs.
            declared = target.client.post(path, content=b"x" * (MIB + 1))
            assert declared.status_code == 413, declared.text[:300]
            assert declared.content == b""
        else:
            answer = _declared_only(target, path, MIB + 1)
            assert answer.startswith(b"HTTP/1.1 413 ") or answer.startswith(b"HTTP/1.0 413 "), (
                answer[:200]
            )
        if target.name == "django-wsgi":
            # Django under WSGI cannot read a body without a length at all: it asks for one
            # (a small body, so the answer does not race a large upload; see README).
            chunked = unread_body_post(target.client, path, content=iter([b'{"message"', b": {}}"]))
            assert chunked.status_code == 411, chunked.text[:300]
            continue
        chunked = unread_body_post(
            target.client, path, content=iter([b"x" * 600_000, b"y" * 600_000])
        )
        assert chunked.status_code == 413, chunked.text[:300]


#: The forms a person sends from the pages, and the page each error page links on to.
PAGE_FORMS = (
    ("/a2a/acme/oauth/consent/decision", "/a2a/acme/oauth/consent"),
    ("/a2a/acme/oauth/agents", "/a2a/acme/oauth/agents"),
)


def test_an_oversized_page_form_gets_the_pages_error_page(target: Target) -> None:
    # Reported: a person who pasted something huge into a page's form got a bare 413, the
    # browser's blank page. A page form past its limit is the pages' own error page, with a
    # way on; the agent's OAuth endpoints keep their protocol answer (bare 413).
    too_long = b"session=" + b"A" * FORM_LIMIT
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    # Refused from its length, the form is not read: each goes on a connection of its own.
    for path, onward in PAGE_FORMS:
        response = unread_body_post(target.client, path, content=too_long, headers=form)
        assert response.status_code == 413, (path, response.text[:200])
        assert response.headers["content-type"] == "text/html; charset=utf-8", path
        assert "What was sent is too long for this page. Start again." in response.text, path
        assert f'<a href="{BASE_URL}{onward}">' in response.text, (path, response.text)
    signed = {**form, **target.headers(target.token())}
    for path in ("/a2a/acme/oauth/token", "/a2a/acme/oauth/device_authorization"):
        response = unread_body_post(target.client, path, content=too_long, headers=signed)
        assert response.status_code == 413, (path, response.text[:200])
        assert response.content == b"", path


def test_a_repeated_origin_on_a_page_form_is_a_cross_site_post(target: Target) -> None:
    # Found by fuzzing: a repeated `Origin` was read as no `Origin` (as a repeated header is
    # missing), so on ASGI servers a page form posted with two passed the check meant to stop
    # cross-site posts (a 400 from the form after it), while the WSGI servers, which join
    # repeated lines into one value, refused it (403). Repeated, it is refused everywhere,
    # even the page's own origin twice: a browser sends one.
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    body = b"session=s&decision=allow&scope=orders%3Aread&action=revoke&grant=g"
    for origin in ("https://evil.example", BASE_URL):
        headers = [("Origin", origin), ("Origin", origin), *form.items()]
        for path, _ in PAGE_FORMS:
            response = target.client.post(path, content=body, headers=headers)
            assert response.status_code == 403, (path, origin, response.text[:300])
            assert "did not come from" in response.text, (path, response.text[:300])


# -- paths ---------------------------------------------------------------------------------------


def test_percent_encoding_does_not_bypass_the_guard(target: Target) -> None:
    assert_refused(target.client.get("/api/%65cho"))
    assert_caller(target.client.get("/api/%65cho", headers=target.headers(target.token())))


def test_provider_paths_are_decoded_once(target: Target) -> None:
    card = target.client.get("/a2a/%61cme/.well-known/agent-card.json")
    assert card.status_code == 200
    assert card.json()["name"] == "Acme"
    headers = target.headers(target.token())
    for path in (
        "/a2a/acme/message%253Asend",
        "/a2a/%2561cme/message:send",
        "/a2a/%2561cme/.well-known/agent-card.json",
    ):
        response = target.client.post(path, json={}, headers=headers)
        if path.endswith(".json"):
            response = target.client.get(path)
        assert response.status_code == 404, (path, response.status_code, response.text[:200])
        assert response.content == b"", path
    sent = target.client.post(
        "/a2a/acme/message%3Asend",
        json={"message": a2a_message("Where is my order A-1001?")},
        headers={**headers, "Content-Type": "application/a2a+json"},
    )
    assert sent.status_code == 200, sent.text[:300]
    assert sent.json()["message"]["role"] == "ROLE_AGENT"


def _raw(target: Target, head: bytes, body: bytes = b"") -> bytes:
    """Send one request as these bytes (then end the upload) and read the status line."""
    url = httpx.URL(str(target.client.base_url))
    with socket.create_connection((url.host, url.port or 80), timeout=20) as sock:
        sock.sendall(head + b"Host: " + url.host.encode() + b"\r\nConnection: close\r\n\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        return sock.recv(65536).split(b"\r\n", 1)[0]


@pytest.mark.parametrize("length", [b"0x10", b"\xd9\xa5", b"+5", b"-1"])
def test_a_content_length_that_is_not_digits_is_a_400(target: Target, length: bytes) -> None:
    # Found by tests/advisories/test_generated_requests.py: Django's `request.body` raised
    # ValueError on such a length (a 500 at a Parafé endpoint under runserver), Werkzeug read
    # no body at all. RFC 9112 §6.3: the framing is invalid, a 400 (as uvicorn answers).
    body = b'{"message": {}}'
    credential = b"Authorization: Bearer " + target.token().encode() + b"\r\n"
    for path in ("/parafe-sync", "/a2a/acme/message:send"):  # the bodies pactmw reads
        head = b"POST " + path.encode() + b" HTTP/1.1\r\nContent-Length: " + length + b"\r\n"
        status = _raw(target, head + credential, body)
        assert status.split(b" ")[1] == b"400", (path, status)


def test_a_method_no_route_has_is_an_empty_404_on_provider_paths(target: Target) -> None:
    # Found by tests/advisories/test_generated_requests.py: Flask answered methods outside
    # its rule's list with its own 405 page; the Provider's unmatched route is a bare 404.
    headers = target.headers(target.token())
    for method in ("FOO", "PROPFIND", "TRACE", "CONNECT"):
        for path in ("/a2a/acme/message:send", "/a2a/acme/.well-known/agent-card.json"):
            response = target.client.request(method, path, headers=headers)
            assert response.status_code == 404, (method, path, response.text[:200])
            assert response.content == b"", (method, path)


def test_a_method_in_lower_case_is_no_route_on_provider_paths(target: Target) -> None:
    # Found by fuzzing: Django upper-cases `request.method`, so `get` was a GET there (the
    # card, the pages, a 401 on tasks) while every other server had the Provider's bare 404.
    # Methods are case-sensitive (RFC 9110 §9.1): `get` is a method no route has.
    headers = target.headers(target.token())
    for method, path in (
        ("get", "/a2a/acme/.well-known/agent-card.json"),
        ("get", "/a2a/acme/oauth/consent"),
        ("Get", "/a2a/acme/tasks"),
        ("post", "/a2a/acme/message:send"),
        ("options", "/a2a/acme/oauth/jwks.json"),
    ):
        status, _, body = _exchange(target, method, path, headers)
        assert (status, body) == (404, b""), (target.name, method, path, status, body[:200])


def test_provider_paths_the_framework_cannot_route_get_the_providers_answer(
    target: Target,
) -> None:
    # Found by fuzzing: Flask's rule for the Provider's paths did not take an empty segment
    # (Werkzeug answered its own 308 to the merged path) nor a decoded newline (its own HTML
    # 404; a 404 to OPTIONS where the Provider's 204 says what the path takes). The
    # Provider answers every path under its mount, as on every other adapter.
    headers = target.headers(target.token())
    for method, path, status in (
        ("GET", "/a2a//tasks", 404),
        ("POST", "/a2a//oauth/consent/decision", 404),
        ("GET", "/a2a/acme//tasks", 404),
    ):
        got, _, body = _exchange(target, method, path, headers)
        assert (got, body) == (status, b""), (target.name, method, path, got, body[:200])
    for method, path, status in (
        ("GET", "/a2a/acme/tasks/a%0Ab", 404),  # TASK_NOT_FOUND, an A2A error body
        ("OPTIONS", "/a2a/acme/tasks/a%0Ab", 204),
        ("DELETE", "/a2a/acme/tasks/a%0Ab/pushNotificationConfigs/c-1", 400),
    ):
        got, answered, _ = _exchange(target, method, path, headers)
        assert got == status, (target.name, method, path, got)
        assert not answered.get("content-type", "").startswith("text/html"), (target.name, path)


def test_a_body_shorter_than_its_content_length_is_a_400(target: Target) -> None:
    # Found by tests/advisories/test_generated_requests.py: Werkzeug's ClientDisconnected
    # escaped the WSGI body reader when an upload ended before its declared length (a 500
    # at a Parafé endpoint), and a part of a body was read as the whole. uvicorn closes
    # such a connection without an answer.
    credential = b"Authorization: Bearer " + target.token().encode() + b"\r\n"
    for path in ("/parafe-sync", "/a2a/acme/message:send"):
        for body in (b"", b'{"message": {}}'):
            head = b"POST " + path.encode() + b" HTTP/1.1\r\nContent-Length: 100\r\n"
            status = _raw(target, head + credential, body)
            assert status in (b"", b"HTTP/1.1 400 Bad Request", b"HTTP/1.1 400 BAD REQUEST"), (
                path,
                body,
                status,
            )


def test_a_chunked_body_with_broken_framing_is_a_400(target: Target) -> None:
    # Found by the Poppy trial: Werkzeug's server raises OSError ("Invalid chunk header")
    # from the body stream, which escaped the WSGI body reader as a 500 with a traceback at
    # every endpoint that reads a body before any credential: the consent decision here,
    # Poppy's token, device and revocation endpoints (gunicorn's chunk errors are OSErrors
    # too). uvicorn refuses such framing itself, and Django's runserver reads no chunked
    # body (411).
    head = (
        b"POST /a2a/acme/oauth/consent/decision HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
    )
    status = _raw(target, head, b"zz\r\nabc\r\n0\r\n\r\n")  # "zz" is no chunk size
    assert status.split(b" ")[1] in (b"400", b"411"), status


def test_a_path_no_route_has_under_the_guarded_prefix_is_the_challenge(target: Target) -> None:
    # Found by tests/advisories/test_generated_requests.py: Flask routed first and answered
    # 404 to an anonymous caller, telling which paths under the guarded prefix exist; the
    # other adapters' middleware refuses the whole prefix before the app routes.
    for path in ("/api/nothing-here", "/api/scoped-sync/", "/api/echo/x"):
        assert_refused(target.client.get(path))


# -- methods -------------------------------------------------------------------------------------

#: The Provider's GET routes of the contract Brand, and GET routes of no A2A operation (each
#: answers HEAD as it answers GET: RFC 9110 §9.3.2), with whether a PACT JWT is sent.
GET_ROUTES = (
    ("/a2a/acme/.well-known/agent-card.json", False),
    ("/a2a/acme/oauth/.well-known/oauth-authorization-server", False),
    ("/a2a/acme/oauth/jwks.json", False),
    ("/a2a/acme/oauth/consent", False),  # the code entry page
    ("/a2a/acme/oauth/consent?user_code=no", False),  # the same, with its error (400)
    ("/a2a/acme/oauth/connected", False),  # the result page
    ("/a2a/acme/oauth/agents", False),  # the connected agents page: to the login first (303)
    ("/a2a/acme/tasks", False),  # 401: HEAD needs the token as GET does
    ("/a2a/acme/tasks", True),
    ("/a2a/acme/tasks?pageSize=0", True),  # an A2A error has a body to leave out
    ("/a2a/acme/tasks/t-1", True),  # TASK_NOT_FOUND
    ("/a2a/nobody/.well-known/agent-card.json", False),  # no such Brand: 404
    # Routes with no GET: HEAD is unmatched as GET is (404, before authentication).
    ("/a2a/acme/message:send", True),
    ("/a2a/acme/oauth/token", True),
    ("/a2a/acme/oauth/device_authorization", True),
)
#: What a server adds to any answer of its own (not the Provider's, and never the same twice).
SERVER_HEADERS = frozenset({"date", "server", "connection"})


def _exchange(
    target: Target, method: str, path: str, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection, and everything the server sent back: the status,
    the headers (lower-case names) and the bytes after them. httpx reads no body after a
    HEAD, so it could not tell a server that sends one."""
    url = httpx.URL(str(target.client.base_url))
    fields = {"Host": url.host, **headers, "Connection": "close"}
    lines = [f"{method} {path} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.items())]
    received = b""
    with socket.create_connection((url.host, url.port or 80), timeout=20) as sock:
        sock.sendall("\r\n".join([*lines, "", ""]).encode("latin-1"))
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    answered: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        assert name.lower() not in answered, (method, path, head)  # no header repeats here
        answered[name.lower()] = value.strip()
    return int(status_line.split(" ")[1]), answered, body


def assert_head_as_get(
    target: Target, path: str, *, signed: bool = False, headers: dict[str, str] | None = None
) -> None:
    """HEAD on `path` answers what GET does, without the body (RFC 9110 §9.3.2): the same
    status and header fields, `Content-Length` the GET body's. `signed`: each request with
    a PACT JWT of its own."""

    def sent() -> dict[str, str]:
        return {**(headers or {}), **target.headers(target.token() if signed else None)}

    get = _exchange(target, "GET", path, sent())
    head = _exchange(target, "HEAD", path, sent())
    where = (target.name, path, get[0], head[0], get[2][:200])
    assert head[0] == get[0], where
    assert head[2] == b"", where
    get_fields = {k: v for k, v in get[1].items() if k not in SERVER_HEADERS}
    head_fields = {k: v for k, v in head[1].items() if k not in SERVER_HEADERS}
    assert get_fields["content-length"] == str(len(get[2])), where
    if get[2] == b"" and "content-length" not in head_fields:
        # Django's runserver leaves out a HEAD's `Content-Length: 0` (§9.3.2 allows it).
        del get_fields["content-length"]
    assert head_fields == get_fields, where


def test_head_is_answered_as_get_without_the_body(target: Target) -> None:
    # Reported: HEAD on the consent pages was a 404 (an uptime monitor's or a CDN's check);
    # it was on every route.
    for path, signed in GET_ROUTES:
        assert_head_as_get(target, path, signed=signed)


def test_other_methods_stay_an_empty_404_on_provider_paths(target: Target) -> None:
    # Only HEAD goes with GET: PUT, DELETE and unknown methods stay unmatched (PACT §2.2: 404
    # before authentication, no A2A body) on the routes HEAD now reaches. (OPTIONS is
    # answered from the routes: test_options_says_what_each_path_takes.)
    headers = target.headers(target.token())
    for method in ("PUT", "DELETE", "FOO"):
        for path, _ in GET_ROUTES[:7]:
            response = target.client.request(method, path, headers=headers)
            assert response.status_code == 404, (method, path, response.text[:200])
            assert response.content == b"", (method, path)


#: Provider paths and what OPTIONS says they take, and whether they are public documents,
#: which any origin may read (CORS).
OPTIONS_PATHS = (
    ("/a2a/acme/.well-known/agent-card.json", {"GET", "HEAD"}, True),
    ("/a2a/acme/oauth/.well-known/oauth-authorization-server", {"GET", "HEAD"}, True),
    ("/a2a/acme/oauth/jwks.json", {"GET", "HEAD"}, True),
    ("/a2a/acme/oauth/consent", {"GET", "HEAD"}, False),  # same-app: no POST (a 405)
    ("/a2a/acme/oauth/consent/decision", {"POST"}, False),
    ("/a2a/acme/oauth/connected", {"GET", "HEAD"}, False),
    ("/a2a/acme/oauth/agents", {"GET", "HEAD", "POST"}, False),
    ("/a2a/acme/oauth/token", {"POST"}, False),
    ("/a2a/acme/message:send", {"POST"}, False),
    ("/a2a/acme/tasks", {"GET", "HEAD"}, False),
    ("/a2a/acme/tasks/t-1/pushNotificationConfigs/c-1", {"GET", "HEAD", "DELETE"}, False),
)
#: A browser's preflight for a cross-origin GET that sends a header of its own.
PREFLIGHT = {
    "Origin": "https://agent.example",
    "Access-Control-Request-Method": "GET",
    "Access-Control-Request-Headers": "a2a-version",
}


def test_options_says_what_each_path_takes(target: Target) -> None:
    # Reported: OPTIONS on the public documents was a 404, so a browser-based agent's
    # preflight failed (RFC 9110 §9.3.7: OPTIONS answers with what the resource allows). It
    # is answered before authentication, as routing is; CORS only on the public documents.
    for path, methods, public in OPTIONS_PATHS:
        response = target.client.request("OPTIONS", path, headers=PREFLIGHT)
        where = (path, response.status_code, dict(response.headers))
        assert response.status_code == 204, where
        assert response.content == b"", where
        allowed = {method.strip() for method in response.headers["allow"].split(",")}
        assert allowed == {*methods, "OPTIONS"}, where
        if public:
            assert response.headers["access-control-allow-origin"] == "*", where
            assert response.headers["access-control-allow-methods"] == "GET, HEAD", where
            assert response.headers["access-control-allow-headers"] == "*", where
            assert "access-control-allow-credentials" not in response.headers, where
            got = target.client.get(path, headers={"Origin": "https://agent.example"})
            assert got.headers["access-control-allow-origin"] == "*", path
        else:
            assert not any(name.startswith("access-control-") for name in response.headers), where
    # No route, no Brand: nothing to allow, the bare 404 a GET there gets.
    for path in ("/a2a/acme/nothing", "/a2a/nobody/.well-known/agent-card.json"):
        response = target.client.request("OPTIONS", path, headers=PREFLIGHT)
        assert response.status_code == 404, (path, response.text[:200])
        assert response.content == b"", path


def test_a_405_says_what_the_page_allows(target: Target) -> None:
    # The consent page of a same-app Brand takes no POST: its 405 names GET and HEAD (RFC
    # 9110 §15.5.6: a 405 MUST carry `Allow`, listing the methods the resource supports).
    response = target.client.post("/a2a/acme/oauth/consent", data={"assertion": "x"})
    assert response.status_code == 405, response.text[:200]
    allowed = {method.strip() for method in response.headers["allow"].split(",")}
    assert allowed == {"GET", "HEAD"}


@pytest.fixture(scope="module")
def poppy_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with harness(tmp_path_factory.mktemp("contract-poppy"), brand_extra=POPPY) as started:
        yield started


#: Poppy's root documents: poppy.json (chosen by `Host`) and the issuer's RFC 8414 metadata.
POPPY_DOCUMENTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("/.well-known/poppy.json", {"Host": "shop.example"}),
    ("/.well-known/oauth-authorization-server/a2a/acme/poppy", {}),
)


@pytest.mark.parametrize("name", [*PROVIDER_ONLY, *SERVERS])
def test_poppys_documents_answer_head_as_get_and_no_other_method(
    poppy_servers: Harness, name: str
) -> None:
    # Every server adds the Provider in one step (Starlette and FastAPI: `a2a_routes`, which
    # `a2a_mount` left at /a2a only); `serve` has the Provider alone, as `pactmw serve` runs it.
    target = poppy_servers.get(name)
    for path, headers in POPPY_DOCUMENTS:
        assert target.client.get(path, headers=headers).status_code == 200, (name, path)
        assert_head_as_get(target, path, headers=headers)
        # Found here: Flask answered these paths itself, its own 405 page for other methods
        # and its own 200 to OPTIONS, where every other server has the Provider's answer.
        for method in ("POST", "PUT", "DELETE", "FOO"):
            response = target.client.request(method, path, headers=headers)
            assert response.status_code == 404, (name, method, path, response.text[:200])
            assert response.content == b"", (name, method, path)
        # OPTIONS: what the document takes, and the CORS preflight's answer (it is public).
        preflight = target.client.request("OPTIONS", path, headers={**headers, **PREFLIGHT})
        where = (name, path, preflight.status_code, dict(preflight.headers))
        assert preflight.status_code == 204, where
        assert preflight.headers["allow"] == "GET, HEAD, OPTIONS", where
        assert preflight.headers["access-control-allow-origin"] == "*", where
    # The Provider's own routes on the `serve` shape too.
    for path, signed in GET_ROUTES:
        assert_head_as_get(target, path, signed=signed)


@pytest.mark.parametrize("name", list(SERVERS))
def test_the_apps_own_well_known_documents_stay_its_own(poppy_servers: Harness, name: str) -> None:
    # The Provider takes Poppy's two documents under /.well-known, not the whole folder: the
    # guide's earlier `Mount("/.well-known", ...)` answered every other document there with
    # the Provider's 404, the app's routes listed after it never reached.
    target = poppy_servers.get(name)
    assert_caller(target.client.get("/.well-known/apple-app-site-association"), actor_id=None)
    host = {"Host": "shop.example"}
    assert target.client.get("/.well-known/poppy.json", headers=host).status_code == 200, name


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_poppy_metadata_path_the_framework_cannot_route_gets_the_providers_answer(
    poppy_servers: Harness, name: str
) -> None:
    # As for the paths under /a2a/ (test_provider_paths_the_framework_cannot_route_...):
    # Starlette's route for the issuers' metadata did not match a decoded newline, so the
    # host app answered (its "Not Found" text) where the Provider's bare 404 is.
    target = poppy_servers.get(name)
    path = "/.well-known/oauth-authorization-server/a2a/acme%0Ab/poppy"
    for method in ("GET", "OPTIONS"):
        got, _, body = _exchange(target, method, path, {})
        assert (got, body) == (404, b""), (name, method, got, body[:200])


#: Content-Types an OAuth form must not come with (RFC 6749 §3.2, §4.1.3: the token request
#: is `application/x-www-form-urlencoded`); None sends no Content-Type at all.
NOT_A_FORM = (None, "application/json", "text/plain", "multipart/form-data; boundary=x")
FORM_DESCRIPTION = "the body must be sent as Content-Type: application/x-www-form-urlencoded"


def _form_post(target: Target, path: str, body: bytes, content_type: str | None) -> httpx.Response:
    headers = {} if content_type is None else {"Content-Type": content_type}
    if path.startswith("/a2a/acme/oauth/"):
        headers.update(target.headers(target.token()))
    # httpx adds no Content-Type to raw `content`: what is sent is exactly `headers`.
    return target.client.post(path, content=body, headers=headers)


@pytest.mark.parametrize("name", list(SERVERS))
def test_an_oauth_form_without_its_content_type_is_invalid_request(
    poppy_servers: Harness, name: str
) -> None:
    # Found by a Poppy trial: Poppy's token endpoint read any body as a form, whatever its
    # Content-Type said (none, JSON), as PACT's did. One rule for both now: `invalid_request`
    # saying what to send, before the client is authenticated or anything is spent.
    target = poppy_servers.get(name)
    pact_form = f"grant_type=x&client_id={ISSUER}".encode()
    endpoints = (
        ("/a2a/acme/oauth/token", pact_form, (400, "unsupported_grant_type")),
        ("/a2a/acme/oauth/device_authorization", pact_form, (400, "invalid_scope")),
        ("/a2a/acme/poppy/token", b"grant_type=x", (401, "invalid_client")),
        ("/a2a/acme/poppy/device", b"scope=orders%3Aread", (401, "invalid_client")),
        ("/a2a/acme/poppy/revoke", b"token=x", (401, "invalid_client")),
    )
    for path, body, as_a_form in endpoints:
        for content_type in NOT_A_FORM:
            answer = _form_post(target, path, body, content_type)
            where = (name, path, content_type, answer.status_code, answer.text[:200])
            assert answer.status_code == 400, where
            assert answer.json()["error"] == "invalid_request", where
            assert answer.json()["error_description"].startswith(FORM_DESCRIPTION), where
            assert answer.headers["cache-control"] == "no-store", where
        # The same body as a form (any case, with a charset) goes on to the endpoint's checks.
        for content_type in (
            "application/x-www-form-urlencoded",
            "Application/X-WWW-Form-Urlencoded; charset=UTF-8",
        ):
            answer = _form_post(target, path, body, content_type)
            got = (answer.status_code, answer.json()["error"])
            assert got == as_a_form, (name, path, content_type, answer.text[:200])


# -- audit: what docs/adapters.md and docs/delegated.md promise, on every adapter --------------


def test_the_prefixs_own_path_without_its_slash_is_guarded(target: Target) -> None:
    # docs/adapters.md: the middleware verifies "the prefix's own path without its slash".
    assert_refused(target.client.get("/api"))
    assert_refused(target.client.get("/api", headers=target.headers("garbage")))
    # Its slash-ended path and an empty segment under it too: the app's router (which might
    # redirect them elsewhere) runs after the guard.
    for path in ("/api/", "/api//echo"):
        assert_refused(target.client.get(path))


def test_a_delegation_without_the_identity_is_the_bare_challenge(target: Target) -> None:
    # A delegation is bound to a personal agent's identity: alone it is no credential, so the
    # answer is the challenge without an error code (RFC 6750 §3.1), as for no credential.
    delegation, _ = target.delegation("orders:read")
    alone = {"X-A2A-User-Delegation": delegation}
    for path in [*protected(target), *(f"/api/scoped-{v}" for v in target.variants)]:
        assert_refused(target.client.get(path, headers=alone))


def test_a_repeated_delegation_header_is_malformed_on_every_protected_route(
    target: Target,
) -> None:
    delegation, _ = target.delegation("orders:read")
    headers = [
        ("Authorization", f"Bearer {target.token()}"),
        ("X-A2A-User-Delegation", delegation),
        ("X-A2A-User-Delegation", delegation),
    ]
    for path in [*protected(target), *(f"/api/scoped-{v}" for v in target.variants)]:
        assert_refused(target.client.get(path, headers=headers), INVALID_TOKEN)


def test_a_revoked_grant_is_refused_on_the_next_request(target: Target) -> None:
    # docs/delegated.md: delegation tokens "are checked on every request against the grant",
    # so a revocation takes effect on the next request, whatever a cache holds.
    delegation, account = target.delegation("orders:read")
    headers = target.headers(target.token(), delegation)
    paths = [*protected(target), *(f"/api/scoped-{v}" for v in target.variants)]
    for path in paths:
        assert_caller(target.client.get(path, headers=headers), account=account)
    assert target.store.revoke_account_grants(account, now=time.time())
    for path in paths:
        assert_refused(target.client.get(path, headers=headers), INVALID_TOKEN)


def test_an_expired_delegation_is_refused(target: Target) -> None:
    now = time.time()
    grant = target.store.upsert_grant(
        grant_id=f"g-{uuid.uuid4().hex}",
        brand_id="acme",
        account=f"acct-{uuid.uuid4().hex[:8]}",
        client_id=ISSUER,
        pa_sub="user-42",
        scopes=("orders:read",),
        now=now,
        expires_at=now + 3600,
    )
    token = mint_access_token(
        key=target.signing.signer,
        interface_url=f"{BASE_URL}/a2a/acme",
        account=grant.account,
        client_id=ISSUER,
        scopes=grant.scopes,
        grant_id=grant.grant_id,
        now=now - 7200,  # an hour's token, minted two hours ago
    )
    headers = target.headers(target.token(), f"Bearer {token}")
    for path in [*protected(target), *(f"/api/scoped-{v}" for v in target.variants)]:
        assert_refused(target.client.get(path, headers=headers), INVALID_TOKEN)


def test_the_providers_routes_refuse_without_a_token_and_cap_the_body(target: Target) -> None:
    # docs/provider.md: the Provider authenticates its own routes and answers 413 for a body
    # over 1 MiB, whichever adapter serves it.
    message = {"message": a2a_message("hello")}
    assert_refused(target.client.post("/a2a/acme/message:send", json=message))
    expired = target.headers(target.token(iat=1_000_000_000, exp=1_000_000_100))
    assert_refused(target.client.post("/a2a/acme/message:send", json=message, headers=expired))
    signed = target.headers(target.token())
    if target.name == "django-asgi":
        # Django's ASGI handler buffers the whole body before any code of ours runs.
        sent = target.client.post(
            "/a2a/acme/message:send", content=b"x" * (MIB + 1), headers=signed
        )
        assert (sent.status_code, sent.content) == (413, b""), sent.text[:200]
        return
    url = httpx.URL(str(target.client.base_url))
    head = (
        f"POST /a2a/acme/message:send HTTP/1.1\r\nHost: {url.host}\r\n"
        f"Authorization: {signed['Authorization']}\r\nContent-Type: application/a2a+json\r\n"
        f"Content-Length: {MIB + 1}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((url.host, url.port or 80), timeout=20) as sock:
        sock.sendall(head.encode("ascii"))
        answer = sock.recv(65536)
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == b"413", answer[:300]


@pytest.fixture(scope="module")
def undelegated_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    extra = {"delegation_brand": None}
    with harness(tmp_path_factory.mktemp("contract-undelegated"), extra) as started:
        yield started


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_delegation_where_no_brand_accepts_one_is_refused_never_ignored(
    undelegated_servers: Harness, name: str
) -> None:
    # docs/adapters.md: "a delegation header is never ignored; one sent where no Brand accepts
    # delegation is refused", by the middleware, the decorators and the dependencies alike.
    target = undelegated_servers.get(name)
    delegation, _ = target.delegation("orders:read")
    identity = target.headers(target.token())
    both = target.headers(target.token(), delegation)
    for path in [*protected(target), "/optional"]:
        assert_caller(target.client.get(path, headers=identity), account=None)
        assert_refused(target.client.get(path, headers=both), INVALID_TOKEN)
    for variant in target.variants:
        scoped = target.client.get(f"/api/scoped-{variant}", headers=both)
        assert_refused(scoped, INVALID_TOKEN)


def test_the_optional_decorator_verifies_a_delegation_as_the_required_one_does(
    target: Target,
) -> None:
    # docs/adapters.md: "Middleware, decorators and dependencies check the same things", in
    # optional mode too: a delegation that comes with an identity is verified and attached.
    delegation, account = target.delegation("orders:read")
    good = target.headers(target.token(), delegation)
    assert_caller(target.client.get("/optional", headers=good), account=account)
    bad = target.headers(target.token(), "not-a-delegation-token")
    assert_refused(target.client.get("/optional", headers=bad), INVALID_TOKEN)
    # A delegation alone is bound to no identity: refused, never taken for an anonymous call.
    assert_refused(target.client.get("/optional", headers={"X-A2A-User-Delegation": delegation}))


@pytest.fixture(scope="module")
def default_prefix_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    extra = {"protect_prefix": "/a2a/"}
    with harness(tmp_path_factory.mktemp("contract-default-prefix"), extra) as started:
        yield started


@pytest.mark.parametrize("name", list(SERVERS))
def test_the_providers_own_routes_under_the_default_prefix_authenticate_themselves(
    default_prefix_servers: Harness, name: str
) -> None:
    # docs/adapters.md: with the prefix the Provider is served under (`/a2a/`, the default),
    # "the Provider's own /a2a/{brand}/... routes authenticate themselves": the card is
    # public, an unknown route is the Provider's bare 404 before authentication, and its
    # operations answer their own 401. Reported: Starlette's and FastAPI's middleware in
    # front of `a2a_routes` answered the public Agent Card (and the consent pages) with 401.
    target = default_prefix_servers.get(name)
    card = target.client.get("/a2a/acme/.well-known/agent-card.json")
    assert card.status_code == 200, card.text[:200]
    for path in ("/a2a/acme/nothing", "/a2a/nobody/.well-known/agent-card.json", "/a2a/"):
        unknown = target.client.get(path)
        assert (unknown.status_code, unknown.content) == (404, b""), (path, unknown.text[:200])
    message = {"message": a2a_message("hello")}
    assert_refused(target.client.post("/a2a/acme/message:send", json=message))
    sent = target.client.post(
        "/a2a/acme/message:send",
        json=message,
        headers={**target.headers(target.token()), "Content-Type": "application/a2a+json"},
    )
    assert sent.status_code == 200, sent.text[:300]


#: The servers that guard once the framework has routed the request, and so know whether it
#: reaches a view of the app's own or the Provider (Flask's `before_request`, Django's
#: `process_view`). The ASGI and WSGI middleware run before routing: all of `/a2a/` is the
#: Provider's there (docs/adapters.md).
ROUTED_BEFORE_GUARDED = ("flask", "django-wsgi", "django-asgi")


@pytest.mark.parametrize("name", ROUTED_BEFORE_GUARDED)
def test_the_apps_own_views_under_the_providers_mount_are_guarded(
    default_prefix_servers: Harness, name: str
) -> None:
    # Reported on Flask in a new user's trial, then on Django: with `brands`, the middleware
    # left all of /a2a/ to the Provider, but the framework routed the app's own view there
    # (listed before the Provider's), which ran for anyone and never saw the caller.
    target = default_prefix_servers.get(name)
    signed = target.headers(target.token())
    for path in (APP_UNDER_MOUNT, APP_UNDER_BRAND):
        assert_refused(target.client.get(path))
        assert_refused(target.client.get(path, headers=target.headers("garbage")))
        assert_caller(target.client.get(path, headers=signed), account=None)
    # The Provider's own paths stay its own: its card is public, and an unmatched route (an
    # unknown Brand's too) is its bare 404 before any credential, as PACT conformance wants.
    card = target.client.get("/a2a/acme/.well-known/agent-card.json")
    assert card.status_code == 200, card.text[:200]
    for path in ("/a2a/acme/nothing", "/a2a/nobody/unknown", "/a2a/nobody/message:send"):
        unknown = target.client.get(path)
        assert (unknown.status_code, unknown.content) == (404, b""), (path, unknown.text[:200])


@pytest.fixture(scope="module")
def site_wide_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    extra = {"protect_prefix": "/"}
    workdir = tmp_path_factory.mktemp("contract-site-wide")
    with harness(workdir, extra, brand_extra=POPPY) as started:
        yield started


#: The documents an agent reads to discover the service, before it holds any credential:
#: Poppy's (poppy.json, the issuer's RFC 8414 metadata), the Brand's Agent Card (PACT §2.1)
#: and its authorization server's RFC 8414 metadata and JWKS (PACT §5.1).
DISCOVERY_DOCUMENTS: tuple[tuple[str, dict[str, str]], ...] = (
    *POPPY_DOCUMENTS,
    ("/a2a/acme/.well-known/agent-card.json", {}),
    ("/a2a/acme/oauth/.well-known/oauth-authorization-server", {}),
    ("/a2a/acme/oauth/jwks.json", {}),
)


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_site_wide_guard_leaves_the_discovery_documents_public(
    site_wide_servers: Harness, name: str
) -> None:
    # With `protect_prefix = "/"` Poppy's documents under /.well-known were refused (401)
    # to the agent that had come to read them: it could not discover the service without
    # the credential the documents tell it how to get.
    target = site_wide_servers.get(name)
    for path, headers in DISCOVERY_DOCUMENTS:
        for method in ("GET", "HEAD"):
            response = target.client.request(method, path, headers=headers)
            assert response.status_code == 200, (name, method, path, response.text[:200])
    # An unknown Brand's document there is the Provider's bare 404, not the challenge.
    unknown = target.client.get("/.well-known/oauth-authorization-server/a2a/nobody/poppy")
    assert (unknown.status_code, unknown.content) == (404, b""), (name, unknown.text[:200])
    # Everything else of the app's is guarded, its own document under /.well-known too.
    for path in ("/public", WELL_KNOWN, "/"):
        assert_refused(target.client.get(path))
    signed = target.headers(target.token())
    assert_caller(target.client.get(WELL_KNOWN, headers=signed), account=None)


def test_every_path_under_the_providers_mount_is_the_providers(target: Target) -> None:
    # docs/adapters.md: "every method on a Provider path reaches the Provider, whose unmatched
    # routes are an empty 404": the mount's own path (`/a2a/`) too, for every method (Flask
    # answered it with its HTML 404 page, fixed with the empty segments in
    # test_provider_paths_the_framework_cannot_route_get_the_providers_answer).
    headers = target.headers(target.token())
    for method in ("GET", "POST", "OPTIONS"):
        for path in ("/a2a/", "/a2a//acme/message:send", "/a2a/acme//message:send"):
            response = target.client.request(method, path, headers=headers)
            where = (method, path, response.status_code, response.text[:200])
            assert (response.status_code, response.content) == (404, b""), where
