"""The connected agents page in same-app mode, over HTTP: the host app's signed-in user, the
audit trail of a person's revocation, and the checks that bind a Revoke to its person."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from tests.delegated.support import (
    LOGIN_URL,
    SCOPES,
    Env,
    assert_page_headers,
    hidden,
    new_sub,
    page_text,
    serve_acme_and_globex,
)
from tests.support.parties import AGENT_NAME, ISSUER


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with serve_acme_and_globex(tmp_path_factory.mktemp("agents")) as running:
        yield running


def test_signed_out_the_page_sends_the_person_to_sign_in(env: Env) -> None:
    page = env.oauth("acme", "agents")
    answer = env.get(page)
    assert answer.status_code == 303
    assert answer.headers["location"] == LOGIN_URL + "&" + urlencode({"next": page})


def test_a_person_revokes_their_agent_and_it_is_audited(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pactmw.audit")
    sub, user = new_sub(), env.new_user("jane")
    tokens = env.connect("acme", "orders:read", user=user, sub=sub)
    elsewhere = env.connect("globex", "orders:read", user=user, sub=sub)
    page = env.get(env.oauth("acme", "agents"), user=user)
    assert page.status_code == 200
    assert_page_headers(page)
    text = page_text(page.text)
    assert f"signed in to Acme Shop as {user}@example.com" in text
    assert AGENT_NAME in text
    assert SCOPES["orders:read"] in text
    assert "Last used Not yet" in text  # no request under the grant so far
    assert text.count(f"Revoke {AGENT_NAME}") == 1  # the Globex grant is another Brand's

    # Another signed-in person cannot use Jane's page (its session names Jane).
    form = {"session": hidden(page.text, "session"), "grant": tokens["grant_id"]}
    form["action"] = "revoke"
    assert env.post(env.oauth("acme", "agents"), user=env.new_user(), data=form).status_code == 403
    # Nor can the page of one Brand revoke a grant at another.
    foreign = {**form, "grant": elsewhere["grant_id"]}
    assert env.post(env.oauth("acme", "agents"), user=user, data=foreign).status_code == 404

    done = env.post(env.oauth("acme", "agents"), user=user, data=form)
    assert done.status_code == 200
    assert f"{AGENT_NAME} can no longer act for you." in page_text(done.text)
    events = env.events("agent.grant_revoked", grant_id=tokens["grant_id"])
    assert [(e.issuer, e.account, e.reason) for e in events] == [
        (ISSUER, env.account(user), "revoked by the person")
    ]
    assert any(
        "agent.grant_revoked" in r.getMessage() and tokens["grant_id"] in r.getMessage()
        for r in caplog.records
    )
    # The agent's next request fails; its grant at Globex still works.
    answer = env.send("acme", "show my orders", token=tokens["access_token"], sub=sub)
    assert answer.status_code == 401
    assert env.send("globex", "show", token=elsewhere["access_token"], sub=sub).status_code == 200
    # Revoking again is harmless and not audited twice.
    again = env.post(env.oauth("acme", "agents"), user=user, data=form)
    assert again.status_code == 200
    assert len(env.events("agent.grant_revoked", grant_id=tokens["grant_id"])) == 1


def test_the_page_takes_nothing_but_a_revoke(env: Env) -> None:
    user = env.new_user()
    env.connect("acme", "orders:read", user=user, sub=new_sub())
    page = env.get(env.oauth("acme", "agents"), user=user)
    session = hidden(page.text, "session")
    url = env.oauth("acme", "agents")
    assert env.post(url, user=user, data={"session": session}).status_code == 400
    assert env.post(url, user=user, data={"session": "x", "action": "revoke"}).status_code == 400
    assert env.post(url, user=user, content=b"\xff\xfe").status_code == 400
    # Same-app mode takes no Brand assertion.
    assert env.post(url, user=user, data={"assertion": "x"}).status_code == 400
