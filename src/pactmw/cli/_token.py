"""`pactmw token`: a personal-agent JWT signed with a private key."""

from __future__ import annotations

import argparse

from pactmw.cli._common import (
    AUDIENCE,
    ISSUER,
    KEY,
    SUB,
    Command,
    CommandError,
    load_signer,
    option,
    refuse_empty,
)

_SIGN_HELP = """\
Print a PACT personal-agent JWT (PACT §3.2) signed with a private JWK (or PEM) file: header
{alg, kid, typ: JWT}, claims iss, sub, aud, iat, exp = iat + --ttl (at most 300 s) and a
random jti. --audience is the opaque audience the Provider assigned, not a card URL.
"""


def run(args: argparse.Namespace) -> int:
    refuse_empty(args, "key", "issuer", "sub", "audience")
    signer = load_signer(args.key, args.issuer)
    try:
        print(signer.sign(args.sub, args.audience, args.ttl))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return 0


COMMAND = Command(
    "token",
    "print a personal-agent JWT signed with a private key",
    _SIGN_HELP,
    run,
    options=(
        KEY,
        ISSUER,
        SUB,
        AUDIENCE,
        option(
            "--ttl", type=int, default=120, metavar="S", help="lifetime, 1 to 300 s (default: 120)"
        ),
    ),
)


__all__ = [
    "COMMAND",
    "run",
]
