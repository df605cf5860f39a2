"""PACT identity through every adapter, over real HTTP (issue "Foundation" §6).

The same cases run against each server in `conftest.SERVER_NAMES`; the `target` fixture says
how a server differs (its decorated routes, what its echo endpoint adds). Every refusal must
be the protocol's challenge: status 401, exactly one `WWW-Authenticate: Bearer realm="a2a"`,
an empty body and never the A2A content type (pact-provider.md §1.3).

Time: tokens carry whole seconds and the servers share the test's clock (one machine), so the
boundary cases are exact: see `test_iat_in_the_future`. The key-rotation case runs last and
relies on the warm-up fetch at server start being at least 30 s old (the refetch cooldown).
"""

from __future__ import annotations

import math
import secrets
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from pactmw.protocols.identity import actor_id_for
from tests.adapters.conftest import (
    ISS_CACHED,
    ISS_COLD,
    ISS_DISABLED,
    ISS_FLOOD,
    ISS_FRESH,
    ISS_HANG,
    ISS_MAIN,
    ISS_OTHER,
    ISS_ROTATING,
    JWKS_TIMEOUT,
    AgentKeys,
    Target,
)
from tests.adapters.tokens import AgentKey, claims, forge_hs256, forge_unsigned, jwks, missing
from tests.support.jwks_server import Mode
from tests.support.parties import AUDIENCE

pytestmark = pytest.mark.timeout(90)

CHALLENGE = 'Bearer realm="a2a"'


def assert_challenge(target: Target, response: httpx.Response) -> None:
    """The PACT 401: exact challenge, empty body, no A2A content type."""
    assert response.status_code == 401, (response.status_code, response.text[:300])
    assert response.headers.get_list("www-authenticate") == [CHALLENGE]
    assert response.content == b""
    assert "application/a2a+json" not in response.headers.get("content-type", "")
    assert response.headers.get("content-length", "0") == "0"
    target.check_response(response)


def assert_caller(
    target: Target, response: httpx.Response, issuer: str, sub: str = "user-42"
) -> None:
    """A 200 from an echo endpoint that saw the verified caller `(issuer, sub)`."""
    assert response.status_code == 200, (response.status_code, response.text[:300])
    body = response.json()
    assert body["issuer"] == issuer
    assert body["sub"] == sub
    assert body["actor_id"] == actor_id_for(issuer, sub)
    target.check_echo(response)
    target.check_response(response)


# -- accepted tokens ---------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_valid_token_is_accepted_and_the_endpoint_sees_the_caller(
    target: Target, agent_keys: AgentKeys, alg: str
) -> None:
    key = agent_keys.es if alg == "ES256" else agent_keys.rs
    token = key.sign(claims(ISS_MAIN, sub=f"user-{alg}"))
    for path in target.all_protected:
        assert_caller(target, target.get(path, token), ISS_MAIN, f"user-{alg}")
        assert_caller(target, target.post(path, b'{"q": 1}', token), ISS_MAIN, f"user-{alg}")
    # The scheme name is case-insensitive (RFC 7235).
    response = target.get(target.protected, headers={"Authorization": f"bearer {token}"})
    assert_caller(target, response, ISS_MAIN, f"user-{alg}")


def test_a_token_may_be_reused_until_it_expires(target: Target, agent_keys: AgentKeys) -> None:
    # No jti replay tracking (§1.1 #13): the conformance suite reuses one token.
    token = agent_keys.es.sign(claims(ISS_MAIN, jti="reused"))
    for _ in range(3):
        assert_caller(target, target.get(target.protected, token), ISS_MAIN)


# -- refused before any key is looked up -------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Token abc.def.ghi",
        "Bearer not-a-jwt",
        "Bearer a.b.c",
        "Bearer a.b.c extra",
    ],
)
def test_missing_or_malformed_authorization_gets_the_challenge(
    target: Target, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    for path in target.all_protected:
        assert_challenge(target, target.client.get(path, headers=headers))


def test_two_authorization_headers_are_refused(target: Target, agent_keys: AgentKeys) -> None:
    # Servers join or pick repeated headers differently: an ambiguous credential is refused.
    token = agent_keys.es.sign(claims(ISS_MAIN))
    headers = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    assert_challenge(target, target.client.get(target.protected, headers=headers))


@pytest.mark.parametrize("pem_of", ["rs", "es"])
def test_hs256_keyed_with_the_public_pem_is_refused_without_a_fetch(
    target: Target, agent_keys: AgentKeys, pem_of: str
) -> None:
    key: AgentKey = getattr(agent_keys, pem_of)
    before = target.keys_server.hits
    for issuer in (ISS_FRESH, ISS_MAIN):
        payload = claims(issuer)
        for secret in (key.public_pem(), key.public_pem().strip()):
            token = forge_hs256(payload, secret, key.kid)
            for path in target.all_protected:
                assert_challenge(target, target.get(path, token))
    after = target.keys_server.hits
    # `alg` is checked before any key lookup: the never-fetched URI is still untouched.
    assert after[target.jwks_path("fresh")] == 0
    assert after[target.jwks_path("main")] == before[target.jwks_path("main")]


@pytest.mark.parametrize("alg", ["none", "None", "NONE", "nOnE"])
def test_unsigned_tokens_are_refused_without_a_fetch(
    target: Target, agent_keys: AgentKeys, alg: str
) -> None:
    for issuer in (ISS_FRESH, ISS_MAIN):
        for kid in (None, agent_keys.es.kid):
            token = forge_unsigned(claims(issuer), alg, kid)
            for path in target.all_protected:
                assert_challenge(target, target.get(path, token))
    assert target.keys_server.hits[target.jwks_path("fresh")] == 0


def test_eddsa_is_refused_even_with_its_key_published(
    target: Target, agent_keys: AgentKeys
) -> None:
    # The Ed25519 key is in the agent's JWKS, but PACT identity allows ES256 and RS256 only.
    for issuer in (ISS_FRESH, ISS_MAIN):
        token = agent_keys.ed.sign(claims(issuer))
        for path in target.all_protected:
            assert_challenge(target, target.get(path, token))
    assert target.keys_server.hits[target.jwks_path("fresh")] == 0


# -- issuer ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "issuer",
    [
        "https://unknown-pa.example",
        "https://PA.example",  # exact match only
        "https://pa.example/",
        ISS_DISABLED,  # registered, same JWKS, enabled = False
    ],
)
def test_unknown_or_disabled_issuer_is_refused_without_a_fetch(
    target: Target, agent_keys: AgentKeys, issuer: str
) -> None:
    before = target.keys_server.total_hits
    token = agent_keys.es.sign(claims(issuer))
    for path in target.all_protected:
        assert_challenge(target, target.get(path, token))
    assert target.keys_server.total_hits == before


def test_a_key_of_another_issuer_is_refused(target: Target, agent_keys: AgentKeys) -> None:
    other = agent_keys.other
    # The main agent's key, claiming to be the other agent (its kid is not in that JWKS) ...
    assert_challenge(target, target.get(target.protected, agent_keys.es.sign(claims(ISS_OTHER))))
    # ... or borrowing the other agent's kid (the signature does not verify) ...
    token = agent_keys.es.sign(claims(ISS_OTHER), kid=other.kid)
    assert_challenge(target, target.get(target.protected, token))
    # ... and the other agent's key claiming to be the main agent.
    assert_challenge(target, target.get(target.protected, other.sign(claims(ISS_MAIN))))
    # The other agent itself is fine.
    assert_caller(target, target.get(target.protected, other.sign(claims(ISS_OTHER))), ISS_OTHER)


# -- claims ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "aud",
    [
        f"{AUDIENCE}/brand-1",  # the card/interface URL is not the audience (§1.1 #8)
        "https://provider.example/a2a/",
        [AUDIENCE],  # an array is refused even when it holds the audience
        [AUDIENCE, "https://elsewhere.example"],
        "",
    ],
)
def test_audience_mismatch_is_refused(target: Target, agent_keys: AgentKeys, aud: object) -> None:
    token = agent_keys.es.sign(claims(ISS_MAIN, aud=aud))
    for path in target.all_protected:
        assert_challenge(target, target.get(path, token))


@pytest.mark.parametrize(
    "overrides",
    [
        {"sub": missing()},
        {"iat": missing()},
        {"exp": missing()},
        {"aud": missing()},
        {"iss": missing()},
        {"sub": ""},
        {"sub": 42},
        {"iat": "now"},
        {"exp": True},
    ],
    ids=[
        "no-sub",
        "no-iat",
        "no-exp",
        "no-aud",
        "no-iss",
        "empty-sub",
        "int-sub",
        "str-iat",
        "bool-exp",
    ],
)
def test_missing_or_mistyped_claims_are_refused(
    target: Target, agent_keys: AgentKeys, overrides: dict[str, Any]
) -> None:
    token = agent_keys.es.sign(claims(ISS_MAIN, **overrides))
    for path in target.all_protected:
        assert_challenge(target, target.get(path, token))


def test_iat_in_the_future(target: Target, agent_keys: AgentKeys) -> None:
    """The rule is `iat > now + 30` refused; `now + 30` passes (§1.1 #12).

    Server and test read the same clock, and the server reads it after the token is made.
    `iat = ceil(t) + 31` is more than 30 s ahead of the server's `now` as long as the request
    is verified within a second of `t`. `iat = floor(t) + 30` is at most 30 s ahead of any
    later `now`, so it is accepted whatever the fraction of the second: no tolerance is added
    by the test. (Whether exactly `now + 30` passes, `>` against `>=`, cannot be pinned over
    a real clock; that belongs to the verifier's unit tests with an injected clock.)
    """
    t = time.time()
    late = math.ceil(t) + 31
    token = agent_keys.es.sign(claims(ISS_MAIN, iat=late, exp=late + 120))
    assert_challenge(target, target.get(target.protected, token))

    edge = math.floor(time.time()) + 30
    token = agent_keys.es.sign(claims(ISS_MAIN, iat=edge, exp=edge + 120))
    assert_caller(target, target.get(target.protected, token), ISS_MAIN)


def test_expiry_allows_30_seconds_of_skew_and_no_more(
    target: Target, agent_keys: AgentKeys
) -> None:
    now = math.floor(time.time())
    # The suite's case: issued 200 s ago, expired 100 s ago.
    token = agent_keys.es.sign(claims(ISS_MAIN, iat=now - 200, exp=now - 100))
    assert_challenge(target, target.get(target.protected, token))
    # Expired 31 s ago: `exp <= now - 30` at any later `now`.
    token = agent_keys.es.sign(claims(ISS_MAIN, iat=now - 131, exp=now - 31))
    for path in target.all_protected:
        assert_challenge(target, target.get(path, token))
    # Expired 10 s ago: inside the skew, accepted (the server would need 20 s to refuse it).
    token = agent_keys.es.sign(claims(ISS_MAIN, iat=now - 110, exp=now - 10))
    assert_caller(target, target.get(target.protected, token), ISS_MAIN)


def test_lifetime_over_300_seconds_is_refused(target: Target, agent_keys: AgentKeys) -> None:
    now = math.floor(time.time())
    token = agent_keys.es.sign(claims(ISS_MAIN, iat=now, exp=now + 301))
    for path in target.all_protected:
        assert_challenge(target, target.get(path, token))
    token = agent_keys.es.sign(claims(ISS_MAIN, iat=now, exp=now + 300))
    assert_caller(target, target.get(target.protected, token), ISS_MAIN)


# -- the JWKS: cooldown, downtime, timeouts ----------------------------------------------------


def test_unknown_kid_flood_fetches_at_most_once_per_cooldown(
    target: Target, agent_keys: AgentKeys
) -> None:
    path = target.jwks_path("flood")
    assert target.keys_server.hits[path] == 0
    tokens = [
        agent_keys.es.sign(claims(ISS_FLOOD), kid=f"made-up-{secrets.token_hex(8)}")
        for _ in range(24)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(lambda tok: target.get(target.protected, tok), tokens))
    for response in responses:
        assert_challenge(target, response)
    # The first unknown kid fetched the (never fetched) URI; the other 23 fell in the cooldown.
    assert target.keys_server.hits[path] == 1

    # Even a genuinely new key is not fetched inside the cooldown: still one hit, still 401.
    fresh = AgentKey.generate("ES256", "flood-new")
    target.keys_server.set_json(path, jwks(agent_keys.es, agent_keys.rs, fresh))
    assert_challenge(target, target.get(target.protected, fresh.sign(claims(ISS_FLOOD))))
    # The cached keys keep working, without a fetch.
    assert_caller(
        target, target.get(target.protected, agent_keys.es.sign(claims(ISS_FLOOD))), ISS_FLOOD
    )
    assert target.keys_server.hits[path] == 1


def test_jwks_down_cached_key_accepted_unknown_key_refused(
    target: Target, agent_keys: AgentKeys
) -> None:
    down = target.down_server
    assert down.hits["/cached.json"] == 1  # the warm-up fetch
    down.mode = Mode.DOWN
    try:
        good = agent_keys.es.sign(claims(ISS_CACHED))
        for path in target.all_protected:
            assert_caller(target, target.get(path, good), ISS_CACHED)
        # An agent whose keys were never fetched: 401 (not 500), at once (connection refused).
        started = time.monotonic()
        assert_challenge(target, target.get(target.protected, agent_keys.es.sign(claims(ISS_COLD))))
        assert time.monotonic() - started < JWKS_TIMEOUT * 2
        # A kid the cache does not hold, on the down server: 401.
        token = agent_keys.rs.sign(claims(ISS_CACHED), kid="not-cached")
        assert_challenge(target, target.get(target.protected, token))
    finally:
        down.mode = Mode.OK
    assert down.hits["/cold.json"] == 0


def test_jwks_that_never_answers_gives_401_within_the_timeout(
    target: Target, agent_keys: AgentKeys
) -> None:
    token = agent_keys.es.sign(claims(ISS_HANG))
    started = time.monotonic()
    response = target.get(target.protected, token)
    elapsed = time.monotonic() - started
    assert_challenge(target, response)
    assert target.slow_server.hits[target.hang_path()] == 1  # it did try
    # The fetch gives up after `jwks_timeout`, never waits out the server's 60 s: the bound is
    # half of that, so a loaded machine cannot fail it and a hang still does.
    assert elapsed < 30.0, elapsed
    # A retry inside the cooldown does not wait again.
    started = time.monotonic()
    assert_challenge(target, target.get(target.protected, token))
    assert time.monotonic() - started < JWKS_TIMEOUT
    assert target.slow_server.hits[target.hang_path()] == 1


# -- request bodies ----------------------------------------------------------------------------


def test_unauthenticated_post_with_broken_body_gets_401_not_400(
    target: Target, agent_keys: AgentKeys
) -> None:
    for path in target.all_protected:
        assert_challenge(target, target.post(path, b"{"))
        expired = claims(ISS_MAIN, iat=int(time.time()) - 400, exp=int(time.time()) - 300)
        assert_challenge(target, target.post(path, b"{", agent_keys.es.sign(expired)))
    # The endpoints do parse bodies: once authenticated, the same body is a 400.
    token = agent_keys.es.sign(claims(ISS_MAIN))
    for path in target.all_protected:
        response = target.post(path, b"{", token)
        assert response.status_code == 400, (path, response.status_code, response.text[:200])


def _raw_request(target: Target, head: bytes, body_part: bytes) -> socket.socket:
    port = int(target.base_url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(head + body_part)
    return sock


def _read_response_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_refusal_does_not_wait_for_the_body(target: Target) -> None:
    """Authentication happens before the body is read: the 401 leaves with the body unsent.

    The request announces 100 000 bytes and sends one (`{`). Where the server itself buffers
    the body before any application code runs (Django's ASGI handler does), the rest is sent
    and the answer must still be the challenge.
    """
    for path in target.all_protected:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\nConnection: close\r\n\r\n"
        ).encode()
        sock = _raw_request(target, head, b"{")
        try:
            if target.answers_before_body:
                sock.settimeout(5)
                received = _read_response_head(sock)
            else:
                sock.settimeout(1)
                try:
                    received = _read_response_head(sock)
                except TimeoutError:
                    sock.settimeout(5)
                    sock.sendall(b" " * 99_999)
                    received = _read_response_head(sock)
        finally:
            sock.close()
        status_line, _, rest = received.partition(b"\r\n")
        assert status_line.split(b" ")[1] == b"401", received[:300]
        headers = [line.split(b":", 1) for line in rest.split(b"\r\n") if b":" in line]
        challenges = [v.strip() for k, v in headers if k.strip().lower() == b"www-authenticate"]
        assert challenges == [CHALLENGE.encode()]


# -- what the middleware leaves alone, what the decorators guard -------------------------------


def test_unprotected_paths_are_untouched(target: Target) -> None:
    response = target.client.get(target.public)
    assert response.status_code == 200, response.text[:300]
    assert response.json() == {"public": True, "actor_id": None}
    target.check_response(response)


@pytest.mark.parametrize("path", ["/A2A/echo", "/%61%32%61/echo", "/a2a%2Fecho", "//a2a/echo"])
def test_prefix_lookalikes_are_never_served_without_a_token(target: Target, path: str) -> None:
    response = target.client.get(path)
    assert response.status_code != 200, (path, response.text[:300])
    if response.status_code == 401:
        assert_challenge(target, response)


def test_decorators_protect_single_views_outside_the_prefix(
    target: Target, agent_keys: AgentKeys
) -> None:
    now = math.floor(time.time())
    expired = agent_keys.rs.sign(claims(ISS_MAIN, iat=now - 200, exp=now - 100))
    good = agent_keys.rs.sign(claims(ISS_MAIN, sub="decorated-user"))
    for path in target.decorated:
        assert not path.startswith("/a2a/")
        assert_challenge(target, target.client.get(path))
        assert_challenge(target, target.get(path, expired))
        assert_caller(target, target.get(path, good), ISS_MAIN, "decorated-user")


# -- key rotation (last: it needs the warm-up fetch to be 30 s old) ----------------------------


def test_key_rotation_is_picked_up_after_one_refetch(target: Target, agent_keys: AgentKeys) -> None:
    """A new key under a new kid is accepted after exactly one refetch.

    The rotating agent's URI was fetched once, at server start (`warmed_at`); the refetch on
    an unknown kid is allowed once that fetch is 30 s old, so this case waits out whatever is
    left of the cooldown (nothing, when the module took longer than that).
    """
    path = target.jwks_path("rotating")
    assert target.keys_server.hits[path] == 1
    remaining = target.warmed_at + 30.5 - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
    target.keys_server.set_json(path, jwks(agent_keys.rot1, agent_keys.rot2))
    new_token = agent_keys.rot2.sign(claims(ISS_ROTATING))
    assert_caller(target, target.get(target.protected, new_token), ISS_ROTATING)
    assert target.keys_server.hits[path] == 2
    # Both keys are now cached: no further fetches.
    assert_caller(target, target.get(target.protected, new_token), ISS_ROTATING)
    old_token = agent_keys.rot1.sign(claims(ISS_ROTATING))
    assert_caller(target, target.get(target.protected, old_token), ISS_ROTATING)
    assert target.keys_server.hits[path] == 2
