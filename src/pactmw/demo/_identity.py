"""PACT Identity, as the personal agent lives it: the card, a conversation where every
request carries a JWT it signs, a retry, and the Provider's refusals."""

from __future__ import annotations

import uuid
from pathlib import Path

from pactmw.client import InvalidParams, card_interface_url, fetch_card
from pactmw.demo._agent import PersonalAgent, refusal, reply_of
from pactmw.demo._common import acme_card_url, expect
from pactmw.demo._server import bot_runs
from pactmw.demo._transcript import Transcript


class IdentityPart:
    """One user's conversation with Acme, a step per method."""

    def __init__(self, t: Transcript, agent: PersonalAgent, audience: str, bot_log: Path) -> None:
        self.t = t
        self.agent = agent
        self.audience = audience
        self.bot_log = bot_log
        self.sub = "user-" + uuid.uuid4().hex[:8]

    def read_card(self, base_url: str) -> str:
        """Fetch and check the card; return the HTTP+JSON 1.0 interface URL."""
        t, wire = self.t, self.agent.wire
        card_url = acme_card_url(base_url)
        card = fetch_card(card_url, transport=wire)
        # Personal agents pick the interface by binding and version, not by position.
        interface = card_interface_url(card)
        scheme = next(iter(card.security_requirements[0].get("schemes", {})), "")
        bearer = card.security_schemes.get(scheme, {}).get("httpAuthSecurityScheme", {})
        expect(
            bearer.get("scheme") == "Bearer" and bearer.get("bearerFormat") == "JWT",
            f"card: security scheme {scheme!r} is not a Bearer JWT",
        )
        t.note(f"GET {card_url} → {wire.last.status}")
        t.note(f"card: name {card.name!r}")
        t.note(f"card: interface {interface} (HTTP+JSON 1.0)")
        t.note(f"card: identity scheme {scheme!r} (Bearer, JWT)")
        return interface

    def describe_token(self) -> None:
        key = self.agent.signer.key
        t = self.t
        t.note(f"JWT header: alg {key.alg}, typ JWT, kid {key.kid}")
        t.note(f"JWT claims: iss {self.agent.signer.issuer}, sub {self.sub}, aud {self.audience},")
        t.note("            iat now, exp iat + 120 s, a fresh jti per request")

    def converse(self, interface: str, turns: tuple[str, ...]) -> tuple[str, str, bytes]:
        """Send `turns` in one conversation; return its contextId, the last messageId and
        the last reply's bytes."""
        t, wire = self.t, self.agent.wire
        client = self.agent.client(interface, self.sub, self.audience)
        context_id: str | None = None
        message_id, body, reply = "", b"", ""
        for number, text in enumerate(turns, start=1):
            t.say("PA", "Acme", text)
            message_id = str(uuid.uuid4())  # the PA names its messages: a retry reuses it
            # With a contextId, the client refuses a reply that belongs to another one.
            answer = reply_of(
                client.send(text, context_id=context_id, message_id=message_id), f"turn {number}"
            )
            reply = answer.text
            t.say("Acme", "PA", reply)
            if context_id is None:
                t.note(f"{wire.last.status} OK, new contextId {answer.context_id}")
            else:
                t.note(f"{wire.last.status} OK, same contextId")
            context_id, body = answer.context_id, wire.last.body
        expect(context_id is not None, "no turns were sent")
        expect("arrive" in reply, "the last turn: the bot did not remember the order")
        return str(context_id), message_id, body

    def retry(
        self, interface: str, text: str, context_id: str, message_id: str, first_body: bytes
    ) -> None:
        t, wire = self.t, self.agent.wire
        client = self.agent.client(interface, self.sub, self.audience)
        runs_before = bot_runs(self.bot_log, message_id)
        t.say("PA", "Acme", text)
        t.note(f"(messageId {message_id}, sent before)")
        answer = reply_of(client.send(text, context_id=context_id, message_id=message_id), "retry")
        t.say("Acme", "PA", answer.text)
        expect(wire.last.body == first_body, "retry: the reply differs from the first one")
        runs_after = bot_runs(self.bot_log, message_id)
        expect(runs_before == runs_after == 1, f"retry: the bot ran {runs_after} times")
        t.note(
            f"{wire.last.status} OK, reply byte-identical to the first ({len(first_body)} bytes)"
        )
        t.note(f"bot runs for this messageId: {runs_after} (the retry did not run the bot again)")

    def refusals(self, interface: str, context_id: str) -> None:
        t = self.t
        answer = self.agent.send_without_token(interface, "Hello?")
        challenge = answer.header("WWW-Authenticate")
        expect(
            answer.status == 401 and challenge == 'Bearer realm="a2a"' and not answer.body,
            f"no token: expected 401 with a challenge, got {answer.status} {challenge!r}",
        )
        t.note(f"no Authorization header → {answer.status}, WWW-Authenticate: {challenge}")
        other = "user-" + uuid.uuid4().hex[:8]
        stranger = self.agent.client(interface, other, self.audience)
        refused = refusal(
            InvalidParams,
            "foreign contextId",
            lambda: stranger.send("What did they order?", context_id=context_id),
        )
        expect(
            refused.status == 400 and refused.message == "Unknown contextId",
            f"foreign contextId: expected 400 'Unknown contextId', got {refused}",
        )
        t.note(f"another user ({other}) sends the contextId of {self.sub}")
        t.note(
            f"  → {refused.status} {refused.reason} {refused.message!r} "
            "(as for a context that does not exist)"
        )


__all__ = [
    "IdentityPart",
]
