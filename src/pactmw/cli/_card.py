"""`pactmw card`: fetch, validate and summarize a Brand's Agent Card."""

from __future__ import annotations

import argparse

from pactmw.cli._common import (
    TIMEOUT,
    Command,
    CommandError,
    card_failure,
    card_url,
    option,
    print_json,
    printable,
)

_CARD_HELP = """\
Fetch a Brand's Agent Card the way a personal agent does, validate it and print a summary:
name, interface URL, identity scheme, and the delegation scopes when the Brand offers
PACT Delegated. URL is a card URL, or a Brand's domain (https://shop.example or
shop.example): its /.well-known/agent-card.json, which serves the card or redirects to the
Provider's (up to 5 redirects are followed). Plain http is allowed to loopback hosts only.
Exit status 0 for a valid PACT card, 1 when it cannot be fetched or is not valid.
"""


def run(args: argparse.Namespace) -> int:
    from pactmw.check import identity_scheme_name
    from pactmw.client import ClientError, SyncTransport, delegation_scheme, fetch_card
    from pactmw.client import card_interface_url as card_interface

    url = card_url(args.url, "URL")
    try:
        card = fetch_card(url, transport=SyncTransport(timeout=args.timeout))
        interface = card_interface(card)
    except ClientError as exc:
        raise card_failure(url, exc) from None
    identity = identity_scheme_name(card)
    scheme = delegation_scheme(card)
    delegation = (
        None
        if scheme is None
        else {
            "scheme": scheme.name,
            "device_authorization_url": scheme.device_authorization_url,
            "token_url": scheme.token_url,
            "metadata_url": scheme.metadata_url,
            "scopes": [{"id": s.id, "description": s.description} for s in scheme.scopes],
        }
    )
    if args.json:
        summary = {
            "name": card.name,
            "description": card.description,
            "card_url": card.url,
            "interface_url": interface,
            "identity_scheme": identity,
            "delegation": delegation,
            "skills": [dict(skill) for skill in card.skills],
        }
        print_json(summary)
    else:
        # Every line shows what the card says: its control characters are shown escaped.
        lines = [card.name]
        if card.description:
            lines.append(f"  {card.description}")
        lines.append(f"card:        {card.url}")
        lines.append(f"interface:   {interface}")
        lines.append(f"identity:    {identity + ' (Bearer JWT)' if identity else 'none'}")
        if scheme is None:
            lines.append("delegation:  none (PACT Identity only)")
        else:
            lines.append(f"delegation:  {scheme.name} (OAuth device code), scopes:")
            width = max(len(s.id) for s in scheme.scopes) if scheme.scopes else 0
            lines.extend(f"  {s.id.ljust(width)}  {s.description}" for s in scheme.scopes)
        for line in lines:
            print(printable(line))
    if identity is None:
        raise CommandError(
            "not a PACT card: no httpAuthSecurityScheme Bearer listed alone in a "
            "securityRequirements entry",
            1,
        )
    return 0


COMMAND = Command(
    "card",
    "fetch, validate and summarize a Brand's Agent Card",
    _CARD_HELP,
    run,
    options=(
        option("url", metavar="URL", help="the card URL or the Brand's domain"),
        option("--json", action="store_true", help="print JSON instead of text"),
        TIMEOUT,
    ),
)


__all__ = [
    "COMMAND",
    "run",
]
