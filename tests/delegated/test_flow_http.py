"""The whole Delegated profile over a real uvicorn server (same-app consent, sqlite store).

The personal agent signs its own PACT JWTs; the person is a `sid` cookie resolved by a
signed-in-user table the test controls; receipts are verified with PyJWT against the JWKS
fetched from the metadata's `jwks_uri`.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.delegated.support import (
    CANCEL_ARGS,
    LOGIN_URL,
    OTHER_ISSUER,
    SCOPES,
    USER_CODE,
    Env,
    assert_oauth_error,
    assert_page_headers,
    delegated_brand,
    first_form,
    form_action,
    hidden,
    independent_hash,
    jws_claims,
    jws_header,
    message_of,
    new_sub,
    serve,
    task_of,
    verify_with_jwks,
    without_outcome,
)
from tests.support.parties import AGENT_NAME, ISSUER

CHALLENGE = 'Bearer realm="a2a", error="invalid_token"'
TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    calls: list[tuple[str, str, dict[str, Any]]] = []
    brands = [
        delegated_brand("acme", "Acme Shop", calls),
        delegated_brand("globex", "Globex", calls, device_code_seconds=120),
        delegated_brand("initech", "Initech", calls, skip_consent_if_granted=True),
    ]
    store = f"sqlite:///{tmp_path_factory.mktemp('flow')}/pactmw.db"
    with serve(store, brands, calls=calls) as running:
        yield running


def assert_invalid_token(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == CHALLENGE
    assert response.content == b""


# -- discovery ------------------------------------------------------------------------------------


def test_card_advertises_user_delegation(env: Env) -> None:
    card = env.get(env.interface("acme") + "/.well-known/agent-card.json").json()
    scheme = card["securitySchemes"]["userDelegation"]
    assert list(scheme) == ["oauth2SecurityScheme"]
    oauth = scheme["oauth2SecurityScheme"]
    device = oauth["flows"]["deviceCode"]
    assert device["deviceAuthorizationUrl"] == env.oauth("acme", "device_authorization")
    assert device["tokenUrl"] == env.oauth("acme", "token")
    assert list(device["scopes"].items()) == list(SCOPES.items())
    assert oauth["oauth2MetadataUrl"] == env.oauth("acme", ".well-known/oauth-authorization-server")
    requirements = card["securityRequirements"]
    assert requirements[0] == {"schemes": {"platformJwt": {"list": []}}}
    assert requirements[1] == {
        "schemes": {"platformJwt": {"list": []}, "userDelegation": {"list": []}}
    }
    assert len(requirements) == 2


def test_metadata_matches_the_card_and_serves_the_keys(env: Env) -> None:
    card = env.get(env.interface("acme") + "/.well-known/agent-card.json").json()
    oauth = card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]
    answer = env.get(oauth["oauth2MetadataUrl"])
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "*"
    metadata = answer.json()
    issuer = env.interface("acme") + "/oauth"
    device = oauth["flows"]["deviceCode"]
    assert metadata["issuer"] == issuer
    assert metadata["device_authorization_endpoint"] == device["deviceAuthorizationUrl"]
    assert metadata["token_endpoint"] == device["tokenUrl"]
    assert metadata["jwks_uri"] == issuer + "/jwks.json"
    assert metadata["scopes_supported"] == list(SCOPES)
    assert metadata["grant_types_supported"] == [
        "urn:ietf:params:oauth:grant-type:device_code",
        "refresh_token",
    ]
    assert metadata["token_endpoint_auth_methods_supported"] == ["private_key_jwt"]
    # Advertising RFC 9396 types makes the Identity suite expect more; none are configured.
    assert "authorization_details_types_supported" not in metadata
    jwks = env.get(metadata["jwks_uri"])
    assert jwks.status_code == 200
    assert jwks.headers["cache-control"] == "public, max-age=300"
    assert jwks.headers["access-control-allow-origin"] == "*"
    (key,) = jwks.json()["keys"]
    assert key["use"] == "sig"
    assert key["alg"] == "ES256"
    assert key["kty"] == "EC"
    assert "d" not in key
    # Unknown Brands and Brands without delegation have no authorization server.
    assert env.get(env.oauth("nope", ".well-known/oauth-authorization-server")).status_code == 404


# -- step-up without a token ----------------------------------------------------------------------


def test_account_action_without_a_token_is_a_step_up_task(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    before = len(env.calls)
    asked = env.send("acme", "show my orders", message_id="m-step-up", sub=sub)
    task = task_of(asked)
    assert task["metadata"]["pact.missingScopes"] == ["orders:read"]
    link = task["metadata"]["pact.verificationUriComplete"]
    code = parse_qs(urlsplit(link).query)["user_code"][0]
    assert link == env.oauth("acme", "consent") + "?" + urlencode({"user_code": code})
    assert USER_CODE.fullmatch(code)
    assert len(env.calls) == before  # the tool never ran

    # The link is a live device authorization for exactly the missing scope.
    page = env.get(link, user=user)
    assert page.status_code == 200
    assert "Look up your orders" in page.text
    assert "Cancel an order" not in page.text

    # The step-up persisted the conversation but not the message: after connecting, the same
    # messageId in that context runs the bot.
    tokens = env.connect("acme", "orders:read", user=user, sub=sub)
    again = env.send(
        "acme",
        "show my orders",
        token=tokens["access_token"],
        context_id=task["contextId"],
        message_id="m-step-up",
        sub=sub,
    )
    assert message_of(again)["parts"][0]["text"] == "Your orders: A-1001, A-1002"


# -- device authorization and polling -------------------------------------------------------------


def test_device_authorization_response(env: Env) -> None:
    answer = env.device_authorization("acme", "orders:read orders:cancel")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["pragma"] == "no-cache"
    document = answer.json()
    assert set(document) == {
        "device_code",
        "user_code",
        "verification_uri",
        "verification_uri_complete",
        "expires_in",
        "interval",
    }
    assert re.fullmatch(r"dc_[A-Za-z0-9_-]{43}", document["device_code"])
    assert USER_CODE.fullmatch(document["user_code"])
    assert document["expires_in"] == 600
    assert document["interval"] == 1
    consent = env.oauth("acme", "consent")
    assert document["verification_uri"] == consent
    assert document["verification_uri_complete"] == (
        consent + "?" + urlencode({"user_code": document["user_code"]})
    )
    other = env.device_authorization("acme", "orders:read").json()
    assert other["device_code"] != document["device_code"]
    assert other["user_code"] != document["user_code"]
    # A Brand's own lifetime (`device_code_seconds`) is the one its device codes get.
    assert env.device_authorization("globex", "orders:read").json()["expires_in"] == 120


def test_client_id_must_be_the_jwt_issuer(env: Env) -> None:
    assert_oauth_error(
        env.device_authorization("acme", "orders:read", client_id=OTHER_ISSUER),
        "invalid_client",
        401,
    )
    started = env.device_authorization("acme", "orders:read").json()
    wrong_client = env.http.post(
        env.oauth("acme", "token"),
        data={
            "client_id": OTHER_ISSUER,
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            "device_code": started["device_code"],
        },
        headers=env.pa(),
    )
    assert_oauth_error(wrong_client, "invalid_client", 401)
    missing = env.http.post(
        env.oauth("acme", "device_authorization"), data={"scope": "orders:read"}, headers=env.pa()
    )
    assert_oauth_error(missing, "invalid_client", 401)


@pytest.mark.parametrize(
    "scope", ["orders:refund", "orders:read orders:refund", "", "   ", "ORDERS:READ"]
)
def test_unknown_scope_is_invalid_scope(env: Env, scope: str) -> None:
    assert_oauth_error(env.device_authorization("acme", scope), "invalid_scope")


def test_duplicate_scopes_are_requested_once(env: Env) -> None:
    started = env.device_authorization("acme", "orders:read  orders:read").json()
    page = env.get(started["verification_uri_complete"], user="alice")
    assert page.text.count('name="scope"') == 1


def test_oauth_endpoints_need_the_personal_agent_jwt(env: Env) -> None:
    for path in ("device_authorization", "token"):
        answer = env.http.post(
            env.oauth("acme", path), data={"client_id": ISSUER, "scope": "orders:read"}
        )
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == 'Bearer realm="a2a"'
        assert answer.content == b""


def test_polling_before_the_decision(env: Env) -> None:
    started = env.device_authorization("acme", "orders:read").json()
    assert_oauth_error(env.poll("acme", started["device_code"]), "authorization_pending")
    assert_oauth_error(env.poll("acme", started["device_code"]), "slow_down")
    time.sleep(1.05)  # the interval is 1 s
    assert_oauth_error(env.poll("acme", started["device_code"]), "authorization_pending")
    # Another agent cannot poll this code, nor learn that it exists.
    assert_oauth_error(
        env.poll("acme", started["device_code"], issuer=OTHER_ISSUER), "invalid_grant"
    )
    # Nor can the same agent at another Brand.
    assert_oauth_error(env.poll("globex", started["device_code"]), "invalid_grant")
    assert_oauth_error(env.poll("acme", "dc_" + "A" * 43), "invalid_grant")
    assert_oauth_error(
        env.token("acme", {"grant_type": "password", "username": "u"}), "unsupported_grant_type"
    )
    assert_oauth_error(env.token("acme", {"grant_type": "refresh_token"}), "invalid_request")


# -- consent and tokens ---------------------------------------------------------------------------


def test_consent_signed_out_goes_to_the_login_url(env: Env) -> None:
    started = env.device_authorization("acme", "orders:read").json()
    complete = started["verification_uri_complete"]
    answer = env.get(complete)
    assert answer.status_code == 303
    assert answer.headers["location"] == LOGIN_URL + "&" + urlencode({"next": complete})
    assert answer.headers["cache-control"] == "no-store"


def test_consent_page_decision_and_token(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pactmw.audit")
    sub, user = new_sub(), env.new_user("jane")
    started = env.device_authorization("acme", "orders:read orders:cancel", sub=sub).json()
    page = env.get(started["verification_uri_complete"], user=user)
    assert page.status_code == 200
    assert_page_headers(page)
    html = page.text
    assert "Acme Shop" in html
    assert AGENT_NAME in html
    assert "https://pa.example" in html
    assert f"{user}@example.com" in html
    for scope, description in SCOPES.items():
        assert f'<input type="checkbox" name="scope" value="{scope}" checked> {description}' in html
    decision_url = env.oauth("acme", "consent/decision")
    assert first_form(html) == f'<form method="post" action="{decision_url}">'
    assert form_action(html) == decision_url
    session = hidden(html, "session")
    assert 'name="decision" value="allow"' in html
    assert 'name="decision" value="deny"' in html

    decided = env.decide(decision_url, session, ["orders:read"], user=user)
    assert decided.status_code == 303
    location = decided.headers["location"]
    assert without_outcome(location) == (
        env.oauth("acme", "connected") + "?status=approved&scope=orders%3Aread"
    )
    result = env.get(location)
    assert result.status_code == 200
    assert_page_headers(result)
    assert SCOPES["orders:read"] in result.text
    assert SCOPES["orders:cancel"] not in result.text

    answer = env.poll("acme", started["device_code"], sub=sub)
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["pragma"] == "no-cache"
    tokens = answer.json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "orders:read"
    assert 0 < tokens["expires_in"] <= 3600
    assert re.fullmatch(r"rt_[A-Za-z0-9_-]{43}", tokens["refresh_token"])
    access = tokens["access_token"]
    assert jws_header(access)["typ"] == "at+jwt"
    assert jws_header(access)["alg"] == "ES256"
    claims = jws_claims(access)
    assert claims["iss"] == env.interface("acme") + "/oauth"
    assert claims["aud"] == env.interface("acme")
    assert claims["sub"] == env.account(user)
    assert claims["client_id"] == ISSUER
    assert claims["scope"] == "orders:read"
    assert claims["grant_id"].startswith("a2agrant_")
    assert 0 < claims["exp"] - claims["iat"] <= 3600
    assert abs(claims["iat"] - time.time()) < 60
    # The token verifies against the published keys (PyJWT, not pactmw).
    jwks = env.get(env.oauth("acme", "jwks.json")).json()
    assert json.loads(verify_with_jwks(access, jwks)) == claims

    approved = env.events("agent.delegation_approved", grant_id=claims["grant_id"])
    assert len(approved) == 1
    assert approved[0].issuer == ISSUER
    assert approved[0].brand_id == "acme"
    assert approved[0].account == env.account(user)
    assert approved[0].scopes == ("orders:read",)
    logged = [r.getMessage() for r in caplog.records if r.name == "pactmw.audit"]
    assert any(
        "agent.delegation_approved" in m and f"issuer={ISSUER}" in m and claims["grant_id"] in m
        for m in logged
    ), logged

    # The code is spent: polling again is invalid_grant.
    assert_oauth_error(env.poll("acme", started["device_code"], sub=sub), "invalid_grant")


def test_delegated_turns_carry_verifiable_receipts(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    tokens = env.connect("acme", user=user, sub=sub)
    access = tokens["access_token"]
    metadata = env.get(env.oauth("acme", ".well-known/oauth-authorization-server")).json()
    jwks = env.http.get(metadata["jwks_uri"]).json()

    def receipt_of(message: dict[str, Any]) -> dict[str, Any]:
        receipt: dict[str, Any] = message["metadata"]["pact.receipt"]
        assert list(receipt) == ["jws", "claims"]
        payload = verify_with_jwks(receipt["jws"], jwks)
        assert jws_header(receipt["jws"])["typ"] == "pact-receipt+jws"
        assert json.loads(payload) == receipt["claims"]
        assert list(json.loads(payload)) == [
            "grantId",
            "user",
            "pa",
            "brand",
            "scopesUsed",
            "actions",
            "ts",
        ]
        claims: dict[str, Any] = receipt["claims"]
        assert claims["grantId"] == tokens["grant_id"]
        assert claims["user"] == env.account(user)
        assert claims["pa"] == ISSUER
        assert claims["brand"] == env.interface("acme")
        assert TS.fullmatch(claims["ts"])
        return claims

    before = len(env.calls)
    first = env.send("acme", "please cancel my order", token=access, message_id="m-1", sub=sub)
    message = message_of(first)
    # The write tool's action is reported next to the text (list_orders, a read, is not).
    cancelled = {
        "tool": "cancel_order",
        "status": "completed",
        "summary": {"title": "Cancel order", "detail": "cancelled A-1001"},
        "result": "cancelled A-1001",
    }
    assert message["parts"] == [
        {"text": "cancelled A-1001 (of 2)"},
        {"data": {"action": cancelled}},
    ]
    claims = receipt_of(message)
    assert claims["scopesUsed"] == ["orders:read", "orders:cancel"]
    assert claims["actions"] == [
        {"tool": "list_orders"},
        {"tool": "cancel_order", "argsHash": independent_hash(CANCEL_ARGS)},
    ]
    assert env.calls[before:] == [
        ("list_orders", env.account(user), {}),
        ("cancel_order", env.account(user), CANCEL_ARGS),
    ]

    # A retry returns the very same bytes (the same receipt) without running the tools.
    retry = env.send(
        "acme",
        "please cancel my order",
        token=access,
        context_id=message["contextId"],
        message_id="m-1",
        sub=sub,
    )
    assert retry.status_code == 200
    assert retry.content == first.content
    assert len(env.calls) == before + 2

    read = message_of(
        env.send("acme", "show my orders", token=access, context_id=message["contextId"], sub=sub)
    )
    assert receipt_of(read)["scopesUsed"] == ["orders:read"]
    assert receipt_of(read)["actions"] == [{"tool": "list_orders"}]

    # Every reply under a token carries a receipt, even one that used no tool.
    chat = message_of(env.send("acme", "hello", token=access, sub=sub))
    assert chat["parts"] == [{"text": f"hi {env.account(user)}"}]
    assert receipt_of(chat)["scopesUsed"] == []
    assert receipt_of(chat)["actions"] == []


def test_step_up_with_a_token_missing_a_scope(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    tokens = env.connect("acme", granted=["orders:read"], user=user, sub=sub)
    assert tokens["scope"] == "orders:read"
    asked = env.send(
        "acme", "cancel my order", token=tokens["access_token"], message_id="m-c", sub=sub
    )
    task = task_of(asked)
    assert task["metadata"]["pact.missingScopes"] == ["orders:cancel"]
    assert not [c for c in env.calls if c[0] == "cancel_order" and c[1] == env.account(user)]
    link = task["metadata"]["pact.verificationUriComplete"]
    page = env.get(link, user=user)
    assert "Cancel an order" in page.text
    # Only the missing scope is asked for; the held one is listed as already allowed.
    assert 'value="orders:read"' not in page.text
    assert "can already do this for you" in page.text

    # The personal agent runs its own flow for the missing scope: the grant widens.
    more = env.connect("acme", "orders:cancel", user=user, sub=sub)
    assert more["grant_id"] == tokens["grant_id"]
    assert set(more["scope"].split()) == {"orders:read", "orders:cancel"}
    done = env.send(
        "acme",
        "cancel my order",
        token=more["access_token"],
        context_id=task["contextId"],
        message_id="m-c",
        sub=sub,
    )
    receipt = message_of(done)["metadata"]["pact.receipt"]["claims"]
    assert receipt["scopesUsed"] == ["orders:read", "orders:cancel"]


def test_refresh_rotates_and_a_quick_repeat_gets_the_same_pair(env: Env) -> None:
    """Reuse after the reuse interval revokes the grant: tests/delegated/test_refresh_reuse.py."""
    sub, user = new_sub(), env.new_user()
    first = env.connect("acme", granted=["orders:read"], user=user, sub=sub)
    answer = env.refresh("acme", first["refresh_token"], sub=sub)
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    second = answer.json()
    assert second["scope"] == first["scope"] == "orders:read"
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    claims = jws_claims(second["access_token"])
    assert claims["grant_id"] == first["grant_id"]
    assert claims["scope"] == "orders:read"
    assert claims["sub"] == env.account(user)
    assert message_of(env.send("acme", "hello", token=second["access_token"], sub=sub))

    # The spent refresh token comes back within the reuse interval (a lost answer): the
    # same pair again, byte for byte, and the grant stays.
    repeat = env.refresh("acme", first["refresh_token"], sub=sub)
    assert repeat.status_code == 200, repeat.text
    assert repeat.headers["cache-control"] == "no-store"
    assert repeat.content == answer.content
    assert message_of(env.send("acme", "hello", token=second["access_token"], sub=sub))
    assert env.events("agent.grant_revoked", grant_id=first["grant_id"]) == []
    third = env.refresh("acme", second["refresh_token"], sub=sub)
    assert third.status_code == 200, third.text
    assert third.json()["refresh_token"] != second["refresh_token"]


def test_refresh_by_another_agent_or_at_another_brand_is_refused(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    tokens = env.connect("acme", granted=["orders:read"], user=user, sub=sub)
    assert_oauth_error(
        env.refresh("acme", tokens["refresh_token"], issuer=OTHER_ISSUER), "invalid_grant"
    )
    assert_oauth_error(env.refresh("globex", tokens["refresh_token"], sub=sub), "invalid_grant")
    assert_oauth_error(env.refresh("acme", "rt_" + "B" * 43, sub=sub), "invalid_grant")
    # Those attempts did not burn the token.
    assert env.refresh("acme", tokens["refresh_token"], sub=sub).status_code == 200


def test_deny(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pactmw.audit")
    sub, user = new_sub(), env.new_user()
    started, action, session = env.open_consent("acme", "orders:read", user=user, sub=sub)
    denied = env.decide(action, session, ["orders:read"], decision="deny", user=user)
    assert denied.status_code == 303
    assert without_outcome(denied.headers["location"]) == (
        env.oauth("acme", "connected") + "?status=denied"
    )
    result = env.get(denied.headers["location"])
    assert result.status_code == 200
    assert "Not connected" in result.text
    assert_oauth_error(env.poll("acme", started["device_code"], sub=sub), "access_denied")
    events = env.events("agent.delegation_denied", account=env.account(user))
    assert [(e.issuer, e.brand_id, e.scopes) for e in events] == [
        (ISSUER, "acme", ("orders:read",))
    ]
    assert any(
        "agent.delegation_denied" in r.getMessage() and f"issuer={ISSUER}" in r.getMessage()
        for r in caplog.records
    )


def test_allow_with_nothing_ticked_is_a_denial(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    started, action, session = env.open_consent("acme", "orders:read", user=user, sub=sub)
    denied = env.decide(action, session, [], user=user)
    assert without_outcome(denied.headers["location"]).endswith("?status=denied")
    assert_oauth_error(env.poll("acme", started["device_code"], sub=sub), "access_denied")


def test_ticking_an_unrequested_scope_grants_nothing_more(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    started, action, session = env.open_consent("acme", "orders:read", user=user, sub=sub)
    decided = env.decide(action, session, ["orders:read", "orders:cancel", "admin"], user=user)
    assert decided.status_code == 303
    tokens = env.poll("acme", started["device_code"], sub=sub).json()
    assert tokens["scope"] == "orders:read"


# -- who may present a token ----------------------------------------------------------------------


def test_a_token_only_works_for_its_own_user_agent_and_brand(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    access = env.connect("acme", user=user, sub=sub)["access_token"]
    assert message_of(env.send("acme", "hello", token=access, sub=sub))
    # Another user of the same personal agent.
    assert_invalid_token(env.send("acme", "hello", token=access, sub=new_sub()))
    # Another personal agent (client_id mismatch).
    assert_invalid_token(env.send("acme", "hello", token=access, sub=sub, issuer=OTHER_ISSUER))
    # Another Brand of the same Provider.
    assert_invalid_token(env.send("globex", "hello", token=access, sub=sub))
    # Not a Bearer header, or garbage.
    headers = {**env.pa(sub), "x-a2a-user-delegation": access}
    body = {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    url = env.interface("acme") + "/message:send"
    assert_invalid_token(env.http.post(url, json=body, headers=headers))
    headers["x-a2a-user-delegation"] = "Bearer not.a.token"
    assert_invalid_token(env.http.post(url, json=body, headers=headers))
    # Two delegation headers are ambiguous: refused, not guessed.
    both = [*env.pa(sub).items(), *[("x-a2a-user-delegation", "Bearer " + access)] * 2]
    assert_invalid_token(env.http.post(url, json=body, headers=both))
    # The delegation header is checked on every route, after the PACT JWT.
    tasks = env.http.get(
        env.interface("acme") + "/tasks",
        headers={**env.pa(sub), "x-a2a-user-delegation": "Bearer x.y.z"},
    )
    assert_invalid_token(tasks)
    no_jwt = env.http.post(url, json=body, headers={"x-a2a-user-delegation": "Bearer " + access})
    assert no_jwt.status_code == 401
    assert no_jwt.headers["www-authenticate"] == 'Bearer realm="a2a"'


def test_a_context_stays_with_its_brand_account(env: Env) -> None:
    sub = new_sub()
    alice, bob = env.new_user("alice"), env.new_user("bob")
    as_alice = env.connect("acme", user=alice, sub=sub)["access_token"]
    as_bob = env.connect("acme", user=bob, sub=sub)["access_token"]
    context = message_of(env.send("acme", "hello", token=as_alice, sub=sub))["contextId"]
    refused = env.send("acme", "hello", token=as_bob, context_id=context, sub=sub)
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/a2a+json"
    error = refused.json()["error"]
    assert error["message"] == "contextId already runs as a different Brand user"
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"][0]["reason"] == "INVALID_PARAMS"
    again = env.send("acme", "hello", token=as_alice, context_id=context, sub=sub)
    assert message_of(again)["parts"] == [{"text": f"hi {env.account(alice)}"}]
    fresh = env.send("acme", "hello", token=as_bob, sub=sub)
    assert message_of(fresh)["parts"] == [{"text": f"hi {env.account(bob)}"}]


def test_a_context_started_without_delegation_continues_under_it(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    plain = message_of(env.send("acme", "hello", sub=sub))
    assert plain["parts"] == [{"text": "hi stranger"}]
    assert "metadata" not in plain
    access = env.connect("acme", user=user, sub=sub)["access_token"]
    delegated = message_of(
        env.send("acme", "hello", token=access, context_id=plain["contextId"], sub=sub)
    )
    assert delegated["contextId"] == plain["contextId"]
    assert delegated["parts"] == [{"text": f"hi {env.account(user)}"}]
    assert "pact.receipt" in delegated["metadata"]


# -- revocation and audit -------------------------------------------------------------------------


def test_revoke_grant(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pactmw.audit")
    sub, user = new_sub(), env.new_user()
    tokens = env.connect("acme", user=user, sub=sub)
    assert message_of(env.send("acme", "hello", token=tokens["access_token"], sub=sub))
    assert env.provider.revoke_grant(tokens["grant_id"]) is True
    assert_invalid_token(env.send("acme", "hello", token=tokens["access_token"], sub=sub))
    assert_oauth_error(env.refresh("acme", tokens["refresh_token"], sub=sub), "invalid_grant")
    assert env.provider.revoke_grant(tokens["grant_id"]) is False
    assert env.provider.revoke_grant("a2agrant_unknown") is False
    events = env.events("agent.grant_revoked", grant_id=tokens["grant_id"])
    assert [(e.issuer, e.account, e.reason) for e in events] == [
        (ISSUER, env.account(user), "revoked")
    ]
    messages = [r.getMessage() for r in caplog.records if r.name == "pactmw.audit"]
    assert any(
        m.startswith("agent.grant_revoked") and f"issuer={ISSUER}" in m and tokens["grant_id"] in m
        for m in messages
    ), messages
    # A new consent makes a new grant; the revoked one is never revived.
    renewed = env.connect("acme", user=user, sub=sub)
    assert renewed["grant_id"] != tokens["grant_id"]
    assert message_of(env.send("acme", "hello", token=renewed["access_token"], sub=sub))


def test_revoke_account(env: Env) -> None:
    sub, user, other = new_sub(), env.new_user(), env.new_user()
    at_acme = env.connect("acme", user=user, sub=sub)
    at_globex = env.connect("globex", user=user, sub=sub)
    bystander = env.connect("acme", user=other, sub=sub)
    revoked = env.provider.revoke_account(env.account(user))
    assert sorted(revoked) == sorted([at_acme["grant_id"], at_globex["grant_id"]])
    assert_invalid_token(env.send("acme", "hello", token=at_acme["access_token"], sub=sub))
    assert_invalid_token(env.send("globex", "hello", token=at_globex["access_token"], sub=sub))
    assert message_of(env.send("acme", "hello", token=bystander["access_token"], sub=sub))
    events = env.events("agent.grant_revoked", account=env.account(user))
    assert sorted((e.grant_id, e.issuer, e.reason) for e in events) == sorted(
        [(at_acme["grant_id"], ISSUER, "account"), (at_globex["grant_id"], ISSUER, "account")]
    )
    assert env.provider.revoke_account(env.account(user)) == []


def test_revoke_account_at_one_brand(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    at_acme = env.connect("acme", user=user, sub=sub)
    at_globex = env.connect("globex", user=user, sub=sub)
    assert env.provider.revoke_account(env.account(user), brand_id="globex") == [
        at_globex["grant_id"]
    ]
    assert message_of(env.send("acme", "hello", token=at_acme["access_token"], sub=sub))
    assert_invalid_token(env.send("globex", "hello", token=at_globex["access_token"], sub=sub))


# -- skipping consent for a covered request -------------------------------------------------------


def test_skip_consent_if_granted(env: Env) -> None:
    sub, user = new_sub(), env.new_user()
    first = env.connect("initech", "orders:read orders:cancel", user=user, sub=sub)
    approvals = len(env.events("agent.delegation_approved", grant_id=first["grant_id"]))

    started = env.device_authorization("initech", "orders:read", sub=sub).json()
    skipped = env.get(started["verification_uri_complete"], user=user)
    assert skipped.status_code == 303
    assert without_outcome(skipped.headers["location"]) == (
        env.oauth("initech", "connected") + "?status=approved&scope=orders%3Aread"
    )
    tokens = env.poll("initech", started["device_code"], sub=sub).json()
    assert tokens["access_token"]
    assert "orders:read" in tokens["scope"].split()
    assert jws_claims(tokens["access_token"])["grant_id"] == first["grant_id"]
    assert len(env.events("agent.delegation_approved", grant_id=first["grant_id"])) == (
        approvals + 1
    )

    # Somebody else signed in, with no grant: the page is shown.
    other = env.new_user()
    started = env.device_authorization("initech", "orders:read", sub=sub).json()
    assert env.get(started["verification_uri_complete"], user=other).status_code == 200
    # The same person, but a request the live grant does not cover.
    narrow_sub, narrow = new_sub(), env.new_user()
    env.connect("initech", "orders:read", user=narrow, sub=narrow_sub)
    wider = env.device_authorization("initech", "orders:read orders:cancel", sub=narrow_sub).json()
    assert env.get(wider["verification_uri_complete"], user=narrow).status_code == 200
    # A revoked grant covers nothing.
    env.provider.revoke_grant(first["grant_id"])
    started = env.device_authorization("initech", "orders:read", sub=sub).json()
    assert env.get(started["verification_uri_complete"], user=user).status_code == 200
    # Brands without the option always ask.
    acme_sub = new_sub()
    env.connect("acme", "orders:read", user=user, sub=acme_sub)
    started = env.device_authorization("acme", "orders:read", sub=acme_sub).json()
    assert env.get(started["verification_uri_complete"], user=user).status_code == 200


def test_no_tokens_for_a_grant_revoked_before_the_poll(env: Env) -> None:
    # Regression: the device-code grant minted tokens for a grant revoked between the
    # person's approval and the agent's poll (200 with tokens that then failed with 401).
    sub, user = new_sub(), env.new_user()
    started, action, session = env.open_consent("acme", "orders:read", user=user, sub=sub)
    assert env.decide(action, session, ["orders:read"], user=user).status_code == 303
    (grant,) = env.provider.store.list_grants(
        brand_id="acme", account=env.account(user), now=time.time()
    )
    assert env.provider.revoke_grant(grant.grant_id) is True
    assert_oauth_error(env.poll("acme", started["device_code"], sub=sub), "invalid_grant")
