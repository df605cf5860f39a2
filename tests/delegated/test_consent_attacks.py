"""Attacks on the consent pages: CSRF, forged sessions, redirects, brute force, bad input."""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from collections.abc import Iterator
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk
from pactmw.provider.ratelimit import RateLimit
from pactmw.store import open_store
from tests.delegated.support import (
    LOGIN_URL,
    Env,
    assert_answered,
    assert_error_page,
    assert_page_headers,
    delegated_brand,
    form_action,
    hidden,
    jws_header,
    new_sub,
    serve,
    serve_acme_and_globex,
)
from tests.support.catalog import POT
from tests.support.net import free_port, loopback_client, unread_body_post


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with serve_acme_and_globex(tmp_path_factory.mktemp("attacks"), acme_name="Acme") as running:
        yield running


def assert_too_many(answer: httpx.Response) -> None:
    """The pages' rate limit: a page saying why and for how long (a browser shows a bare 429
    as a blank error), with `Retry-After` for anything that reads it."""
    assert_error_page(answer, 429)
    wait = int(answer.headers["retry-after"])
    assert 1 <= wait <= 60
    assert "Too many requests came from your network. Please try again in a minute." in (
        answer.text
    )


def assert_on_site(env: Env, answer: httpx.Response) -> None:
    """A redirect goes to the configured login URL or to the Provider itself, nowhere else."""
    location = answer.headers.get("location")
    if location is None:
        return
    assert location.startswith((LOGIN_URL + "&", env.base + "/")), location
    for values in parse_qs(urlsplit(location).query).values():
        for value in values:
            if "://" in value:
                assert value.startswith(env.oauth("acme", "consent?user_code=")), value
                assert "evil" not in value
    assert "evil" not in location


# -- CSRF and the decision's session --------------------------------------------------------------


def test_a_session_only_decides_for_the_person_it_was_shown_to(env: Env) -> None:
    sub = new_sub()
    started, action, session = env.open_consent("acme", "orders:read", user="alice", sub=sub)
    assert_error_page(env.decide(action, session, ["orders:read"], user="bob"), 403)
    assert_error_page(env.decide(action, session, ["orders:read"], user=None), 403)
    # The refusals changed nothing: the right person can still decide.
    assert env.decide(action, session, ["orders:read"], user="alice").status_code == 303
    tokens = env.poll("acme", started["device_code"], sub=sub).json()
    assert tokens["scope"] == "orders:read"


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "null",
        "http://127.0.0.1:1",
        "http://localhost",
        "",
    ],
)
def test_cross_site_posts_are_refused(env: Env, origin: str) -> None:
    _started, action, session = env.open_consent("acme", "orders:read", user="alice")
    refused = env.decide(action, session, ["orders:read"], user="alice", headers={"origin": origin})
    assert_error_page(refused, 403)
    same_site = env.decide(
        action, session, ["orders:read"], user="alice", headers={"origin": env.base}
    )
    assert same_site.status_code == 303


def test_the_origin_check_compares_origins_as_a_browser_writes_them(tmp_path: Any) -> None:
    """A browser sends its page's origin serialized: host in lower case, no default port. A
    `base_url` written otherwise ("http://LocalHost:8000", "https://shop.example:443") is the
    same origin, and its own consent pages must not be refused as cross-site."""
    port = free_port()
    served = f"http://127.0.0.1:{port}"
    with serve(
        f"sqlite:///{tmp_path}/origin.db",
        [delegated_brand("acme", "Acme", [])],
        base_url=f"http://LocalHost:{port}",
        port=port,
    ) as env:
        started = env.device_authorization("acme", "orders:read", sub=new_sub()).json()
        link = started["verification_uri_complete"].replace(env.base, served)
        page = env.get(link, user="alice")
        assert page.status_code == 200, page.text
        action, session = (
            form_action(page.text).replace(env.base, served),
            hidden(page.text, "session"),
        )
        assert action.startswith(served)
        browser = {"origin": f"http://localhost:{port}"}
        foreign = env.decide(
            action,
            session,
            ["orders:read"],
            user="alice",
            headers={"origin": f"http://localhost:{port + 1}"},
        )
        assert_error_page(foreign, 403)
        decided = env.decide(action, session, ["orders:read"], user="alice", headers=browser)
        assert decided.status_code == 303, decided.text


def test_broken_and_forged_sessions_are_refused(env: Env) -> None:
    started, action, session = env.open_consent("acme", "orders:read", user="alice")
    keys = env.provider.oauth.keys  # type: ignore[union-attr]
    claims = {
        "aud": action,
        "sub": "acct-alice",
        "label": "alice@example.com",
        "user_code": started["user_code"],
        "iat": int(time.time()),
        "exp": int(time.time()) + 600,
    }
    attacker = generate_private_jwk("ES256", kid=jws_header(session)["kid"])
    access_token = env.connect("acme", "orders:read", user="alice", sub=new_sub())["access_token"]
    bodies: dict[str, list[tuple[str, str]]] = {
        "no session": [("decision", "allow"), ("scope", "orders:read")],
        "empty session": [("session", "")],
        "garbled": [("session", "not-a-token")],
        "two sessions": [("session", session), ("session", session)],
        "tampered": [("session", session[:-4] + ("AAAA" if session[-4:] != "AAAA" else "BBBB"))],
        "attacker key": [("session", sign_compact(claims, attacker, typ="pact-consent+jwt"))],
        "wrong typ": [("session", sign_compact(claims, keys.signer, typ="JWT"))],
        "an access token": [("session", access_token)],
        "expired": [
            (
                "session",
                sign_compact(
                    {**claims, "exp": int(time.time()) - 1}, keys.signer, typ="pact-consent+jwt"
                ),
            )
        ],
        "other brand": [
            (
                "session",
                sign_compact(
                    {**claims, "aud": env.oauth("globex", "consent/decision")},
                    keys.signer,
                    typ="pact-consent+jwt",
                ),
            )
        ],
        "no user code": [
            (
                "session",
                sign_compact(
                    {k: v for k, v in claims.items() if k != "user_code"},
                    keys.signer,
                    typ="pact-consent+jwt",
                ),
            )
        ],
    }
    for name, form in bodies.items():
        form = [*form, ("decision", "allow"), ("scope", "orders:read")]
        answer = env.post(action, user="alice", **_form(form))
        assert answer.status_code == 400, (name, answer.status_code, answer.text)
        assert_error_page(answer, 400)
    # A session is bound to its Brand: acme's session does not work at globex's decision.
    other = env.decide(
        env.oauth("globex", "consent/decision"), session, ["orders:read"], user="alice"
    )
    assert_error_page(other, 400)
    # After all that, the real session still works.
    assert env.decide(action, session, ["orders:read"], user="alice").status_code == 303


def _form(fields: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "content": urlencode(fields).encode(),
        "headers": {"content-type": "application/x-www-form-urlencoded"},
    }


def test_a_decided_code_cannot_be_decided_again(env: Env) -> None:
    """Allow pressed twice, a form sent again after Back: the first answer stands and shows."""
    sub = new_sub()
    started, action, session = env.open_consent("acme", "orders:read", user="alice", sub=sub)
    assert env.decide(action, session, ["orders:read"], user="alice").status_code == 303
    assert_answered(env.decide(action, session, ["orders:read"], user="alice"), "Connected")
    assert_answered(env.decide(action, session, [], decision="deny", user="alice"), "Connected")
    # The page cannot be opened again either: the person is shown their answer...
    assert_answered(env.get(started["verification_uri_complete"], user="alice"), "Connected")
    # ...and anyone else learns nothing about the code.
    other = env.get(started["verification_uri_complete"], user="bob")
    assert_error_page(other, 400)
    assert "This code is unknown, expired or already used." in other.text
    assert env.poll("acme", started["device_code"], sub=sub).status_code == 200
    assert_answered(env.decide(action, session, [], decision="deny", user="alice"), "Connected")

    denied_sub = new_sub()
    started, action, session = env.open_consent("acme", "orders:read", user="alice", sub=denied_sub)
    assert env.decide(action, session, [], decision="deny", user="alice").status_code == 303
    assert_answered(env.decide(action, session, ["orders:read"], user="alice"), "Not connected")
    assert env.poll("acme", started["device_code"], sub=denied_sub).json()["error"] == (
        "access_denied"
    )


def assert_code_entry_again(answer: httpx.Response, error: str, code: str | None) -> None:
    """Refused (400), and the code entry form shown again with why, holding `code` to
    correct (None: an empty field): an error page there was a dead end."""
    assert_error_page(answer, 400)
    assert f'role="alert" id="code-error">{error}</p>' in answer.text
    assert 'aria-invalid="true"' in answer.text
    field = re.search(r"<input id=\"user_code\"[^>]*>", answer.text)
    assert field is not None, answer.text
    if code is None:
        assert "value=" not in field.group(0)
    else:
        assert f'value="{code}"' in field.group(0)


def test_a_code_that_does_not_work_shows_the_form_again_to_correct_it(env: Env) -> None:
    consent = env.oauth("acme", "consent")
    unknown = env.get(consent, params={"user_code": "bcdf ghjb"}, user="alice")
    assert_code_entry_again(unknown, "This code is unknown, expired or already used.", "BCDF-GHJB")
    malformed = env.get(consent, params={"user_code": "12-<b>"}, user="alice")
    assert_code_entry_again(malformed, "That is not a valid code.", "12-&lt;b&gt;")
    pasted = env.get(consent, params={"user_code": "X" * 33}, user="alice")
    assert_code_entry_again(pasted, "That is not a valid code.", None)
    # The corrected code goes on to its consent page.
    started = env.device_authorization("acme", "orders:read", sub=new_sub()).json()
    corrected = env.get(consent, params={"user_code": started["user_code"]}, user="alice")
    assert corrected.status_code == 200
    assert hidden(corrected.text, "session")


def test_simultaneous_decisions_decide_once(env: Env) -> None:
    sub = new_sub()
    started, action, session = env.open_consent("acme", "orders:read", user="alice", sub=sub)
    barrier = threading.Barrier(8)

    def decide(index: int) -> int:
        with loopback_client(timeout=30) as client:
            barrier.wait()
            answer = client.post(
                action,
                data={
                    "session": session,
                    "decision": "allow" if index % 2 else "deny",
                    "scope": "orders:read",
                },
                headers={"cookie": "sid=alice"},
            )
            return answer.status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(decide, range(8)))
    assert sorted(statuses) == [303] + [400] * 7, statuses
    assert env.poll("acme", started["device_code"], sub=sub).status_code in (200, 400)


class PausingStore:
    """A store whose next `approve_device_authorization` stops, before it runs, until the
    test releases it: the Allow has seen the code pending and is about to decide."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.armed = False
        self.upserted = threading.Event()
        self.release = threading.Event()

    def approve_device_authorization(self, **kwargs: Any) -> Any:
        if self.armed:
            self.armed = False
            self.upserted.set()
            self.release.wait(10)
        return self._inner.approve_device_authorization(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_denial_that_wins_the_race_grants_nothing(tmp_path: Any) -> None:
    store = PausingStore(open_store(f"sqlite:///{tmp_path}/race.db"))
    calls: list[tuple[str, str, dict[str, Any]]] = []
    with serve(store, [delegated_brand("acme", "Acme", calls)]) as env:
        sub = new_sub()
        before = env.connect("acme", "orders:read", user="alice", sub=sub)
        started, action, session = env.open_consent("acme", "orders:cancel", sub=sub)
        store.armed = True
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            allow = pool.submit(
                httpx.post,
                action,
                data={"session": session, "decision": "allow", "scope": "orders:cancel"},
                headers={"cookie": "sid=alice"},
            )
            assert store.upserted.wait(10)
            deny = env.decide(action, session, [], decision="deny", user="alice")
            store.release.set()
            allowed = allow.result()
        assert deny.status_code == 303
        assert allowed.status_code == 400  # the Allow lost...
        assert env.poll("acme", started["device_code"], sub=sub).json()["error"] == (
            "access_denied"
        )
        # ...and the person's "Deny" left the grant as it was: the next refresh of the
        # earlier token does not carry orders:cancel.
        refreshed = env.refresh("acme", before["refresh_token"], sub=sub).json()
        assert refreshed["scope"] == "orders:read"


# -- every page is unframeable; nothing redirects off-site ---------------------------------------


def test_every_consent_page_has_the_security_headers(env: Env) -> None:
    consent = env.oauth("acme", "consent")
    assert_page_headers(env.get(consent, user="alice"))  # code entry
    assert 'name="user_code"' in env.get(consent, user="alice").text
    assert_error_page(env.get(consent, params={"user_code": "AEIO-UAEI"}, user="alice"), 400)
    assert_error_page(env.get(consent, params={"user_code": "BCDF-GHJK"}, user="alice"), 400)
    started = env.device_authorization("acme", "orders:read").json()
    assert_page_headers(env.get(started["verification_uri_complete"], user="alice"))
    for query in ("status=approved&scope=orders:read", "status=denied", ""):
        result = env.get(env.oauth("acme", "connected") + "?" + query)
        assert result.status_code == 200
        assert_page_headers(result)
    # Same-app consent takes no POST (that is brand mode's assertion).
    assert_error_page(env.post(consent, user="alice", data={"assertion": "x"}), 405)
    # RFC 9110 §15.5.6: a 405 names the methods the page takes.
    assert env.post(consent, user="alice", data={"assertion": "x"}).headers["allow"] == "GET, HEAD"
    assert_error_page(env.post(env.oauth("acme", "consent/decision"), user="alice", data={}), 400)


@pytest.mark.parametrize(
    "query",
    [
        {"user_code": "BCDF-GHJK", "next": "https://evil.example/"},
        {"user_code": "bcdf ghjk", "return_to": "https://evil.example/"},
        {"user_code": "B.C.D.F-G.H.J.K"},
        {"user_code": "https://evil.example/"},
        {"user_code": "//evil.example/BCDFGHJK"},
        {"user_code": "BCDF-GHJK\r\nLocation: https://evil.example"},
        {"user_code": "BCDF-GHJK&next=https://evil.example"},
        {"user_code": "BCDF-GHJK?next=https://evil.example"},
        {"next": "https://evil.example/", "return_to": "https://evil.example/"},
        {"user_code": "\\\\evil.example"},
    ],
)
def test_consent_never_redirects_off_site(env: Env, query: dict[str, str]) -> None:
    consent = env.oauth("acme", "consent")
    for user in (None, "alice"):
        answer = env.get(consent, params=query, user=user)
        assert answer.status_code in (200, 303, 400), answer.text
        assert_on_site(env, answer)
        if answer.status_code == 303:
            (target,) = parse_qs(urlsplit(answer.headers["location"]).query)["next"]
            assert target == consent + "?user_code=BCDF-GHJK"
            assert answer.headers["location"].startswith(LOGIN_URL + "&next=")
        else:
            assert_page_headers(answer)


def test_a_forged_host_header_does_not_move_the_redirect(env: Env) -> None:
    started = env.device_authorization("acme", "orders:read").json()
    code = started["user_code"]
    answer = env.http.get(
        env.oauth("acme", "consent"),
        params={"user_code": code},
        headers={"host": "evil.example", "x-forwarded-host": "evil.example"},
    )
    assert answer.status_code == 303
    (target,) = parse_qs(urlsplit(answer.headers["location"]).query)["next"]
    assert target == f"{env.oauth('acme', 'consent')}?user_code={code}"
    page = env.http.get(
        started["verification_uri_complete"],
        headers={"host": "evil.example", "cookie": "sid=alice"},
    )
    assert f'action="{env.oauth("acme", "consent/decision")}"' in page.text
    assert "evil" not in page.text


def test_decision_and_result_stay_on_site(env: Env) -> None:
    _started, action, session = env.open_consent("acme", "orders:read", user="alice")
    decided = env.post(
        action + "?next=https://evil.example",
        user="alice",
        data={
            "session": session,
            "decision": "allow",
            "scope": "orders:read",
            "next": "https://evil.example",
            "redirect_uri": "https://evil.example",
        },
    )
    assert decided.status_code == 303
    assert decided.headers["location"].startswith(env.oauth("acme", "connected") + "?")
    assert "evil" not in decided.headers["location"]
    # The result page reflects nothing from its query: only a signed outcome counts.
    result = env.get(
        env.oauth("acme", "connected"),
        params={"status": "approved", "scope": "<script>alert(1)</script> orders:read"},
    )
    assert "<script>alert" not in result.text
    assert "orders:read" not in result.text
    assert "no longer shows a decision" in result.text


# -- user-code guessing ---------------------------------------------------------------------------


def test_user_code_guessing_hits_the_per_address_limit(tmp_path: Any) -> None:
    # The provider's clock starts at the beginning of a rate-limit window, so the 10 allowed
    # requests never straddle a window boundary.
    started_at = time.time()

    def clock() -> float:
        return 1_800_000_000.0 + (time.time() - started_at)

    calls: list[tuple[str, str, dict[str, Any]]] = []
    with serve(
        f"sqlite:///{tmp_path}/limit.db",
        [delegated_brand("acme", "Acme", calls)],
        consent_rate_limit=RateLimit(per_agent=10, window=60),
        clock=clock,
    ) as env:
        real = env.device_authorization("acme", "orders:read").json()
        consent = env.oauth("acme", "consent")
        guesses = ["BCDF-GHJ" + letter for letter in "BCDFGHJKLM"]
        for guess in guesses:
            if guess == real["user_code"]:
                continue
            answer = env.get(consent, params={"user_code": guess}, user="alice")
            assert answer.status_code == 400
        while True:  # top up to exactly 10 counted requests
            answer = env.get(consent, params={"user_code": "zzzz"}, user="alice")
            if answer.status_code == 429:
                break
            assert answer.status_code == 400
        assert_too_many(answer)
        # Now even the right code, the code entry page and the decision are refused.
        assert_too_many(env.get(real["verification_uri_complete"], user="alice"))
        assert_too_many(env.get(consent, user="alice"))
        assert_too_many(env.post(env.oauth("acme", "consent/decision"), data={}))
        # Another client address is not affected.
        with loopback_client(local_address="127.0.0.2", timeout=30) as other:
            page = other.get(real["verification_uri_complete"], headers={"cookie": "sid=alice"})
            assert page.status_code == 200
            assert hidden(page.text, "session")
        # The personal agent's endpoints are not the consent limiter's business.
        assert env.device_authorization("acme", "orders:read").status_code == 200


# -- malformed input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe\xfd",
        b"session=\xff",
        b"session=%ff%fe&decision=allow",
        b"%%%",
        b"session=%00",
        b"=&=&&",
        b"&".join(b"f%d=1" % i for i in range(200)),
        b'{"session": "x"}',
        b"session=" + b"A" * 20_000,
        b"session=a.b.c&decision=allow&scope=\x00",
    ],
)
def test_malformed_decision_bodies_never_500(env: Env, body: bytes) -> None:
    for content_type in ("application/x-www-form-urlencoded", "application/json", "text/plain"):
        answer = env.post(
            env.oauth("acme", "consent/decision"),
            user="alice",
            content=body,
            headers={"content-type": content_type},
        )
        assert answer.status_code == 400, (body[:40], answer.status_code)
        assert_page_headers(answer)


@pytest.mark.parametrize(
    "body", [b"session=\xff", b"&".join(b"f%d=1" % i for i in range(200))], ids=["utf8", "fields"]
)
@pytest.mark.parametrize("path", ["consent/decision", "agents"])
def test_an_unreadable_form_is_refused_in_words_a_catalog_translates(
    env: Env, path: str, body: bytes
) -> None:
    """The pages translate every refusal through their catalog; an unreadable form showed the
    OAuth endpoints' "the body is not a form", which no catalog lists (and reads as jargon)."""
    answer = env.post(
        env.oauth("acme", path),
        user="alice",
        content=body,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert_error_page(answer, 400)
    message = re.search(r"</h1><p>(.*?)</p>", answer.text)
    assert message is not None, answer.text
    assert f'msgid "{unescape(message.group(1))}"' in POT.read_text()


def test_oversized_bodies_are_refused_not_read(env: Env) -> None:
    # Not read, the body goes on a connection of its own, out of the shared client's pool.
    answer = unread_body_post(
        env.http,
        env.oauth("acme", "consent/decision"),
        content=b"session=" + b"A" * 70_000,
        headers={**Env.cookie("alice"), "content-type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 413


@pytest.mark.parametrize(
    "query",
    [b"user_code=%ff%fe", b"user_code=%00%00", b"user_code=" + b"B" * 5000, b"%%", b"user_code"],
)
def test_malformed_consent_queries_never_500(env: Env, query: bytes) -> None:
    url = httpx.URL(env.oauth("acme", "consent")).copy_with(query=query)
    for user in (None, "alice"):
        answer = env.get(str(url), user=user)
        assert answer.status_code in (200, 400), answer.status_code
        assert_page_headers(answer)


@pytest.mark.parametrize("path", ["device_authorization", "token"])
@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe",
        b"client_id=https%3A%2F%2Fpa.example&scope=\xff",
        b"&".join(b"f%d=1" % i for i in range(200)),
        b"client_id=https%3A%2F%2Fpa.example&grant_type=refresh_token&grant_type=refresh_token",
        b"client_id=https%3A%2F%2Fpa.example&grant_type=refresh_token&refresh_token=%00",
    ],
)
def test_malformed_oauth_forms_are_invalid_request(env: Env, path: str, body: bytes) -> None:
    answer = env.http.post(
        env.oauth("acme", path),
        content=body,
        headers={**env.pa(), "content-type": "application/x-www-form-urlencoded"},
    )
    assert 400 <= answer.status_code < 500, answer.status_code
    assert answer.json()["error"] in ("invalid_request", "invalid_client", "invalid_scope")


def test_a_code_that_no_longer_works_says_where_a_new_one_comes_from(env: Env) -> None:
    """An expired code (RFC 8628: minutes) came back in the field with "unknown, expired or
    already used" and a Continue button that could only fail again: nothing said the way on
    is a new code from the personal agent, as device activation pages say."""
    consent = env.oauth("acme", "consent")
    expired = env.get(consent, params={"user_code": "bcdf ghjb"}, user="alice")
    assert_code_entry_again(expired, "This code is unknown, expired or already used.", "BCDF-GHJB")
    help_text = re.search(r'<p id="code-help">([^<]*)</p>', expired.text)
    assert help_text is not None, expired.text
    assert help_text.group(1) == (
        "A code works once, for a few minutes. If yours no longer works, ask your personal"
        " agent for a new one."
    )
    field = re.search(r"<input id=\"user_code\"[^>]*>", expired.text)
    assert field is not None
    assert 'aria-describedby="code-error code-help"' in field.group(0)
