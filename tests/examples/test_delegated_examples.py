"""The Delegated profile (PACT §5) of the Flask and Django example shops, over real servers.

Each example runs as its own process (the launch commands of tests/examples/support.py)
with a TOML config (PACTMW_CONFIG) that registers one personal agent and offers delegation
on one Brand, with the example's own bot, tools and login. httpx plays both sides: the
personal agent (PACT JWT, A2A and OAuth calls) and the person in a browser (a cookie-keeping
client that follows the consent link, logs in to the shop and decides on the consent page).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from pactmw.core.jose import parse_compact, verify_signature
from pactmw.core.jwk import KeySet
from pactmw.protocols.delegation import args_hash
from tests.examples.support import A2A, BRAND, INTERVAL, ISSUER, SCOPES, Shop, post_form

SIGNING_ALGS = frozenset({"ES256", "RS256"})


#: The dev-only customers both examples seed (see their READMEs): (username, password).
JANE = ("jane", "jane-dev-only")
ALEX = ("alex", "alex-dev-only")


# -- a tiny HTML form reader (the person's browser) ---------------------------------------------


# -- the running shop, its personal agent and a person -------------------------------------------


# -- assertions -----------------------------------------------------------------------------------


def task_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == A2A
    task: dict[str, Any] = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    return task


def message_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == A2A
    message: dict[str, Any] = response.json()["message"]
    assert message["role"] == "ROLE_AGENT"
    return message


def oauth_error(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    error: str = response.json()["error"]
    return error


def verified_receipt(shop: Shop, message: dict[str, Any]) -> dict[str, Any]:
    """The message's receipt claims, after checking the JWS against the published keys."""
    receipt = message["metadata"]["pact.receipt"]
    jws = parse_compact(receipt["jws"], allowed_algs=SIGNING_ALGS)
    assert jws.header["typ"] == "pact-receipt+jws"
    _verify(jws, shop.signing_keys())
    assert jws.claims() == receipt["claims"]
    claims: dict[str, Any] = receipt["claims"]
    return claims


def verified_token_claims(shop: Shop, access_token: str) -> dict[str, Any]:
    jws = parse_compact(access_token, allowed_algs=SIGNING_ALGS)
    _verify(jws, shop.signing_keys())
    return jws.claims()


def _verify(jws: Any, keys: KeySet) -> None:
    candidates = keys.candidates(jws.kid, jws.alg)
    assert candidates, "the signing key is not published at jwks_uri"
    errors = []
    for key in candidates:
        try:
            verify_signature(jws, key)
            return
        except Exception as exc:
            errors.append(exc)
    raise AssertionError(f"no published key verifies the JWS: {errors}")


def assert_invalid_token(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="a2a", error="invalid_token"'
    assert response.content == b""


# -- the tests ------------------------------------------------------------------------------------


def test_card_and_metadata_advertise_user_delegation(shop: Shop) -> None:
    card = shop.agent.get(f"/a2a/{BRAND}/.well-known/agent-card.json").json()
    interface = f"{shop.base_url}/a2a/{BRAND}"
    scheme = card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]
    flow = scheme["flows"]["deviceCode"]
    assert flow["scopes"] == SCOPES
    assert list(flow["scopes"]) == list(SCOPES)
    assert flow["deviceAuthorizationUrl"] == f"{interface}/oauth/device_authorization"
    assert flow["tokenUrl"] == f"{interface}/oauth/token"
    identity = next(iter(card["securityRequirements"][0]["schemes"]))
    assert card["securityRequirements"] == [
        {"schemes": {identity: {"list": []}}},
        {"schemes": {identity: {"list": []}, "userDelegation": {"list": []}}},
    ]
    metadata = shop.agent.get(scheme["oauth2MetadataUrl"])
    assert metadata.status_code == 200
    document = metadata.json()
    assert document["issuer"] == f"{interface}/oauth"
    assert document["device_authorization_endpoint"] == flow["deviceAuthorizationUrl"]
    assert document["token_endpoint"] == flow["tokenUrl"]
    assert document["scopes_supported"] == list(SCOPES)
    assert shop.signing_keys().keys


def test_delegated_story(shop: Shop) -> None:
    """Step-up, device flow with the shop's own login, a delegated turn with a verified
    receipt, a second step-up, refresh rotation and reuse detection."""
    sub = "story-user"
    jane = shop.account_of("jane")

    # Identity alone still answers order-status questions.
    status = message_of(shop.send("order A-1001 status", sub=sub))
    assert "A-1001" in status["parts"][0]["text"]
    assert "metadata" not in status

    # An account action without a delegation token is a step-up task, not a failure.
    task = task_of(shop.send("show my orders", sub=sub))
    context_id = task["contextId"]
    assert task["metadata"]["pact.missingScopes"] == ["orders:read"]
    assert task["metadata"]["pact.verificationUriComplete"].startswith(shop.base_url)

    # The personal agent asks for both scopes; nobody has decided yet.
    device = shop.device_authorization("orders:read orders:return", sub=sub)
    assert device["interval"] == INTERVAL
    assert oauth_error(shop.poll(device["device_code"], sub=sub)) == "authorization_pending"

    # The person opens the link: off to the shop's login, back to consent, `orders:return`
    # unticked.
    with shop.person() as browser:
        signed_out = browser.get(device["verification_uri_complete"])
        assert signed_out.status_code in (302, 303)
        page = shop.consent(browser, device["verification_uri_complete"], JANE)
        assert SCOPES["orders:read"] in page.text
        assert SCOPES["orders:return"] in page.text
        assert "jane" in page.text
        decided = shop.decide(browser, page, "allow", ["orders:read"])
        assert decided.status_code == 303, decided.text
        location = decided.headers["location"]
        assert location.startswith(f"{shop.base_url}/a2a/{BRAND}/oauth/connected?status=approved")
        assert browser.get(location).status_code == 200

        # The token holds what the person approved, not what was asked.
        granted = shop.poll(device["device_code"], sub=sub)
        assert granted.status_code == 200, granted.text
        tokens = granted.json()
        assert tokens["token_type"] == "Bearer"
        assert tokens["scope"] == "orders:read"
        claims = verified_token_claims(shop, tokens["access_token"])
        assert claims["sub"] == jane
        assert claims["scope"] == "orders:read"
        assert claims["client_id"] == ISSUER
        assert oauth_error(shop.poll(device["device_code"], sub=sub)) == "invalid_grant"

        # The same conversation, now as Jane: her orders, and a receipt that verifies.
        reply = message_of(
            shop.send(
                "show my orders",
                sub=sub,
                context_id=context_id,
                access_token=tokens["access_token"],
            )
        )
        assert reply["contextId"] == context_id
        text = reply["parts"][0]["text"]
        assert "A-1001" in text
        assert "A-1003" in text
        assert "A-1002" not in text  # Alex's order
        assert [o["number"] for o in reply["parts"][1]["data"]["orders"]] == ["A-1001", "A-1003"]
        receipt = verified_receipt(shop, reply)
        assert receipt["user"] == jane
        assert receipt["pa"] == ISSUER
        assert receipt["brand"] == f"{shop.base_url}/a2a/{BRAND}"
        assert receipt["grantId"] == claims["grant_id"]
        assert receipt["scopesUsed"] == ["orders:read"]
        assert receipt["actions"] == [{"tool": "list_orders"}]

        # A return needs the scope she left unticked: step-up, the conversation stays open.
        return_id = str(uuid.uuid4())
        step_up = task_of(
            shop.send(
                "return order A-1001",
                sub=sub,
                context_id=context_id,
                access_token=tokens["access_token"],
                message_id=return_id,
            )
        )
        assert step_up["contextId"] == context_id
        assert step_up["metadata"]["pact.missingScopes"] == ["orders:return"]
        assert step_up["metadata"]["pact.verificationUriComplete"].startswith(
            f"{shop.base_url}/a2a/{BRAND}/oauth/consent?user_code="
        )
        assert shop.agent.get("/orders/A-1001").json()["return_requested"] is False

        # The agent repeats the device flow for the missing scope (spec §5.5); Jane is still
        # signed in to the shop, so the link goes straight to consent.
        more = shop.device_authorization("orders:return", sub=sub)
        page = shop.consent(browser, more["verification_uri_complete"])
        assert SCOPES["orders:return"] in page.text
        # Only the missing scope is asked; the held one is listed as kept whatever Jane picks.
        assert 'value="orders:read"' not in page.text
        assert "can already do this for you" in page.text
        assert shop.decide(browser, page, "allow", ["orders:return"]).status_code == 303
    widened = shop.poll(more["device_code"], sub=sub)
    assert widened.status_code == 200, widened.text
    tokens = widened.json()
    assert tokens["scope"].split() == ["orders:read", "orders:return"]

    # The very message that stepped up is sent again and now runs; the write is in the receipt.
    done = message_of(
        shop.send(
            "return order A-1001",
            sub=sub,
            context_id=context_id,
            access_token=tokens["access_token"],
            message_id=return_id,
        )
    )
    assert "started a return for order A-1001" in done["parts"][0]["text"]
    receipt = verified_receipt(shop, done)
    assert receipt["user"] == jane
    assert receipt["scopesUsed"] == ["orders:return"]
    assert receipt["actions"] == [
        {"tool": "start_return", "argsHash": args_hash({"order": "A-1001"})}
    ]
    assert shop.agent.get("/orders/A-1001").json()["return_requested"] is True
    # Tools act only on the signed-in customer's own orders.
    foreign = message_of(
        shop.send(
            "return order A-1002",
            sub=sub,
            context_id=context_id,
            access_token=tokens["access_token"],
        )
    )
    assert "can't find order A-1002 on your account" in foreign["parts"][0]["text"]
    assert shop.agent.get("/orders/A-1002").json()["return_requested"] is False

    # Refresh rotates: a new pair, same scopes, and the new access token works.
    rotated = shop.refresh(tokens["refresh_token"], sub=sub)
    assert rotated.status_code == 200, rotated.text
    fresh = rotated.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert fresh["scope"] == tokens["scope"]
    again = message_of(
        shop.send(
            "show my orders", sub=sub, context_id=context_id, access_token=fresh["access_token"]
        )
    )
    assert verified_receipt(shop, again)["actions"] == [{"tool": "list_orders"}]

    # The spent refresh token comes back at once (an agent that lost the answer): within the
    # reuse interval it gets the same pair, and the grant stays. After the interval a reuse
    # revokes the whole grant (tests/delegated/test_refresh_reuse.py).
    repeated = shop.refresh(tokens["refresh_token"], sub=sub)
    assert repeated.status_code == 200, repeated.text
    assert repeated.content == rotated.content
    still = message_of(
        shop.send(
            "show my orders", sub=sub, context_id=context_id, access_token=fresh["access_token"]
        )
    )
    assert verified_receipt(shop, still)["actions"] == [{"tool": "list_orders"}]
    assert shop.refresh(fresh["refresh_token"], sub=sub).status_code == 200


def test_denied_consent(shop: Shop) -> None:
    sub = "deny-user"
    device = shop.device_authorization("orders:read", sub=sub)
    with shop.person() as browser:
        page = shop.consent(browser, device["verification_uri_complete"], ALEX)
        decided = shop.decide(browser, page, "deny", [])
        assert decided.status_code == 303, decided.text
        location = decided.headers["location"]
        assert "/oauth/connected?status=denied&outcome=" in location
        # The code is spent: the link cannot be decided on again.
        assert browser.get(device["verification_uri_complete"]).status_code == 400
    assert oauth_error(shop.poll(device["device_code"], sub=sub)) == "access_denied"


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/phish",
        "//evil.example/phish",
        "/\\evil.example/phish",
        "https:evil.example",
        "javascript:alert(1)",
    ],
)
def test_login_never_redirects_off_site(shop: Shop, target: str) -> None:
    with shop.person() as browser:
        back = shop.log_in(
            browser, f"{shop.example.login_path}?{urlencode({'next': target})}", JANE
        )
        assert back.status_code in (302, 303), back.text
        assert back.headers["location"] == "/"


def test_login_keeps_on_site_targets_and_refuses_bad_passwords(shop: Shop) -> None:
    with shop.person() as browser:
        refused = shop.log_in(browser, shop.example.login_path, ("jane", "wrong"))
        assert refused.status_code == 200
        assert "do not match" in refused.text
        back = shop.log_in(browser, f"{shop.example.login_path}?next=/orders/A-1001", JANE)
        assert back.headers["location"] == "/orders/A-1001"


def test_login_form_needs_its_csrf_token(shop: Shop) -> None:
    with shop.person() as browser:
        form = post_form(browser.get(shop.example.login_path).text)
        forged = browser.post(form["action"], data={"username": "jane", "password": JANE[1]})
        assert forged.status_code in (400, 403)
        # And nobody got signed in by it: consent still sends this browser to the login.
        device = shop.device_authorization("orders:read", sub="csrf-user")
        assert browser.get(device["verification_uri_complete"]).status_code in (302, 303)
