"""AP2 beside Parafé in the Provider (spec §5.3), as the reference's interop test
(tests/interop/ap2.test.ts) runs it: the card declares both extensions, a shopping agent sends
a consent and an AP2 mandate in one message, the merchant's bot verifies the consent, reads the
mandate and answers with a signed AP2 Checkout Receipt in a data part, filed with its kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pactmw.config import ConfigError
from pactmw.core.jose import parse_compact, verify_signature
from pactmw.protocols.parafe import (
    AP2_EXTENSION_URI,
    EXTENSION_URI,
    Ap2Data,
    Ap2Outcome,
    MandateRef,
    agent_did,
    mandate_references,
    read_ap2,
    with_ap2,
)
from pactmw.provider import Brand, Turn, build_card
from pactmw.provider.parafe import ParafeAgent, ParafeRefused
from tests.parafe_integration.support import (
    CREDENTIAL,
    SHOP_AGENT,
    World,
    a2a_message,
    body,
    send,
    settings,
)
from tests.provider import Kit

VECTORS = json.loads(
    (Path(__file__).parents[1] / "parafe" / "fixtures" / "ap2-sdk-vectors.json").read_text()
)["vectors"]
MANDATE = VECTORS[0]["chain"]
REFERENCES = mandate_references(MANDATE)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    world = World(tmp_path_factory.mktemp("parafe-ap2"), shop_alg="ES256")  # AP2 is ES256
    yield world
    world.close()


def merchant(turn: Turn) -> str:
    consent = turn.parafe.require("create_order")
    assert turn.parafe.ap2 is not None
    signed = turn.parafe.ap2_receipt("checkout", Ap2Outcome(order_id="ord_7"))
    return f"ordered {signed.reference} for {consent.initiator}"


def refusing_merchant(turn: Turn) -> str:
    try:
        turn.parafe.require("create_order")
    except ParafeRefused:
        # Accepted or not, an AP2 merchant answers a Checkout Mandate with a receipt.
        outcome = Ap2Outcome(error="invalid_mandate", error_description="consent refused")
        turn.parafe.ap2_receipt("checkout", outcome)
        raise
    return "ordered"


def shop(kit: Kit, world: World, handler: Any, **overrides: Any) -> Any:
    parafe = world.config(ap2=True, file_receipts=True, credential=CREDENTIAL, **overrides)
    return kit.provider(Brand(id="acme", name="Acme", handler=handler, parafe=parafe))


def test_the_card_lists_parafe_then_ap2(world: World) -> None:
    card = build_card(
        Brand(id="acme", name="Acme", handler=merchant, parafe=world.config(ap2=True)),
        base_url="https://shop.example",
    )
    uris = [entry["uri"] for entry in card["capabilities"]["extensions"]]
    assert uris == [EXTENSION_URI, AP2_EXTENSION_URI]
    assert card["capabilities"]["extensions"][1] == {
        "uri": AP2_EXTENSION_URI,
        "description": "Supports the Agent Payments Protocol.",
        "required": False,
    }
    plain = build_card(
        Brand(id="acme", name="Acme", handler=merchant, parafe=world.config()),
        base_url="https://shop.example",
    )
    assert [e["uri"] for e in plain["capabilities"]["extensions"]] == [EXTENSION_URI]


def test_consent_and_mandate_in_one_message_get_a_checkout_receipt(kit: Kit, world: World) -> None:
    provider = shop(kit, world, merchant)
    presenter = world.presenter()
    context_id = body(send(kit, provider, a2a_message("hello")))["message"]["contextId"]
    sent = presenter.attach(a2a_message("buy", context_id=context_id))
    message = with_ap2(sent, Ap2Data(checkout_mandate=MANDATE))
    response = send(kit, provider, message)
    reply = body(response)["message"]
    assert reply["parts"][0]["text"].startswith(f"ordered {REFERENCES.closed_jwt}")
    # The Parafé action receipt in metadata, the AP2 receipt in a data part.
    (action_receipt,) = reply["metadata"][EXTENSION_URI]["action_receipts"]
    ap2 = read_ap2(reply)
    assert ap2 is not None
    assert isinstance(ap2.checkout_receipt, str)
    assert AP2_EXTENSION_URI in reply["extensions"]
    jws = parse_compact(ap2.checkout_receipt, allowed_algs=frozenset({"ES256"}))
    verify_signature(jws, world.shop_key.public)
    assert dict(jws.header) == {
        "alg": "ES256",
        "typ": "JWT",
        "kid": f"{agent_did(SHOP_AGENT)}#keys-1",
    }
    claims = jws.claims()
    assert claims["reference"] == REFERENCES.closed_jwt
    assert (claims["status"], claims["order_id"]) == ("Success", "ord_7")
    assert claims["iss"] == agent_did(SHOP_AGENT)
    # A retry returns the stored reply byte for byte: no second receipt is signed.
    assert send(kit, provider, message).body == response.body
    # Both receipts are filed under the session, the AP2 one with its kind, and acknowledged.
    agent: ParafeAgent = provider.parafe_agent("acme")
    assert agent.filer is not None
    assert agent.filer.flush(10)
    kinds = {
        (r["session_id"], r["body"]["receipt"]): r["body"].get("kind") for r in world.broker.filed
    }
    assert kinds[(presenter.session_id, action_receipt)] is None
    assert kinds[(presenter.session_id, ap2.checkout_receipt)] == "ap2.checkout_receipt"
    filed = agent.acknowledgment(ap2.checkout_receipt)
    assert filed is not None
    assert (filed.kind, filed.ack.kind) == ("ap2.checkout_receipt", "ap2.checkout_receipt")
    assert [f.receipt for f in agent.acknowledgments(presenter.session_id)] == [
        action_receipt,
        ap2.checkout_receipt,
    ]


def test_a_refused_consent_still_gets_its_ap2_receipt_unfiled(kit: Kit, world: World) -> None:
    provider = shop(kit, world, refusing_merchant)
    stranger = world.presenter(target_id="prf_agent_someone_else")  # WRONG_AUDIENCE
    message = with_ap2(stranger.attach(a2a_message("buy")), Ap2Data(checkout_mandate=MANDATE))
    reply = body(send(kit, provider, message))["message"]
    assert reply["metadata"][EXTENSION_URI]["error"]["code"] == "WRONG_AUDIENCE"
    ap2 = read_ap2(reply)
    assert ap2 is not None
    assert isinstance(ap2.checkout_receipt, str)
    claims = parse_compact(ap2.checkout_receipt, allowed_algs=frozenset({"ES256"})).claims()
    assert (claims["status"], claims["error"]) == ("Error", "invalid_mandate")
    agent: ParafeAgent = provider.parafe_agent("acme")
    assert agent.filer is not None
    assert agent.filer.flush(10)
    # No verified consent: no session to file it under.
    assert all(r["body"]["receipt"] != ap2.checkout_receipt for r in world.broker.filed)


def test_the_bot_sees_the_mandates_the_broker_verified(kit: Kit, world: World) -> None:
    refs = [{"family": "checkout", "closed_jwt": REFERENCES.closed_jwt, "sd_hash": "x"}]
    seen: list[Any] = []

    def bot(turn: Turn) -> str:
        consent = turn.parafe.require("create_order")
        seen.append(consent.mandates)
        return "ok"

    provider = kit.provider(Brand(id="acme", name="Acme", handler=bot, parafe=world.config()))
    presenter = world.presenter(authorization_modality="delegated", mandate_refs=refs)
    body(send(kit, provider, presenter.attach(a2a_message("buy"))))
    (mandates,) = seen
    assert mandates == (
        MandateRef(family="checkout", closed_jwt=REFERENCES.closed_jwt, sd_hash="x"),
    )
    assert mandates[0].matches(REFERENCES)


def test_ap2_receipts_are_refused_when_they_cannot_be_made(
    world: World, tmp_path_factory: pytest.TempPathFactory
) -> None:
    agent = ParafeAgent(world.config())
    no_mandate = agent.turn(a2a_message("buy"))
    with pytest.raises(ValueError, match="no checkout mandate"):
        no_mandate.ap2_receipt("checkout", Ap2Outcome(order_id="o"))
    twice = agent.turn(with_ap2(a2a_message("buy"), Ap2Data(checkout_mandate=MANDATE)))
    twice.ap2_receipt("checkout", Ap2Outcome(order_id="o"))
    with pytest.raises(ValueError, match="already has an AP2 checkout receipt"):
        twice.ap2_receipt("checkout", Ap2Outcome(order_id="o"))
    # A payment receipt beside it is fine, for a mandate given explicitly.
    paid = twice.ap2_receipt(
        "payment",
        Ap2Outcome(payment_id="p", psp_confirmation_id="a", network_confirmation_id="b"),
        REFERENCES,
    )
    assert twice.ap2_reply == Ap2Data(
        checkout_receipt=twice.ap2_reply.checkout_receipt if twice.ap2_reply else None,
        payment_receipt=paid.receipt,
    )
    unsigned = ParafeAgent(world.config(signing_key=None))
    with pytest.raises(RuntimeError, match="signing_key"):
        unsigned.turn(a2a_message("x")).ap2_receipt("checkout", Ap2Outcome(order_id="o"), MANDATE)
    ed = World(tmp_path_factory.mktemp("parafe-ap2-ed"), shop_alg="EdDSA")
    try:
        turn = ParafeAgent(ed.config()).turn(a2a_message("x"))
        with pytest.raises(ValueError, match="P-256"):
            turn.ap2_receipt("checkout", Ap2Outcome(order_id="o"), MANDATE)
    finally:
        ed.close()


def test_an_app_endpoint_reply_gets_the_ap2_receipt_too(world: World) -> None:
    agent = ParafeAgent(world.config())
    presenter = world.presenter()
    message = with_ap2(presenter.attach(a2a_message("buy")), Ap2Data(checkout_mandate=MANDATE))
    turn = agent.turn(message)
    turn.require("create_order")
    signed = turn.ap2_receipt("checkout", Ap2Outcome(order_id="ord_1"))
    reply = {"message": {"messageId": "r-1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
    out = agent.finish(turn, json.dumps(reply).encode(), "application/json")
    assert out is not None
    finished = json.loads(out)["message"]
    assert read_ap2(finished) == Ap2Data(checkout_receipt=signed.receipt)
    assert len(finished["metadata"][EXTENSION_URI]["action_receipts"]) == 1


def test_settings_read_ap2_and_broker_retries(world: World) -> None:
    parsed = settings(world, world.parafe_table(ap2=True, broker_retries=1))
    parafe = parsed.brands[0].parafe
    assert parafe is not None
    assert parafe.ap2
    assert parafe.broker_retry.retries == 1
    changes: list[tuple[dict[str, Any], str]] = [
        ({"ap2": "yes"}, "ap2 must be true or false"),
        ({"broker_retries": 11}, "broker_retries must be a whole number from 0 to 10"),
        ({"broker_retries": True}, "broker_retries must be a whole number"),
    ]
    for change, message in changes:
        with pytest.raises(ConfigError, match=message):
            settings(world, world.parafe_table(**change))


def test_only_a_brand_that_declares_ap2_takes_ap2_data_parts(kit: Kit, world: World) -> None:
    with_mandate = with_ap2(a2a_message("buy"), Ap2Data(checkout_mandate=MANDATE))
    other = {**a2a_message("buy"), "parts": [{"text": "buy"}, {"data": {"colour": "red"}}]}
    mixed = {
        **a2a_message("buy"),
        "parts": [{"text": "buy"}, {"data": {"ap2.PaymentReceipt": "a.b.c", "colour": "red"}}],
    }
    plain = kit.provider(
        Brand(id="acme", name="Acme", handler=lambda t: "hi", parafe=world.config())
    )
    ap2 = kit.provider(
        Brand(id="acme", name="Acme", handler=lambda t: t.text, parafe=world.config(ap2=True))
    )
    for provider, message in ((plain, with_mandate), (ap2, other), (ap2, mixed)):
        refused = send(kit, provider, message)
        assert refused.status == 400
        assert json.loads(refused.body)["error"]["details"][0]["reason"] == (
            "CONTENT_TYPE_NOT_SUPPORTED"
        )
    # Accepted: the bot's text is the text parts only.
    assert body(send(kit, ap2, with_mandate))["message"]["parts"][0]["text"] == "buy"
