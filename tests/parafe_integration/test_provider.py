"""Parafé in the Provider, in process: activation, the card, refusals as messages or tasks,
handshakes, `session_closed`, several actions per turn, async bots, logging, settings.

The broker is the fake one (real HTTP on 127.0.0.1); the Provider runs through `handle` and
`ahandle`, and through Starlette (`A2AProviderApp`) for the activation and card tests.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import httpx
import pytest

from pactmw.adapters.asgi import A2AProviderApp
from pactmw.config import ConfigError
from pactmw.core.jose import parse_compact, verify_signature
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    BrokerKeys,
    BrokerRetry,
    HandshakeChallenge,
    HandshakeComplete,
    ParafeError,
    StaticBrokerKeys,
    parse_card_extension,
    with_parafe,
)
from pactmw.provider import Brand, Turn
from pactmw.provider.parafe import (
    Filing,
    ParafeAgent,
    ParafeConfig,
    ParafeConsent,
    ParafeRefused,
    ReceiptFiler,
)
from tests.parafe.fake_broker import unreachable_url
from tests.parafe_integration.broker import TEST_HANDSHAKE_PATH
from tests.parafe_integration.support import (
    CALLER_AGENT,
    CREDENTIAL,
    PERMISSIONS,
    SCOPE,
    SHOP_AGENT,
    World,
    a2a_message,
    body,
    send,
    settings,
)
from tests.provider import (
    Kit,
    async_drive,
    sync_drive,
)
from tests.support.net import loopback_client
from tests.support.servers import uvicorn_server


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    world = World(tmp_path_factory.mktemp("parafe-provider"))
    yield world
    world.close()


def config(world: World, **overrides: Any) -> ParafeConfig:
    return world.config(**overrides)


def order_bot(turn: Turn) -> str:
    consent = turn.parafe.require("create_order", details={"item": "lamp"})
    turn.parafe.complete("create_order", business_ref="P-1")
    return f"ordered for {consent.initiator}"


# -- activation and the card (through Starlette) ----------------------------------------------


def test_required_parafe_without_activation_is_extension_support_required(
    kit: Kit, world: World
) -> None:
    provider = kit.provider(
        Brand(id="acme", name="Acme", handler=lambda t: "hi", parafe=config(world, required=True))
    )
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        check_activation(kit, client)


def check_activation(kit: Kit, client: httpx.Client) -> None:
    auth = {"Authorization": kit.token(), "Content-Type": "application/a2a+json"}
    plain = json.dumps({"message": a2a_message("hello")})

    refused = client.post("/a2a/acme/message:send", content=plain, headers=auth)
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/a2a+json"
    error = refused.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "EXTENSION_SUPPORT_REQUIRED",
            "domain": "a2a-protocol.org",
        }
    ]
    assert EXTENSION_URI in error["message"]
    # Every A2A operation, not only message:send.
    tasks = client.get("/a2a/acme/tasks", headers=auth)
    assert tasks.json()["error"]["details"][0]["reason"] == "EXTENSION_SUPPORT_REQUIRED"

    # Activated by the A2A 1.0 header, the 0.3 header, or message.extensions: served.
    for headers in (
        {"A2A-Extensions": f"https://other.example/ext, {EXTENSION_URI}"},
        {"X-A2A-Extensions": EXTENSION_URI},
    ):
        ok = client.post("/a2a/acme/message:send", content=plain, headers={**auth, **headers})
        assert ok.status_code == 200, ok.text
        assert ok.headers["a2a-extensions"] == EXTENSION_URI
    listed = json.dumps({"message": {**a2a_message("hello"), "extensions": [EXTENSION_URI]}})
    assert client.post("/a2a/acme/message:send", content=listed, headers=auth).status_code == 200
    # The card needs no activation (nor authentication).
    assert client.get("/a2a/acme/.well-known/agent-card.json").status_code == 200
    # Authentication still comes first.
    assert client.post("/a2a/acme/message:send", content=plain).status_code == 401


def test_card_extension_shape(kit: Kit, world: World) -> None:
    provider = kit.provider(
        Brand(
            id="acme",
            name="Acme",
            handler=lambda t: "hi",
            parafe=config(world, required=True, minimum_identity_assurance="registered"),
        ),
        Brand(id="plain", name="Plain", handler=lambda t: "hi"),
    )
    with uvicorn_server(A2AProviderApp(provider)) as base, loopback_client(base_url=base) as client:
        card = client.get("/a2a/acme/.well-known/agent-card.json").json()
        plain = client.get("/a2a/plain/.well-known/agent-card.json").json()
    assert card["capabilities"]["extensions"] == [
        {
            "uri": EXTENSION_URI,
            "description": "Parafé brokered trust: mutual authentication and scoped consent",
            "required": True,
            "params": {
                "agent_id": SHOP_AGENT,
                "broker_url": world.url,
                "minimum_identity_assurance": "registered",
                "scope_requirements": {
                    SCOPE: {
                        "permissions": PERMISSIONS,
                        "minimum_authorization_modality": "autonomous",
                    }
                },
            },
        }
    ]
    parsed = parse_card_extension(card)
    assert parsed is not None
    assert (parsed.agent_id, parsed.required) == (SHOP_AGENT, True)
    # A PACT-only Brand's card is unchanged: no `extensions` at all.
    assert plain["capabilities"] == {
        "streaming": False,
        "pushNotifications": False,
        "extendedAgentCard": False,
    }


# -- refusals: messages and tasks -------------------------------------------------------------


@pytest.mark.parametrize("drive", [sync_drive, async_drive], ids=["sync", "async"])
def test_success_reply_carries_the_receipt_and_retries_are_identical(
    kit: Kit, world: World, drive: Any
) -> None:
    provider = kit.provider(Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world)))
    presenter = world.presenter()
    first = send(kit, provider, a2a_message("buy"), drive=drive)
    context_id = body(first)["message"]["contextId"]
    message = presenter.attach(a2a_message("buy a lamp", context_id=context_id))
    response = send(kit, provider, message, drive=drive)
    reply = body(response)["message"]
    assert reply["parts"][0]["text"] == f"ordered for {CALLER_AGENT}"
    (receipt,) = reply["metadata"][EXTENSION_URI]["action_receipts"]
    assert world_receipt(world, receipt).business_ref == "P-1"
    assert ("A2A-Extensions", EXTENSION_URI) in response.headers
    again = send(kit, provider, message, drive=drive)
    assert again.body == response.body
    # The very first message had no consent: refused with MISSING, no receipt.
    refused = body(first)["message"]["metadata"][EXTENSION_URI]
    assert refused == {
        "error": {
            "code": "MISSING_PARAFE_EXTENSION",
            "message": "No Parafe consent token found in the message.",
        }
    }


def test_task_mode_auth_required_keeps_the_message_open(kit: Kit, world: World) -> None:
    provider = kit.provider(
        Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world, refusal="task"))
    )
    first = send(kit, provider, a2a_message("buy a lamp"))
    task = body(first)["task"]
    context_id = task["contextId"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    status_message = task["status"]["message"]
    data = status_message["metadata"][EXTENSION_URI]
    assert data["error"]["code"] == "MISSING_PARAFE_EXTENSION"
    # Unanswered: the same message (same messageId and text) may come again with consent.
    presenter = world.presenter()
    retry = presenter.attach(a2a_message("hi", context_id=context_id))
    ok = body(send(kit, provider, retry))
    assert ok["message"]["parts"][0]["text"].startswith("ordered")


def test_task_mode_rejected_for_another_agents_token(kit: Kit, world: World) -> None:
    provider = kit.provider(
        Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world, refusal="task"))
    )
    presenter = world.presenter(target_id="prf_agent_someone_else")
    response = send(kit, provider, presenter.attach(a2a_message("buy a lamp")))
    task = body(response)["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    data = task["status"]["message"]["metadata"][EXTENSION_URI]
    assert data["error"]["code"] == "WRONG_AUDIENCE"
    (receipt,) = data["action_receipts"]
    verified = world_receipt(world, receipt)
    assert (verified.action, verified.error) == ("create_order", "consent_invalid")


def world_receipt(world: World, receipt: str) -> Any:
    from pactmw.core.fetch import FetchPolicy
    from pactmw.protocols.parafe import BrokerKeys, ReceiptVerifier

    keys = BrokerKeys(world.url, fetch_policy=FetchPolicy(allow_http_on_loopback=True))
    return ReceiptVerifier(keys).verify_action_receipt(receipt)


def test_several_actions_in_one_turn_use_one_proof(kit: Kit, world: World) -> None:
    seen: list[ParafeConsent] = []
    codes: list[str] = []

    def bot(turn: Turn) -> str:
        seen.append(turn.parafe.require("read_orders"))
        seen.append(turn.parafe.require("create_order", business_ref="P-7"))
        turn.parafe.complete("create_order", failed="out of stock")
        try:
            turn.parafe.require("issue_refund")
        except ParafeRefused as refused:
            codes.append(refused.code)
        return "done"

    provider = kit.provider(Brand(id="acme", name="Acme", handler=bot, parafe=config(world)))
    presenter = world.presenter()
    reply = body(send(kit, provider, presenter.attach(a2a_message("go"))))["message"]
    receipts = reply["metadata"][EXTENSION_URI]["action_receipts"]
    checked = [world_receipt(world, r) for r in receipts]
    assert [(c.action, c.result, c.error) for c in checked] == [
        ("read_orders", "success", None),
        ("create_order", "error", "failed"),
        ("issue_refund", "error", "excluded"),
    ]
    assert checked[1].business_ref == "P-7"
    assert codes == ["SCOPE_VIOLATION"]
    assert checked[1].claims["error_description"] == "out of stock"
    # What the bot saw: claims, never the token or the proof.
    consent = seen[0]
    assert (consent.scope, consent.session_id, consent.proof_verified) == (
        SCOPE,
        presenter.session_id,
        True,
    )
    assert consent.modality == "attested"
    assert presenter.token not in repr(consent)
    values = [getattr(consent, a.name) for a in attrs.fields(ParafeConsent)]
    assert not any(presenter.token in str(v) for v in values)
    proof = presenter.proof()
    assert not any(proof.split(".")[2] in str(v) for v in values)


def test_an_async_bot_uses_arequire(kit: Kit, world: World) -> None:
    async def bot(turn: Turn) -> str:
        consent = await turn.parafe.arequire("create_order")
        return f"ok {consent.action}"

    provider = kit.provider(Brand(id="acme", name="Acme", handler=bot, parafe=config(world)))
    message = world.presenter().attach(a2a_message("go"))
    reply = body(send(kit, provider, message, drive=async_drive))
    assert reply["message"]["parts"][0]["text"] == "ok create_order"
    # A replay of the same message in a new conversation: the proof is spent.
    replay = body(send(kit, provider, message, drive=async_drive))
    error = replay["message"]["metadata"][EXTENSION_URI]["error"]
    assert error["code"] == "INVALID_PROOF"
    assert "already used" in error["message"]


def test_a_bot_without_parafe_configuration(kit: Kit) -> None:
    def bot(turn: Turn) -> str:
        assert not turn.parafe.enabled
        turn.parafe.require("create_order")  # a configuration bug: RuntimeError
        return "unreachable"

    provider = kit.provider(Brand(id="acme", name="Acme", handler=bot))
    response = send(kit, provider, a2a_message("go"), headers=())
    assert response.status == 500


# -- handshakes and session_closed ------------------------------------------------------------


def test_handshake_challenge_is_answered_with_the_consent_token(kit: Kit, world: World) -> None:
    def complete(challenge: HandshakeChallenge, agent: ParafeAgent) -> HandshakeComplete:
        # A test-only broker endpoint: the reference does not give this call's wire format.
        status, answer = agent.broker_post(
            TEST_HANDSHAKE_PATH,
            {"handshake_id": challenge.handshake_id, "challenge": challenge.challenge},
            target_agent_id=agent.config.agent_id,
            requested_scope=challenge.requested_scope,
        )
        assert status == 200
        return HandshakeComplete(
            handshake_id=challenge.handshake_id,
            status="authenticated",
            session_id=answer["session_id"],
            consent_token=answer["consent_token"],
        )

    parafe = config(world, handshake=complete, credential=CREDENTIAL)
    provider = kit.provider(Brand(id="acme", name="Acme", handler=order_bot, parafe=parafe))
    presenter = world.presenter()
    world.broker.pending_handshakes["hs_1"] = {
        "session_id": presenter.session_id,
        "consent_token": presenter.token,
    }
    challenge = {
        "handshake_id": "hs_1",
        "challenge": "ab" * 32,
        "initiator_agent_id": CALLER_AGENT,
        "broker_url": world.url,
        "requested_scope": SCOPE,
        "requested_permissions": PERMISSIONS,
    }
    message = with_parafe(a2a_message("I'd like to order"), {"handshake_challenge": challenge})
    reply = body(send(kit, provider, message))["message"]
    data = reply["metadata"][EXTENSION_URI]
    assert data["handshake_complete"] == {
        "handshake_id": "hs_1",
        "status": "authenticated",
        "session_id": presenter.session_id,
        "consent_token": presenter.token,
    }
    # The bot ran too; its require found no consent (a challenge), so the reply is a refusal
    # text, but the member is the handshake answer.
    assert "error" not in data
    (call,) = world.broker.handshake_requests
    assert call["body"]["handshake_id"] == "hs_1"
    assert call["authorization"] == f"Bearer {CREDENTIAL}"
    pop = parse_compact(call["pop"], allowed_algs=frozenset({"EdDSA"}))
    verify_signature(pop, world.shop_key.public)
    claims = pop.claims()
    assert pop.header == {"alg": "EdDSA", "typ": "parafe-pop+jwt"}
    assert claims["htm"] == "POST"
    assert claims["htu"] == world.url + TEST_HANDSHAKE_PATH
    assert (claims["target_agent_id"], claims["requested_scope"]) == (SHOP_AGENT, SCOPE)

    # The caller now uses the token it got, with a proof: the order goes through.
    token = data["handshake_complete"]["consent_token"]
    assert token == presenter.token
    follow_up = presenter.attach(a2a_message("buy", context_id=reply["contextId"]))
    ok = body(send(kit, provider, follow_up))
    assert ok["message"]["parts"][0]["text"].startswith("ordered")


def test_handshakes_with_other_brokers_or_without_a_completer(kit: Kit, world: World) -> None:
    brand = Brand(id="acme", name="Acme", handler=lambda t: "hi", parafe=config(world))
    provider = kit.provider(brand)
    base = {
        "handshake_id": "hs_2",
        "challenge": "cd" * 32,
        "initiator_agent_id": CALLER_AGENT,
        "broker_url": world.url,
        "requested_scope": SCOPE,
    }
    for challenge, status in (
        ({**base, "broker_url": "https://evil.example"}, "rejected"),
        ({**base, "requested_scope": "undeclared"}, "rejected"),
        (base, "error"),  # no completer configured: not supported
    ):
        message = with_parafe(a2a_message("hello"), {"handshake_challenge": challenge})
        data = body(send(kit, provider, message))["message"]["metadata"][EXTENSION_URI]
        assert data["handshake_complete"]["status"] == status
        assert data["handshake_complete"]["handshake_id"] == "hs_2"
        assert "consent_token" not in data["handshake_complete"]


def test_session_closed_refuses_the_sessions_tokens(kit: Kit, world: World) -> None:
    provider = kit.provider(Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world)))
    presenter = world.presenter()
    ok = body(send(kit, provider, presenter.attach(a2a_message("buy"))))
    assert ok["message"]["parts"][0]["text"].startswith("ordered")

    # A forged receipt (not the broker's) changes nothing.
    forged = world.broker.session_receipt(presenter.session_id)
    forged = forged[:-4] + ("AAAA" if not forged.endswith("AAAA") else "BBBB")
    closed = {"session_closed": {"session_id": presenter.session_id, "receipt": forged}}
    closing = with_parafe(a2a_message("bye"), closed)
    send(kit, provider, closing)
    still = body(send(kit, provider, presenter.attach(a2a_message("buy"))))
    assert still["message"]["parts"][0]["text"].startswith("ordered")

    receipt = world.broker.session_receipt(presenter.session_id)
    closing = with_parafe(
        a2a_message("done"),
        {"session_closed": {"session_id": presenter.session_id, "receipt": receipt}},
    )
    send(kit, provider, closing)
    refused = body(send(kit, provider, presenter.attach(a2a_message("buy"))))
    error = refused["message"]["metadata"][EXTENSION_URI]["error"]
    assert error["code"] == "INVALID_CONSENT_TOKEN"
    assert "session is closed" in error["message"]


# -- no tokens in logs ------------------------------------------------------------------------


def test_tokens_and_proofs_never_reach_the_logs(
    kit: Kit, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = kit.provider(Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world)))
    presenter = world.presenter()
    message = presenter.attach(a2a_message("buy"))
    send(kit, provider, message)
    send(kit, provider, message)  # a replay: refused
    bad = world.presenter(target_id="prf_agent_nobody")
    send(kit, provider, bad.attach(a2a_message("buy")))
    proof = message["metadata"][EXTENSION_URI]["consent"]["proof"]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "Parafé refused" in logged
    for secret in (presenter.token, proof, bad.token, CREDENTIAL):
        assert secret not in logged


def test_a_broker_outage_is_logged_as_one(
    kit: Kit, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # The broker's JWKS cannot be fetched: the reply keeps the reference's code, and neither
    # it nor the log line points at the token.
    caplog.set_level(logging.INFO, logger="pactmw.provider.parafe")
    down = config(world, broker_url=unreachable_url())
    provider = kit.provider(Brand(id="acme", name="Acme", handler=order_bot, parafe=down))
    presenter = world.presenter()
    refused = body(send(kit, provider, presenter.attach(a2a_message("buy"))))
    error = refused["message"]["metadata"][EXTENSION_URI]["error"]
    assert error["code"] == "INVALID_CONSENT_TOKEN"
    assert "tampered" not in error["message"]
    [line] = [r for r in caplog.records if r.getMessage().startswith("Parafé refused")]
    assert line.levelno == logging.WARNING
    assert "INVALID_CONSENT_TOKEN" in line.getMessage()
    assert "KEY_FETCH_FAILED" in line.getMessage()


# -- receipt filing ---------------------------------------------------------------------------


def test_filing_retries_treats_duplicates_as_success_and_gives_up_on_refusals(
    world: World,
) -> None:
    filer = ReceiptFiler(
        broker_url=world.url,
        credential=CREDENTIAL,
        key=world.shop_key,
        policy=ParafeConfig(
            agent_id=SHOP_AGENT, broker_url=world.url, allow_http_broker_on_loopback=True
        ).fetch_policy(),
        retry=BrokerRetry(backoff=0.01),
    )
    answers = iter([(503, {"error": "unavailable"}), None])
    world.broker.filing_answer = lambda record: next(answers, None)
    try:
        filer.submit([Filing("sess_a", "a.b.c")])
        assert filer.flush(10)
        assert filer.outcomes["filed"] == 1
        filer.submit([Filing("sess_a", "a.b.c")])  # again: the broker says duplicate
        assert filer.flush(10)
        assert filer.outcomes["duplicate"] == 1
        world.broker.filing_answer = lambda record: (409, {"error": "session_closed"})
        filer.submit([Filing("sess_b", "d.e.f")])
        assert filer.flush(10)
        assert filer.outcomes["rejected"] == 1
        world.broker.filing_answer = lambda record: (500, {"error": "internal"})
        filer.submit([Filing("sess_c", "g.h.i")])
        assert filer.flush(10)
        assert filer.outcomes["failed"] == 1
    finally:
        world.broker.filing_answer = None
        filer.close()


# -- configuration ----------------------------------------------------------------------------


def test_settings_read_the_parafe_table(world: World) -> None:
    parsed = settings(world, world.parafe_table(online=[SCOPE], refusal="task", required=True))
    parafe = parsed.brands[0].parafe
    assert parafe is not None
    assert parafe.agent_id == SHOP_AGENT
    assert parafe.signing_key is not None
    assert parafe.signing_key.public.thumbprint == world.shop_key.public.thumbprint
    assert parafe.credential == CREDENTIAL
    assert (parafe.online, parafe.online_scopes) == (False, frozenset({SCOPE}))
    assert (parafe.refusal, parafe.required, parafe.file_receipts) == ("task", True, True)
    assert parafe.did == f"did:web:api.parafe.ai:agents:{SHOP_AGENT}"
    assert CREDENTIAL not in repr(parafe)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"agent_id": None}, "agent_id is required"),
        ({"colour": "blue"}, "unknown configuration key brands.acme.parafe.colour"),
        ({"online": ["nope"]}, "online names scopes not in scope_requirements"),
        # Both forms the table takes are named, not only the list.
        ({"online": "maybe"}, r"online must be true, false or a list of scope names"),
        ({"broker_url": "http://broker.example"}, "must be https"),
        # The setting that would allow it is named as the table spells it (the fetch
        # policy's allow_http_on_loopback is an unknown key there).
        (
            {"allow_http_broker_on_loopback": False},
            r"must be https \(http only to loopback, with allow_http_broker_on_loopback\)",
        ),
        ({"signing_key": "/nonexistent.jwk"}, "cannot read"),
        ({"refusal": "shout"}, "refusal must be"),
        ({"required": "yes"}, "must be true or false"),
        (
            {"scope_requirements": {SCOPE: {"permissions": "all"}}},
            "permissions must be an array",
        ),
        ({"credential_file": None}, "credential_file must be the path of a file"),
    ],
)
def test_settings_refuse_bad_parafe_tables(
    world: World, change: dict[str, Any], message: str
) -> None:
    table = world.parafe_table()
    for key, value in change.items():
        if value is None and key == "agent_id":
            del table[key]
        else:
            table[key] = value
    with pytest.raises(ConfigError, match=message):
        settings(world, table)


def test_file_receipts_needs_a_credential(world: World) -> None:
    table = world.parafe_table()
    del table["credential_file"]
    with pytest.raises(ConfigError, match="file_receipts needs signing_key"):
        settings(world, table)


def test_more_than_fifty_actions_in_one_turn_is_a_bot_error(kit: Kit, world: World) -> None:
    def bot(turn: Turn) -> str:
        for _ in range(51):
            turn.parafe.require("read_orders")
        return "never"

    provider = kit.provider(Brand(id="acme", name="Acme", handler=bot, parafe=config(world)))
    response = send(kit, provider, world.presenter().attach(a2a_message("go")))
    assert response.status == 500


def test_a_bots_own_parafe_error_is_a_bot_failure(kit: Kit, world: World) -> None:
    # Only `ParafeRefused` (from require) becomes a refusal reply; any other ParafeError (a
    # bot checking a receipt itself, say) is a failure like any other: 500, message open.
    def bot(turn: Turn) -> str:
        raise ParafeError("MALFORMED", "a receipt the bot checked")

    provider = kit.provider(Brand(id="acme", name="Acme", handler=bot, parafe=config(world)))
    assert send(kit, provider, a2a_message("go")).status == 500


# -- online verification ----------------------------------------------------------------------


def test_online_scopes_ask_the_broker_and_its_refusal_is_the_answer(kit: Kit, world: World) -> None:
    outcomes: list[str] = []

    def bot(turn: Turn) -> str:
        for action in ("read_orders", "create_order"):
            try:
                consent = turn.parafe.require(action)
                outcomes.append(f"{action}: online {consent.online_verified}")
            except ParafeRefused as refused:
                outcomes.append(f"{action}: {refused.code} {refused.message}")
        return "done"

    brand = Brand(id="acme", name="Acme", handler=bot, parafe=config(world, online=True))
    provider = kit.provider(brand)
    broker = world.broker

    def answer(body: dict[str, Any]) -> tuple[int, Any]:
        if body["action"] == "create_order":
            return 401, {"valid": False, "error": "session_inactive", "reason": "closed"}
        return 200, {"valid": True, "permitted": True, "action": body["action"]}

    broker.verify_answer = answer
    broker.requests.clear()
    try:
        presenter = world.presenter()
        reply = body(send(kit, provider, presenter.attach(a2a_message("go"))))["message"]
    finally:
        broker.verify_answer = (200, {"valid": True, "permitted": True, "action": "create_order"})
    assert outcomes[0] == "read_orders: online True"
    # The broker's refusal, not a spent proof: the offline result was kept.
    assert outcomes[1].startswith("create_order: INVALID_CONSENT_TOKEN")
    assert "session is closed or expired" in outcomes[1]
    asked = [body for method, path, body in broker.requests if path == "/consent/verify"]
    assert [a["action"] for a in asked] == ["read_orders", "create_order"]
    assert all(a["agent_id"] == SHOP_AGENT for a in asked)
    assert "proof" in asked[0]
    assert "proof" not in asked[1]  # the proof goes with the message's first check only
    receipts = reply["metadata"][EXTENSION_URI]["action_receipts"]
    assert [world_receipt(world, r).error for r in receipts] == [None, "consent_invalid"]


# -- broker outages ---------------------------------------------------------------------------


def test_a_broker_outage_refusal_is_not_stored_so_the_resent_message_is_answered(
    kit: Kit, world: World
) -> None:
    # The broker's JWKS cannot be fetched: the message is refused "try again later", and no
    # proof was spent (the replay record comes after the keys). Once the broker is back, the
    # very same message (messageId, proof and all) is answered, not the stored outage.
    provider = kit.provider(Brand(id="acme", name="Acme", handler=order_bot, parafe=config(world)))
    presenter = world.presenter()
    opened = body(send(kit, provider, presenter.attach(a2a_message("hello"))))["message"]
    # A message of that conversation: its messageId is what the store answers retries by.
    message = presenter.attach(a2a_message("buy", context_id=opened["contextId"]))
    shop = provider.parafe_agent("acme")
    # Fresh keys, so the outage meets an empty cache; and no second's wait (the default)
    # before they are fetched again after the failure.
    keys = BrokerKeys(world.url, fetch_policy=shop.config.fetch_policy(), retry_without_keys=0)
    provider.parafe["acme"] = ParafeAgent(shop.config, store=provider.store, keys=keys)
    world.broker.mode = "fail"
    try:
        refused = body(send(kit, provider, message))["message"]
    finally:
        world.broker.mode = "ok"
    error = refused["metadata"][EXTENSION_URI]["error"]
    assert error["code"] == "INVALID_CONSENT_TOKEN"
    assert "try again later" in error["message"]

    answered = body(send(kit, provider, message))["message"]
    assert "error" not in answered["metadata"][EXTENSION_URI]
    assert answered["parts"][0]["text"] == f"ordered for {CALLER_AGENT}"
    # Answered now, and stored like any reply: a retry gets it again.
    assert body(send(kit, provider, message))["message"] == answered


def test_an_online_check_outage_is_not_stored_and_a_fresh_proof_passes(
    kit: Kit, world: World
) -> None:
    # The broker cannot be asked online (static keys have no broker to post to): the proof
    # is spent by then, but the refusal is not the message's answer. Sent again with a fresh
    # proof once the broker answers, the same messageId is checked again and accepted.
    shop_config = config(world, online=True)
    provider = kit.provider(Brand(id="acme", name="Acme", handler=order_bot, parafe=shop_config))
    shop = provider.parafe_agent("acme")
    presenter = world.presenter()
    opened = body(send(kit, provider, presenter.attach(a2a_message("hello"))))["message"]
    plain = a2a_message("buy", context_id=opened["contextId"])
    offline = StaticBrokerKeys(
        world.broker.jwks, did_documents=world.broker.did_documents, broker_url=world.url
    )
    provider.parafe["acme"] = ParafeAgent(shop_config, store=provider.store, keys=offline)
    refused = body(send(kit, provider, presenter.attach(plain)))["message"]
    error = refused["metadata"][EXTENSION_URI]["error"]
    assert error["code"] == "INVALID_CONSENT_TOKEN"
    assert "Could not reach Parafe broker" in error["message"]

    provider.parafe["acme"] = shop
    answered = body(send(kit, provider, presenter.attach(plain)))["message"]
    assert answered["messageId"] != refused["messageId"]
    assert "error" not in answered["metadata"][EXTENSION_URI]
    assert answered["parts"][0]["text"] == f"ordered for {CALLER_AGENT}"


def test_an_outage_after_a_permitted_action_keeps_the_reply(kit: Kit, world: World) -> None:
    # The turn permitted an action before the outage refusal: its reply is stored, so what
    # the bot did for it is never done twice.
    runs: list[str] = []

    def bot(turn: Turn) -> str:
        turn.parafe.require("create_order")
        runs.append("ordered")
        outage = ParafeError("INVALID_CONSENT_TOKEN", "try again later", cause="KEY_FETCH_FAILED")
        raise ParafeRefused(outage, "read_orders")

    provider = kit.provider(Brand(id="acme", name="Acme", handler=bot, parafe=config(world)))
    presenter = world.presenter()
    opened = body(send(kit, provider, presenter.attach(a2a_message("hello"))))["message"]
    assert runs == ["ordered"]
    message = presenter.attach(a2a_message("buy", context_id=opened["contextId"]))
    first = body(send(kit, provider, message))["message"]
    assert first["metadata"][EXTENSION_URI]["error"]["message"] == "try again later"
    assert body(send(kit, provider, message))["message"] == first
    assert runs == ["ordered", "ordered"]
