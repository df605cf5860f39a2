"""1. The Agent Card: fetched and valid, its headers, its interface, its identity scheme, and
no card for an unknown Brand."""

from __future__ import annotations

import json

from pactmw.check._context import Checks
from pactmw.check._result import Mismatch
from pactmw.check._target import identity_scheme_name
from pactmw.check._wire import (
    BODY_SHOWN,
    CARD_PATH,
    SCHEME_KINDS,
    describe,
    header_values,
    loads,
)
from pactmw.check.names import CARD, CARD_HEADERS, CARD_INTERFACE, CARD_SCHEME, CARD_UNKNOWN
from pactmw.client import HttpResponse, NetworkError, card_interface_url, fetch_card


class CardChecks(Checks):
    """The card checks; `run` says whether the card could be read and its interface reached
    (nothing else runs without them)."""

    card_response: HttpResponse | None = None
    #: The card's interface, on another origin than the card, could not be reached.
    interface_unreachable = False

    def run(self) -> bool:
        ctx = self.ctx
        if not ctx.check(
            CARD,
            "the Agent Card, fetched without credentials (redirects followed), valid: name, "
            "description, version, supportedInterfaces (an HTTP+JSON 1.0 one), capabilities, "
            "default modes, skills, each security scheme exactly one known kind",
            self._card,
        ):
            return False
        ctx.check(
            CARD_HEADERS,
            "Access-Control-Allow-Origin: * and a public Cache-Control with a max-age on the card",
            self._card_headers,
        )
        ctx.check(
            CARD_INTERFACE,
            "supportedInterfaces[0] is the HTTP+JSON 1.0 interface, and the card is served at "
            "{interface URL}/.well-known/agent-card.json",
            self._card_interface,
        )
        if self.interface_unreachable:
            # Every other check would fail alike, saying the same thing over and over.
            ctx.progress.note(
                f"note: the card's interface {ctx.interface} cannot be reached from here, so no "
                "other check can run: if the Provider is served elsewhere, its base_url must "
                "be the address agents reach it at"
            )
            return False
        ctx.check(
            CARD_SCHEME,
            'an httpAuthSecurityScheme with scheme "Bearer" and bearerFormat "JWT", listed '
            "alone in one securityRequirements entry (PACT §2.1)",
            self._card_scheme,
        )
        ctx.check(
            CARD_UNKNOWN,
            "the card of an unknown brandId is 404 with no A2A body",
            self._card_unknown,
        )
        return True

    def _card(self) -> str:
        http = self.http
        card = fetch_card(self.settings.card_url, transport=http.transport, retry=http.retry)
        for name, value in card.security_schemes.items():
            if len(value) != 1 or next(iter(value)) not in SCHEME_KINDS:
                raise Mismatch(
                    f"securitySchemes.{name} to be exactly one of {sorted(SCHEME_KINDS)}",
                    f"keys {sorted(value)}",
                )
        http.interface = card_interface_url(card)
        self.ctx.card = card
        response = http.request("GET", card.url)
        self.expect.a2a_json(response, f"GET {card.url}")
        self.card_response = response
        return f"{card.name!r}, interface {http.interface}"

    def _card_headers(self) -> str:
        assert self.card_response is not None
        response = self.card_response
        cors = header_values(response, "access-control-allow-origin")
        cache = ", ".join(header_values(response, "cache-control"))
        directives = {d.strip().split("=", 1)[0].lower() for d in cache.split(",")}
        if cors != ["*"] or "public" not in directives or "max-age" not in directives:
            raise Mismatch(
                "Access-Control-Allow-Origin: * and Cache-Control: public, max-age=N "
                "(the reference sends public, max-age=300)",
                f"Access-Control-Allow-Origin {cors or 'absent'}, Cache-Control "
                f"{cache or 'absent'}",
            )
        return f"Cache-Control {cache}"

    def _card_interface(self) -> str:
        assert self.ctx.card is not None
        card = self.ctx.card
        first = card.interfaces[0]
        if (first.protocol_binding, first.protocol_version) != ("HTTP+JSON", "1.0"):
            raise Mismatch(
                "supportedInterfaces[0] with protocolBinding HTTP+JSON and protocolVersion 1.0 "
                "(the reference suite reads the first entry)",
                f"{first.protocol_binding} {first.protocol_version} at {first.url}",
            )
        served = self.ctx.interface + CARD_PATH
        if card.url != served:
            try:
                response = self.http.request("GET", served)
            except NetworkError:
                self.interface_unreachable = True
                raise
            if response.status != 200 or loads(response.body) != dict(card.raw):
                raise Mismatch(
                    f"the same card at {served}", f"{describe(response)} (card from {card.url})"
                )
        return self.ctx.interface

    def _card_scheme(self) -> str:
        card = self.ctx.card
        assert card is not None
        name = identity_scheme_name(card, strict=True)
        if name is None:
            raise Mismatch(
                'a requirement naming one httpAuthSecurityScheme {scheme: "Bearer", '
                'bearerFormat: "JWT"}',
                "securitySchemes "
                + json.dumps(dict(card.security_schemes))[:BODY_SHOWN]
                + ", securityRequirements "
                + json.dumps([dict(r) for r in card.security_requirements])[:BODY_SHOWN],
            )
        self.ctx.identity_scheme = name
        note = "" if name == "platformJwt" else " (the reference suite looks for platformJwt)"
        return f"{name}{note}"

    def _card_unknown(self) -> None:
        response = self.http.request("GET", self.ctx.unknown_interface() + CARD_PATH)
        self.expect.bare(response, (404,), "unknown Brand's card")


__all__ = [
    "CardChecks",
]
