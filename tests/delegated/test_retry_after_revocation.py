"""Retries of a delegated message after its grant is revoked, over a real server (issue 15,
point 6): a stored reply made under a delegation holds account data and a receipt naming its
grant, so it is returned only with a valid delegation token of that same grant.

Without such a token the retry gets what a new turn would get with the caller's current
credentials: the step-up while the grant is live (approving widens that grant, so its token
then gets the reply), INVALID_PARAMS once the grant has ended (no token of it can come back),
401 `invalid_token` for the revoked token itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pactmw.provider._send import REPLAY_GRANT_ENDED, REPLAY_STEP_UP
from tests.delegated.support import Env, delegated_brand, new_sub, serve

SECRET = "A-1001"  # an order number: account data the stored reply holds


@pytest.fixture(params=["memory", "sqlite"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    calls: list[tuple[str, str, dict[str, Any]]] = []
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/pactmw.db"
    with serve(store, [delegated_brand("acme", "Acme Shop", calls)], calls=calls) as running:
        yield running


def _refused(response: httpx.Response, message: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["status"], error["message"]) == ("INVALID_ARGUMENT", message)
    assert error["details"][0]["reason"] == "INVALID_PARAMS"
    assert SECRET not in response.text


def test_stored_delegated_reply_needs_a_token_of_its_grant(env: Env) -> None:
    sub, user = new_sub(), env.new_user("alice")
    tokens = env.connect("acme", "orders:read", user=user, sub=sub)
    answered = env.send("acme", "my orders", token=tokens["access_token"], sub=sub, message_id="m1")
    assert answered.status_code == 200, answered.text
    message = answered.json()["message"]
    assert SECRET in answered.text
    assert message["metadata"]["pact.receipt"]["claims"]["grantId"] == tokens["grant_id"]
    context_id = message["contextId"]
    runs = len(env.calls)

    def retry(token: str | None) -> httpx.Response:
        return env.send(
            "acme", "my orders", token=token, sub=sub, message_id="m1", context_id=context_id
        )

    # The same grant's token: the stored bytes, receipt included.
    assert retry(tokens["access_token"]).content == answered.content
    # No delegation token while the grant is live: the step-up a new turn would get.
    step_up = retry(None)
    assert step_up.status_code == 200, step_up.text
    task = step_up.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    assert task["status"]["message"]["parts"] == [{"text": REPLAY_STEP_UP}]
    assert task["metadata"]["pact.missingScopes"] == ["orders:read"]
    assert SECRET not in step_up.text

    assert env.provider.revoke_grant(tokens["grant_id"]) is True
    # The revoked token itself: the usual 401.
    revoked = retry(tokens["access_token"])
    assert revoked.status_code == 401, revoked.text
    assert 'error="invalid_token"' in revoked.headers["www-authenticate"]
    assert SECRET not in revoked.text
    # No token at all, once the grant has ended: no approval can bring this reply back.
    _refused(retry(None), REPLAY_GRANT_ENDED)
    # A token of a new grant (the person approved again) is not the reply's grant either...
    again = env.connect("acme", "orders:read", user=user, sub=sub)
    assert again["grant_id"] != tokens["grant_id"]
    _refused(retry(again["access_token"]), REPLAY_GRANT_ENDED)
    # ...but it carries the conversation on with a new message.
    later = env.send(
        "acme",
        "my orders",
        token=again["access_token"],
        sub=sub,
        message_id="m2",
        context_id=context_id,
    )
    assert later.status_code == 200, later.text
    assert (
        later.json()["message"]["metadata"]["pact.receipt"]["claims"]["grantId"]
        == (again["grant_id"])
    )
    # The refused retries never ran the bot: only m2 did.
    assert len(env.calls) == runs + 1


def test_replies_made_without_delegation_are_retried_as_before(env: Env) -> None:
    sub = new_sub()
    answered = env.send("acme", "hello", sub=sub, message_id="m1")
    assert answered.status_code == 200, answered.text
    context_id = answered.json()["message"]["contextId"]
    again = env.send("acme", "hello", sub=sub, message_id="m1", context_id=context_id)
    assert again.content == answered.content
