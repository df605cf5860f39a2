"""Parafé (A2A extension v2) from the personal agent's side: a reorder with a consent token
from the stand-in broker, its action receipt verified, then the very same proof replayed."""

from __future__ import annotations

import uuid
from typing import Any

from pactmw.client import MessageReply, fetch_card
from pactmw.core.fetch import FetchPolicy
from pactmw.demo._agent import PersonalAgent, reply_of
from pactmw.demo._broker import PARAFE_SCOPE, DemoBroker
from pactmw.demo._common import DemoFailed, acme_card_url, expect
from pactmw.demo._transcript import Transcript
from pactmw.protocols.parafe import (
    EXTENSION_URI,
    BrokerKeys,
    ParafeError,
    ReceiptVerifier,
    consent_ref,
    parse_card_extension,
)


def _parafe_data(reply: MessageReply) -> Any:
    metadata = reply.message.get("metadata") or {}
    return metadata.get(EXTENSION_URI, {})


def parafe_turn(
    t: Transcript,
    agent: PersonalAgent,
    broker: DemoBroker,
    base_url: str,
    interface: str,
    sub: str,
    audience: str,
) -> None:
    """One Parafé-verified action and its receipt, then the same proof replayed."""
    wire = agent.wire
    card = fetch_card(acme_card_url(base_url), transport=wire)
    entry = parse_card_extension(dict(card.raw))
    if entry is None:
        raise DemoFailed("card: no Parafé entry in capabilities.extensions")
    t.note(f"card: extension {EXTENSION_URI}, required {str(entry.required).lower()}")
    t.note(f"  agent {entry.agent_id}; scope {PARAFE_SCOPE!r} permits create_order")
    presenter = broker.consent()
    t.note(f"the broker (a stand-in on {broker.url}) issued the PA a consent token:")
    t.note(f"  ES256, scope {PARAFE_SCOPE!r}, session {presenter.session_id[:13]}…, 300 s,")
    t.note("  bound to the PA's Ed25519 key (cnf.jkt); the PA adds a fresh proof per message")
    text = "Please reorder A-1001."
    message_id = str(uuid.uuid4())
    consent = {EXTENSION_URI: presenter.data(message_id)}  # the proof names this messageId
    client = agent.client(interface, sub, audience)

    def send(what: str) -> MessageReply:
        sent = client.send(
            text, message_id=message_id, metadata=consent, extensions=[EXTENSION_URI]
        )
        return reply_of(sent, what)

    t.say("PA", "Acme", text)
    t.note("(metadata: consent {token, session_id, proof}; header A2A-Extensions)")
    reply = send("Parafé turn")
    t.say("Acme", "PA", reply.text)
    status, activated = wire.last.status, wire.last.header("A2A-Extensions")
    data = _parafe_data(reply)
    receipts = data.get("action_receipts")
    expect(
        isinstance(receipts, list) and len(receipts) == 1 and "error" not in data,
        f"Parafé turn: expected one action receipt, got {data}",
    )
    keys = BrokerKeys(broker.url, fetch_policy=FetchPolicy(allow_http_on_loopback=True))
    verifier = ReceiptVerifier(keys)
    try:
        receipt = verifier.verify_action_receipt(
            receipts[0], expected_session_id=presenter.session_id
        )
    except ParafeError as exc:
        raise DemoFailed(f"Parafé receipt: {exc.code} {exc.message}") from exc
    expect(
        receipt.action == "create_order"
        and receipt.result == "success"
        and receipt.consent_ref == consent_ref(presenter.token)
        and receipt.business_ref is not None
        and str(receipt.business_ref) in reply.text,
        f"Parafé receipt: unexpected claims {dict(receipt.claims)}",
    )
    t.note(f"{status} OK; A2A-Extensions: {activated}")
    t.note("action receipt verified with Acme's DID document (fetched from the broker):")
    t.note(f"  kid {receipt.key_id}")
    ref = receipt.business_ref
    t.note(f"  action {receipt.action}, result {receipt.result}, business_ref {ref},")
    t.note("  consent_ref = SHA-256 of the consent token (the proof's ath)")
    t.say("PA", "Acme", text)
    t.note("(the very same message replayed: same proof, a new conversation)")
    data = _parafe_data(send("Parafé replay"))
    error = data.get("error", {})
    expect(error.get("code") == "INVALID_PROOF", f"Parafé replay: got {data}")
    refusal = verifier.verify_action_receipt(data["action_receipts"][0])
    expect(refusal.error == "proof_invalid", f"Parafé replay receipt: {refusal.error}")
    t.note(f"  → {error['code']}: {error['message']!r}")
    t.note(f"  refusal receipt verified: action {refusal.action}, error {refusal.error}")


__all__ = [
    "parafe_turn",
]
