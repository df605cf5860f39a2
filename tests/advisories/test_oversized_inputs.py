"""Oversized inputs against a real uvicorn `A2AProviderApp`: never a 500, never a hang.

Two servers: uvicorn's defaults (h11 refuses request heads over 16 KiB with its own 400,
before pactmw runs) and a "roomy" one whose head buffer is 8 MiB, so that pactmw's own bounds
are what answers: tokens over 16 KiB (401), bodies over 1 MiB and forms over 64 KiB (413,
decided from `Content-Length` without waiting for the body), huge queries and paths. Every
request has a client timeout, so a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from pactmw.core.jose import MAX_TOKEN_LENGTH, sign_compact
from pactmw.provider import Brand
from pactmw.provider.brand import DelegationConfig
from pactmw.provider.delegated import FORM_LIMIT
from tests.advisories.support import IDENTITY_CHALLENGE, INVALID_TOKEN, serve_provider
from tests.delegated.support import LOGIN_URL, PA_KEYS, SCOPES, Env
from tests.support.net import unread_body_post
from tests.support.parties import AUDIENCE, ISSUER

ONE_MIB = 1024 * 1024
TIMEOUT = 15.0  # generous for a loaded CI machine; a hang still fails well within the suite
MESSAGE = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


def _brands() -> list[Brand]:
    config = DelegationConfig(scopes=SCOPES, login_url=LOGIN_URL, interval=1)
    return [Brand(id="acme", name="Acme", handler=lambda turn: "hi", delegation=config)]


@pytest.fixture(scope="module")
def roomy() -> Iterator[Env]:
    with serve_provider(_brands(), h11_max_incomplete_event_size=8 * ONE_MIB) as env:
        yield env


@pytest.fixture(scope="module")
def default() -> Iterator[Env]:
    with serve_provider(_brands()) as env:
        yield env


def pact_jwt(length: int | None = None, sub: str = "u1") -> str:
    """A valid PACT JWT, padded with an ignored claim to exactly `length` characters."""
    now = int(time.time())
    claims: dict[str, Any] = {"iss": ISSUER, "sub": sub, "aud": AUDIENCE, "iat": now}
    claims["exp"] = now + 120
    key = PA_KEYS[ISSUER]
    if length is None:
        return sign_compact(claims, key, typ="JWT")
    # base64url never has a length of 1 mod 4, so one of these header sizes lands exactly.
    for typ in ("JWT", "jwt+x", None):
        bare = len(sign_compact({**claims, "pad": ""}, key, typ=typ))
        start = max(0, (length - bare) * 3 // 4 - 3)
        for size in range(start, start + 8):
            token = sign_compact({**claims, "pad": "p" * size}, key, typ=typ)
            if len(token) == length:
                return token
    raise AssertionError(f"no padding gives a token of {length} characters")


def bearer(token: str | None = None) -> dict[str, str]:
    return {"authorization": "Bearer " + (token or pact_jwt())}


def send(
    env: Env, method: str, path: str, *, unread: bool = False, **options: Any
) -> httpx.Response:
    """One request with a deadline; the Provider must answer, and never with a 5xx.
    `unread`: a POST whose body the Provider refuses unread, on a connection of its own."""
    started = time.monotonic()
    if unread:
        assert method == "POST", method
        answer = unread_body_post(env.http, env.base + path, timeout=TIMEOUT, **options)
    else:
        answer = env.http.request(method, env.base + path, timeout=TIMEOUT, **options)
    assert time.monotonic() - started < TIMEOUT
    assert answer.status_code < 500, (answer.status_code, answer.text[:200])
    return answer


def assert_challenge(answer: httpx.Response, challenge: str = IDENTITY_CHALLENGE) -> None:
    assert answer.status_code == 401, (answer.status_code, answer.text[:200])
    assert answer.headers["www-authenticate"] == challenge
    assert answer.content == b""


def assert_alive(env: Env) -> None:
    answer = send(env, "POST", "/a2a/acme/message:send", json=MESSAGE, headers=bearer())
    assert answer.status_code in (200, 400), answer.text  # 400: the messageId was reused


def raw(
    env: Env,
    method: str,
    target: str,
    headers: Sequence[tuple[str, str]] | Mapping[str, str] = (),
) -> tuple[int | None, bytes]:
    """One request over a plain socket, for sizes httpx refuses to send (URLs over 64 KiB).

    Returns (status, whole response), or (None, b"") when the server cut the connection
    without an answer, as h11 may when a request head is far over its limit. A hang raises
    `TimeoutError`; a 5xx fails the test.
    """
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
    lines = "".join(f"{name}: {value}\r\n" for name, value in pairs)
    head = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{lines}\r\n"
    parts = urlsplit(env.base)
    data = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT) as sock:
        try:
            sock.sendall(head.encode("latin-1"))
            while chunk := sock.recv(65536):
                data += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused mid-request: whatever was answered before the cut is in `data`
    if not data:
        return None, b""
    status = int(data.split(b" ", 2)[1])
    assert status < 500, data[:300]
    return status, data


# -- tokens and headers -------------------------------------------------------------------------


def test_a_pact_jwt_of_exactly_16_kib_is_read_and_one_character_more_is_refused(
    roomy: Env,
) -> None:
    exact, over = pact_jwt(MAX_TOKEN_LENGTH), pact_jwt(MAX_TOKEN_LENGTH + 1)
    assert (len(exact), len(over)) == (16 * 1024, 16 * 1024 + 1)
    body = {"message": {**MESSAGE["message"], "messageId": "m-exact"}}
    answer = send(roomy, "POST", "/a2a/acme/message:send", json=body, headers=bearer(exact))
    assert answer.status_code == 200, answer.text
    assert_challenge(send(roomy, "GET", "/a2a/acme/tasks", headers=bearer(over)))


@pytest.mark.parametrize("size", [64 * 1024, ONE_MIB], ids=["64KiB", "1MiB"])
def test_a_huge_authorization_header_is_refused_not_a_500(
    roomy: Env, default: Env, size: int
) -> None:
    garbage = "Bearer " + "A" * size
    looks_like_a_token = "Bearer e30.e30." + "A" * size
    for value in (garbage, looks_like_a_token):
        assert_challenge(
            send(roomy, "POST", "/a2a/acme/message:send", headers={"authorization": value})
        )
        # On a default server, h11's head limit may answer first (400, or a closed socket);
        # it only bites when the head arrives in pieces, so pactmw's 401 is fine too.
        status, _ = raw(default, "POST", "/a2a/acme/message:send", {"authorization": value})
        assert status in (None, 400, 401, 431)
    assert_alive(roomy)
    assert_alive(default)


def test_a_huge_delegation_header_is_invalid_token(roomy: Env) -> None:
    for value in ("Bearer " + "A" * 20_000, "Bearer e30.e30." + "A" * 200_000, "B" * ONE_MIB):
        headers = {**bearer(), "x-a2a-user-delegation": value}
        assert_challenge(send(roomy, "GET", "/a2a/acme/tasks", headers=headers), INVALID_TOKEN)


def test_many_headers_never_500(roomy: Env, default: Env) -> None:
    many = [(f"x-h{i}", "v" * 10) for i in range(5000)]
    answer = send(roomy, "GET", "/a2a/acme/tasks", headers=[*bearer().items(), *many])
    assert answer.status_code == 200
    answer = send(default, "GET", "/a2a/acme/tasks", headers=[*bearer().items(), *many])
    assert answer.status_code in (200, 400, 431)
    # The same Authorization header 500 times is ambiguous, so no token at all.
    repeated = [("authorization", "Bearer " + pact_jwt())] * 500
    assert_challenge(send(roomy, "GET", "/a2a/acme/tasks", headers=repeated))
    assert_alive(default)


# -- bodies ------------------------------------------------------------------------------------

BODY_ROUTES = {
    "message:send": ("/a2a/acme/message:send", True, ONE_MIB),
    "device_authorization": ("/a2a/acme/oauth/device_authorization", True, FORM_LIMIT),
    "token": ("/a2a/acme/oauth/token", True, FORM_LIMIT),
    "consent": ("/a2a/acme/oauth/consent", False, FORM_LIMIT),
    "consent/decision": ("/a2a/acme/oauth/consent/decision", False, FORM_LIMIT),
}


#: The forms a person sends from the consent pages.
PAGE_ROUTES = frozenset({"consent", "consent/decision"})


def raw_head(env: Env, head: bytes) -> bytes:
    """Send a request head (and no body); return the response head, within `TIMEOUT`."""
    parts = urlsplit(env.base)
    with socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT) as sock:
        sock.sendall(head)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)  # a hang raises socket.timeout
            if not chunk:
                break
            answer += chunk
    return answer


@pytest.mark.parametrize("route", sorted(BODY_ROUTES))
def test_a_terabyte_content_length_is_413_without_waiting_for_the_body(
    default: Env, route: str
) -> None:
    path, authenticated, _limit = BODY_ROUTES[route]
    auth = f"Authorization: Bearer {pact_jwt()}\r\n" if authenticated else ""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {2**40}\r\n\r\n"
    ).encode()
    answer = raw_head(default, head)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


@pytest.mark.parametrize("route", sorted(BODY_ROUTES))
def test_a_body_one_byte_over_the_limit_is_413(roomy: Env, route: str) -> None:
    path, authenticated, limit = BODY_ROUTES[route]
    headers = {"content-type": "application/x-www-form-urlencoded"}
    if authenticated:
        headers.update(bearer())
    body = b"a=" + b"A" * (limit - 1)
    answer = send(roomy, "POST", path, unread=True, content=body, headers=headers)
    assert answer.status_code == 413
    if route in PAGE_ROUTES:
        # A person's browser gets the pages' error page, with a way on (a bare 413 was the
        # browser's blank page); an agent's endpoints keep the protocol's empty answer.
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        assert "What was sent is too long for this page. Start again." in answer.text
        assert f'href="{roomy.base}/a2a/acme/oauth/consent"' in answer.text, answer.text
    else:
        assert answer.content == b""


@pytest.mark.parametrize("route", ["device_authorization", "token"])
def test_an_oversized_oauth_form_without_a_pact_jwt_is_401_not_413(roomy: Env, route: str) -> None:
    path = BODY_ROUTES[route][0]
    answer = send(roomy, "POST", path, unread=True, content=b"a=" + b"A" * ONE_MIB)
    assert_challenge(answer)


def test_a_form_of_exactly_64_kib_is_read(roomy: Env) -> None:
    fields = f"client_id={ISSUER}&scope=orders:read&pad=".encode()
    body = fields + b"A" * (FORM_LIMIT - len(fields))
    assert len(body) == FORM_LIMIT
    answer = send(
        roomy,
        "POST",
        BODY_ROUTES["device_authorization"][0],
        content=body,
        headers={**bearer(), "content-type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["user_code"]


def test_a_form_of_too_many_fields_is_invalid_request(roomy: Env) -> None:
    body = b"&".join(b"a=1" for _ in range(FORM_LIMIT // 4))
    for route in ("device_authorization", "token"):
        answer = send(
            roomy,
            "POST",
            BODY_ROUTES[route][0],
            content=body,
            headers={**bearer(), "content-type": "application/x-www-form-urlencoded"},
        )
        assert answer.status_code == 400
        assert answer.json()["error"] == "invalid_request"


# -- queries and paths --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "status"),
    [
        pytest.param("pageSize=" + "9" * ONE_MIB, 400, id="1MiB-pageSize"),
        pytest.param("a=1&" * (ONE_MIB // 4), 200, id="262144-fields"),
        pytest.param("pageSize=5&" * 100_000, 400, id="pageSize-100000-times"),
        pytest.param("%" * ONE_MIB, 200, id="1MiB-of-percent-signs"),
        pytest.param("pageSize=" + "%39" * 300_000, 400, id="percent-encoded-digits"),
    ],
)
def test_huge_list_tasks_queries_are_answered_quickly(roomy: Env, query: str, status: int) -> None:
    started = time.monotonic()
    answered, response = raw(roomy, "GET", "/a2a/acme/tasks?" + query, bearer())
    assert answered == status, response[:300]
    assert time.monotonic() - started < 5
    if status == 400:
        assert response.endswith(
            b'"message":"Invalid pageSize","details":[{"@type":"type.'
            b'googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_PARAMS",'
            b'"domain":"a2a-protocol.org"}]}}'
        )


def test_a_query_over_uvicorns_head_limit_is_a_400(default: Env) -> None:
    answer = send(default, "GET", "/a2a/acme/tasks?pageSize=" + "9" * 20_000, headers=bearer())
    assert answer.status_code in (400, 414, 431)
    assert_alive(default)


def test_a_huge_user_code_on_the_consent_page_is_a_400_page(roomy: Env) -> None:
    target = "/a2a/acme/oauth/consent?user_code=" + "B" * ONE_MIB
    status, response = raw(roomy, "GET", target, {"cookie": "sid=alice"})
    assert status == 400
    assert b"\r\nx-frame-options: DENY\r\n" in response.lower().replace(b"deny", b"DENY")


@pytest.mark.parametrize(
    ("path", "status"),
    [
        pytest.param("/a2a/acme/tasks/" + "x" * ONE_MIB, 404, id="task-id"),
        pytest.param("/a2a/" + "b" * ONE_MIB + "/message:send", 404, id="brand-id"),
        pytest.param("/a2a/acme/" + "x/" * (ONE_MIB // 2), 404, id="many-segments"),
        pytest.param("/a2a/acme/tasks/" + "%41" * 300_000, 404, id="encoded-task-id"),
    ],
)
def test_huge_paths_are_answered_quickly(roomy: Env, path: str, status: int) -> None:
    method = "POST" if path.endswith(":send") else "GET"
    started = time.monotonic()
    answered, response = raw(roomy, method, path, bearer())
    assert answered == status, response[:300]
    assert time.monotonic() - started < 5
    # Unauthenticated, a matched route is refused first, an unmatched one is plain 404.
    answered, _ = raw(roomy, method, path)
    assert answered in (401, 404)
