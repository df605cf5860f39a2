"""`pactmw keygen`: a personal agent's signing key and its public JWKS."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pactmw.cli._common import (
    Command,
    CommandError,
    OutputFile,
    option,
    refuse_empty,
    write_all,
)

_KEYGEN_HELP = """\
Generate a personal agent's signing key: the private JWK goes to --out (mode 0600, never
publish it), the public JWKS to --jwks (publish it at the jwks_uri you register with each
Provider). Without --jwks the public JWKS is printed on stdout.

PACT personal-agent JWTs are ES256 (the reference) or RS256; EdDSA keys are for other uses
and `pactmw token` refuses them. The kid defaults to the key's RFC 7638 thumbprint.

Both files are written or neither: existing files are never replaced unless --force, and
missing folders are not created unless --parents.
"""

KEY_ALGORITHMS = ("ES256", "RS256", "EdDSA")


def run(args: argparse.Namespace) -> int:
    from pactmw.core.jwk import generate_private_jwk

    refuse_empty(args, "kid", "out", "jwks")
    if args.jwks and Path(args.out).resolve() == Path(args.jwks).resolve():
        raise CommandError("--out and --jwks must be different files")
    key = generate_private_jwk(args.alg, kid=args.kid)
    public = {"keys": [{**key.public.to_dict(), "use": "sig"}]}
    files = [OutputFile(args.out, json.dumps(key.to_dict(), indent=2) + "\n", 0o600)]
    if args.jwks:
        # Public keys: readable by the web server that publishes them.
        files.append(OutputFile(args.jwks, json.dumps(public, indent=2) + "\n", 0o644))
    write_all(files, force=args.force, parents=args.parents)
    info = sys.stdout if args.jwks else sys.stderr
    print(f"private key ({key.alg}, kid {key.kid}) written to {args.out} (mode 0600)", file=info)
    if args.jwks:
        print(f"public JWKS written to {args.jwks}: publish it at your registered jwks_uri")
    else:
        print(json.dumps(public, indent=2))
    if key.alg not in ("ES256", "RS256"):
        print(
            f"note: PACT personal-agent JWTs are ES256 or RS256; this {key.alg} key cannot "
            "sign them",
            file=sys.stderr,
        )
    return 0


COMMAND = Command(
    "keygen",
    "generate a personal agent's signing key (private JWK) and its public JWKS",
    _KEYGEN_HELP,
    run,
    options=(
        option(
            "--alg", choices=KEY_ALGORITHMS, default="ES256", help="key algorithm (default: ES256)"
        ),
        option("--kid", metavar="K", help="key id (default: the RFC 7638 thumbprint)"),
        option(
            "--out", required=True, metavar="PRIVATE.jwk", help="where to write the private JWK"
        ),
        option("--jwks", metavar="PUBLIC.json", help="where to write the public JWKS"),
        option("--force", action="store_true", help="replace existing files"),
        option("--parents", action="store_true", help="create missing folders of --out and --jwks"),
    ),
)


__all__ = [
    "COMMAND",
    "KEY_ALGORITHMS",
    "run",
]
