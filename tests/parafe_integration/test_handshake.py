"""The built-in handshake completion (`POST {broker}/handshake/complete`, the reference SDK's
`completeHandshake` wire format), end to end through a Provider served by uvicorn."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.protocols.parafe import EXTENSION_URI, with_parafe
from pactmw.provider import Brand, Turn
from pactmw.provider.parafe import ParafeConfig
from tests.parafe_integration.support import (
    CALLER_AGENT,
    CREDENTIAL,
    PERMISSIONS,
    SCOPE,
    World,
    a2a_message,
    issue_options,
)
from tests.provider import Kit
from tests.support.net import loopback_client
from tests.support.servers import uvicorn_server


@pytest.fixture
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    world = World(tmp_path_factory.mktemp("parafe-handshake"))
    yield world
    world.close()


def config(world: World, **overrides: Any) -> ParafeConfig:
    """The shop's Parafé configuration, with its broker credential (the handshake needs it)."""
    return world.config(**{"credential": CREDENTIAL, **overrides})


def order_bot(turn: Turn) -> str:
    consent = turn.parafe.require("create_order", details={"item": "lamp"})
    return f"ordered in {consent.session_id}"


def challenge_for(world: World, opened: dict[str, str]) -> dict[str, Any]:
    return {
        **opened,
        "initiator_agent_id": CALLER_AGENT,
        "broker_url": world.url,
        "requested_scope": SCOPE,
        "requested_permissions": PERMISSIONS,
    }


def post(client: httpx.Client, kit: Kit, message: dict[str, Any]) -> dict[str, Any]:
    headers = {
        "Authorization": kit.token(),
        "Content-Type": "application/a2a+json",
        "A2A-Extensions": EXTENSION_URI,
    }
    response = client.post(
        "/a2a/acme/message:send", content=json.dumps({"message": message}), headers=headers
    )
    assert response.status_code == 200, response.text
    parsed: dict[str, Any] = response.json()
    return parsed


def handshake(client: httpx.Client, kit: Kit, challenge: dict[str, Any]) -> dict[str, Any]:
    message = with_parafe(a2a_message("I'd like to order"), {"handshake_challenge": challenge})
    member: dict[str, Any] = post(client, kit, message)["message"]["metadata"][EXTENSION_URI][
        "handshake_complete"
    ]
    return member


@pytest.mark.parametrize("shop_alg", ["EdDSA", "ES256"])
def test_the_built_in_handshake_completes_with_the_broker(
    kit: Kit, tmp_path_factory: pytest.TempPathFactory, shop_alg: str, caplog: Any
) -> None:
    from pactmw.protocols.parafe import ConsentPresenter

    world = World(tmp_path_factory.mktemp("hs"), shop_alg=shop_alg)
    try:
        brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world))
        provider = kit.provider(brand)
        opened = world.broker.open_handshake(**issue_options(world))
        caplog.set_level(logging.DEBUG)
        with (
            uvicorn_server(A2AProviderApp(provider)) as base,
            loopback_client(base_url=base) as client,
        ):
            member = handshake(client, kit, challenge_for(world, opened))
            assert member["status"] == "authenticated", member
            assert member["handshake_id"] == opened["handshake_id"]
            token, session_id = member["consent_token"], member["session_id"]

            # The wire format: body fields only, no agent PoP header (the SDK sends none).
            (call,) = world.broker.complete_requests
            assert set(call["body"]) == {"handshake_id", "target_credential", "challenge_response"}
            assert call["body"]["target_credential"] == CREDENTIAL
            assert len(base64.b64decode(call["body"]["challenge_response"])) == 64
            assert call["pop"] is None
            assert call["authorization"] is None
            assert call["content_type"] == "application/json"

            # The caller uses the token with a fresh proof: the action goes through.
            presenter = ConsentPresenter(token=token, session_id=session_id, key=world.caller_key)
            done = post(client, kit, presenter.attach(a2a_message("buy")))
            assert done["message"]["parts"][0]["text"] == f"ordered in {session_id}"
        logged = caplog.text
        assert CREDENTIAL not in logged
        assert token not in logged
        assert call["body"]["challenge_response"] not in logged
    finally:
        world.close()


def test_a_wrong_challenge_signature_is_refused_by_the_broker(kit: Kit, world: World) -> None:
    brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world))
    provider = kit.provider(brand)
    opened = world.broker.open_handshake(**issue_options(world))
    forged = {**opened, "challenge": "00" * 32}  # not the challenge the broker issued
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        member = handshake(client, kit, challenge_for(world, forged))
    assert member["status"] == "rejected"
    assert member["error_code"] == "invalid_challenge_response"
    assert member["error_message"] == "Bad signature"
    assert "consent_token" not in member


def test_a_broker_refusal_is_rejected_with_its_code(kit: Kit, world: World) -> None:
    brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world))
    provider = kit.provider(brand)
    opened = world.broker.open_handshake(**issue_options(world))
    world.broker.handshake_answer = (
        403,
        {"error": "tier_insufficient", "message": "The scope needs a verified tier"},
    )
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        member = handshake(client, kit, challenge_for(world, opened))
        # No message: the code stands in (mapBrokerError), a missing code is unknown_error.
        world.broker.handshake_answer = (410, {"reason": "Handshake expired"})
        expired = handshake(client, kit, challenge_for(world, opened))
        world.broker.handshake_answer = (503, {"error": "unavailable"})
        down = handshake(client, kit, challenge_for(world, opened))
    assert member == {
        "handshake_id": opened["handshake_id"],
        "status": "rejected",
        "error_code": "tier_insufficient",
        "error_message": "The scope needs a verified tier",
    }
    assert (expired["status"], expired["error_code"], expired["error_message"]) == (
        "rejected",
        "unknown_error",
        "Handshake expired",
    )
    assert (down["status"], down["error_code"]) == ("error", "unavailable")


@pytest.mark.parametrize("status", [403, 503])
def test_a_brokers_error_code_cannot_forge_a_log_line(
    kit: Kit, world: World, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world))
    provider = kit.provider(brand)
    opened = world.broker.open_handshake(**issue_options(world))
    world.broker.handshake_answer = (status, {"error": "nope\nCRITICAL forged\x1b[2J"})
    caplog.set_level(logging.INFO, logger="pactmw.provider.parafe")
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        handshake(client, kit, challenge_for(world, opened))
    logged = [r.getMessage() for r in caplog.records if "handshake" in r.getMessage()]
    assert logged, caplog.text
    assert all("\n" not in line and "\x1b" not in line for line in logged), logged
    assert any("nope\\nCRITICAL forged\\x1b[2J" in line for line in logged), logged


def test_a_token_for_another_agent_or_session_is_not_passed_on(kit: Kit, world: World) -> None:
    brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world))
    provider = kit.provider(brand)
    other = world.broker.open_handshake(**{**issue_options(world), "target_id": "prf_agent_x"})
    token, session_id = world.broker.issue(**issue_options(world))
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        # The broker answers with a token whose session is not the answer's session.
        world.broker.handshake_answer = (
            200,
            {
                "handshake_id": other["handshake_id"],
                "session": {"session_id": "sess_other"},
                "consent_token": {"token": token, "session_id": "sess_other"},
            },
        )
        wrong_session = handshake(client, kit, challenge_for(world, other))
        # A token for another target agent.
        foreign, foreign_session = world.broker.issue(
            **{**issue_options(world), "target_id": "prf_agent_x"}
        )
        world.broker.handshake_answer = (
            200,
            {
                "handshake_id": other["handshake_id"],
                "session": {"session_id": foreign_session},
                "consent_token": {"token": foreign, "session_id": foreign_session},
            },
        )
        wrong_agent = handshake(client, kit, challenge_for(world, other))
    assert session_id != "sess_other"
    for member in (wrong_session, wrong_agent):
        assert member["status"] == "error"
        assert "consent_token" not in member


def test_an_unreachable_broker_is_an_error_within_the_timeout(kit: Kit, world: World) -> None:
    brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world))
    provider = kit.provider(brand)
    opened = world.broker.open_handshake(**issue_options(world))
    challenge = challenge_for(world, opened)
    world.close()  # the broker is down
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        started = time.monotonic()
        member = handshake(client, kit, challenge)
        elapsed = time.monotonic() - started
    assert member["status"] == "error"
    assert member["error_code"] == "network_error"
    assert elapsed < 10


def test_broker_keys_that_cannot_be_fetched_are_not_a_bad_token(
    kit: Kit, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # The broker completes the handshake but its JWKS cannot be had: the token is not passed
    # on (it could not be checked), and neither the answer nor the log says it is bad.
    brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world))
    provider = kit.provider(brand)
    opened = world.broker.open_handshake(**issue_options(world))
    world.broker.jwks_path = "/.well-known/elsewhere.json"  # the JWKS answers 404
    caplog.set_level(logging.INFO, logger="pactmw.provider.parafe")
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        member = handshake(client, kit, challenge_for(world, opened))
    assert member["status"] == "error"
    assert "consent_token" not in member
    assert "does not verify" not in member["error_message"]
    assert "try again" in member["error_message"]
    logged = [r.getMessage() for r in caplog.records if "consent token" in r.getMessage()]
    assert logged, caplog.text
    assert all("does not verify" not in line for line in logged), logged
    assert any("KEY_FETCH_FAILED" in line for line in logged), logged


def test_a_hook_still_overrides_the_built_in_completion(kit: Kit, world: World) -> None:
    from pactmw.protocols.parafe import HandshakeChallenge, HandshakeComplete

    def refuse(challenge: HandshakeChallenge, agent: Any) -> HandshakeComplete:
        return HandshakeComplete(
            handshake_id=challenge.handshake_id, status="rejected", error_message="no"
        )

    brand = Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world, handshake=refuse))
    provider = kit.provider(brand)
    opened = world.broker.open_handshake(**issue_options(world))
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        member = handshake(client, kit, challenge_for(world, opened))
    assert member["status"] == "rejected"
    assert world.broker.complete_requests == []
