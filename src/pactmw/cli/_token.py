"""`pactmw token`: a personal-agent JWT signed with a private key."""

from __future__ import annotations

import argparse

from pactmw.cli._common import CommandError, SubParsers, add_command, load_signer

_SIGN_HELP = """\
Print a PACT personal-agent JWT (PACT §3.2) signed with a private JWK (or PEM) file: header
{alg, kid, typ: JWT}, claims iss, sub, aud, iat, exp = iat + --ttl (at most 300 s) and a
random jti. --audience is the opaque audience the Provider assigned, not a card URL.
"""


def add(subparsers: SubParsers) -> None:
    parser = add_command(
        subparsers,
        "token",
        summary="print a personal-agent JWT signed with a private key",
        description=_SIGN_HELP,
    )
    parser.add_argument("--key", required=True, metavar="PRIVATE.jwk", help="the private key")
    parser.add_argument("--issuer", required=True, metavar="ISS", help="the registered issuer")
    parser.add_argument("--sub", required=True, metavar="SUB", help="the user's stable id")
    parser.add_argument(
        "--audience", required=True, metavar="AUD", help="the audience the Provider assigned"
    )
    parser.add_argument(
        "--ttl", type=int, default=120, metavar="S", help="lifetime, 1 to 300 s (default: 120)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    signer = load_signer(args.key, args.issuer)
    try:
        print(signer.sign(args.sub, args.audience, args.ttl))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return 0


__all__ = [
    "add",
    "run",
]
