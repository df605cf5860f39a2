"""Issue 15 point 2: every consent page tells the person what the agent can do *now*.

Before this, a step-up the person declined ended on "Not connected. Nothing was shared. Your
personal agent cannot act for you" while the earlier grant stayed live; the success page
listed raw scope ids; the consent page said nothing of how long an approval lasts.
"""

from __future__ import annotations

from base64 import urlsafe_b64decode
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from tests.delegated.support import (
    SCOPES,
    Env,
    assert_page_headers,
    new_sub,
    page_text,
    serve_acme_and_globex,
    without_outcome,
)
from tests.support.parties import AGENT_NAME

READ, CANCEL = "orders:read", "orders:cancel"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with serve_acme_and_globex(tmp_path_factory.mktemp("truth")) as running:
        yield running


def test_a_declined_step_up_says_the_earlier_grant_is_still_live(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    first = env.connect("acme", READ, user=user, sub=sub)

    # Step-up: the agent asks for more; the consent page says what it already holds.
    started, action, session = env.open_consent("acme", CANCEL, user=user, sub=sub)
    consent = page_text(env.get(started["verification_uri_complete"], user=user).text)
    assert f"{AGENT_NAME} can already do this for you" in consent
    assert SCOPES[READ] in consent

    # The person unticks everything and presses Allow (a denial).
    declined = env.decide(action, session, [], user=user)
    assert declined.status_code == 303
    assert without_outcome(declined.headers["location"]).endswith("?status=denied")
    result = env.get(declined.headers["location"])
    assert result.status_code == 200
    assert_page_headers(result)
    text = page_text(result.text)
    assert "Nothing new allowed" in text
    assert "Your earlier approval still stands." in text
    assert "cannot act for you" not in text
    assert "Nothing was shared" not in text
    assert f"{AGENT_NAME} can now do this for you at Acme Shop until" in text
    assert SCOPES[READ] in text
    assert SCOPES[CANCEL] not in text
    # ...and it is the truth: the earlier grant still reads orders.
    answer = env.send("acme", "show my orders", token=first["access_token"], sub=sub)
    assert answer.status_code == 200, answer.text

    # Revoked later, the same result link no longer claims anything is live.
    assert env.provider.revoke_grant(first["grant_id"])
    text = page_text(env.get(declined.headers["location"]).text)
    assert f"{AGENT_NAME} cannot act for you at Acme Shop" in text
    assert SCOPES[READ] not in text
    assert "revoke" not in text  # nothing is live, so nothing to revoke


def test_the_success_page_lists_descriptions_not_scope_ids(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    _, action, session = env.open_consent("acme", f"{READ} {CANCEL}", user=user, sub=sub)
    decided = env.decide(action, session, [READ], user=user)
    result = env.get(decided.headers["location"])
    text = page_text(result.text)
    assert "<h1>Connected</h1>" in result.text
    assert SCOPES[READ] in text
    assert SCOPES[CANCEL] not in text
    assert READ not in text
    assert f"{AGENT_NAME} can now do this for you at Acme Shop until" in text


def test_a_declined_first_request_says_nothing_was_shared(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    _, action, session = env.open_consent("acme", READ, user=user, sub=sub)
    declined = env.decide(action, session, [READ], decision="deny", user=user)
    text = page_text(env.get(declined.headers["location"]).text)
    assert "Not connected" in text
    assert f"Nothing was shared. {AGENT_NAME} cannot act for you at Acme Shop." in text
    # Nothing was approved, so the page offers nothing to revoke (a person would wonder what
    # "it" is), only where to see every agent that can act for them.
    assert "revoke" not in text.lower()
    assert "Every agent that can act for you is listed on your connected agents page" in text
    assert f'href="{env.oauth("acme", "agents")}"' in result_html(env, declined.headers)


def result_html(env: Env, headers: Any) -> str:
    return env.get(headers["location"]).text


def test_the_consent_page_says_how_long_and_where_to_revoke(env: Env) -> None:
    started = env.device_authorization("acme", READ, sub=new_sub()).json()
    page = env.get(started["verification_uri_complete"], user=env.new_user())
    text = page_text(page.text)
    assert "This approval lasts 30 days." in text
    assert "You can revoke it at any time" in text
    assert "can already do this" not in text  # nothing granted yet


@pytest.mark.parametrize(
    "query",
    ["status=approved&scope=orders:read", "status=denied", "", "outcome=x.y.z"],
)
def test_a_crafted_result_link_claims_nothing(env: Env, query: str) -> None:
    result = env.get(env.oauth("acme", "connected") + "?" + query)
    assert result.status_code == 200
    assert_page_headers(result)
    text = page_text(result.text)
    assert "This page no longer shows a decision" in text
    assert "revoke" not in text.lower()
    assert "Connected" not in text
    assert SCOPES[READ] not in text


def test_an_outcome_is_only_read_by_its_own_brand(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    _, action, session = env.open_consent("acme", READ, user=user, sub=sub)
    location = env.decide(action, session, [READ], user=user).headers["location"]
    elsewhere = location.replace("/a2a/acme/", "/a2a/globex/")
    text = page_text(env.get(elsewhere).text)
    assert "This page no longer shows a decision" in text


def readable(location: str) -> str:
    """What anyone reading an access log learns from a result link: the URL, its query
    decoded, and every part of its `outcome` decoded as base64url (a JWS is signed, not
    encrypted: its claims are plain JSON)."""
    parts = [location, unquote(location)]
    for value in parse_qs(urlsplit(location).query).get("outcome", []):
        for segment in value.split("."):
            parts.append(urlsafe_b64decode(segment + "=" * (-len(segment) % 4)).decode("latin-1"))
    return "\n".join(parts)


@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_the_result_link_carries_nothing_personal(env: Env, decision: str) -> None:
    """The result link lands in every access log (uvicorn logs the query string): it names
    neither the person's account nor the agent's user, not even inside its signed outcome;
    the page finds them on the server, and still shows the decision."""
    sub, user = new_sub(), env.new_user()
    _, action, session = env.open_consent("acme", READ, user=user, sub=sub)
    location = env.decide(action, session, [READ], decision=decision, user=user).headers["location"]
    seen = readable(location)
    for personal in (env.account(user), sub, user):
        assert personal not in seen
    text = page_text(env.get(location).text)
    if decision == "allow":
        assert f"{AGENT_NAME} can now do this for you at Acme Shop until" in text
        assert SCOPES[READ] in text
    else:
        assert f"Nothing was shared. {AGENT_NAME} cannot act for you at Acme Shop." in text


def test_the_consent_page_shows_the_code_the_agent_shows(env: Env) -> None:
    """RFC 8628 §5.4: a link with the code in it (verification_uri_complete) skips typing the
    code, so the page shows it for the person to compare with their agent's: a link someone
    else started (remote phishing) then shows a code their own agent never showed them."""
    user = env.new_user()
    started, _, _ = env.open_consent("acme", READ, user=user, sub=new_sub())
    consent = env.get(started["verification_uri_complete"], user=user)
    text = page_text(consent.text)
    assert f"Check that your personal agent shows the code {started['user_code']}" in text
    assert "If it does not, or you did not ask for this, choose Deny." in text
