"""`pactmw keygen`: a personal agent's signing key and its public JWKS."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from pactmw.cli._common import Command, CommandError, option

_KEYGEN_HELP = """\
Generate a personal agent's signing key: the private JWK goes to --out (mode 0600, never
publish it), the public JWKS to --jwks (publish it at the jwks_uri you register with each
Provider). Without --jwks the public JWKS is printed on stdout.

PACT personal-agent JWTs are ES256 (the reference) or RS256; EdDSA keys are for other uses
and `pactmw token` refuses them. The kid defaults to the key's RFC 7638 thumbprint. Existing
files are never replaced unless --force.
"""

KEY_ALGORITHMS = ("ES256", "RS256", "EdDSA")


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, readable by its owner only (0600 from creation)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".pactmw-key-", suffix=".tmp")
    try:
        os.chmod(temporary, 0o600)  # mkstemp already creates 0600; say it anyway
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    from pactmw.client import write_jwks
    from pactmw.core.jwk import generate_private_jwk

    if args.kid is not None and not args.kid:
        raise CommandError("--kid must not be empty")
    out = Path(args.out)
    targets = [out] + ([Path(args.jwks)] if args.jwks else [])
    if args.jwks and out.resolve() == Path(args.jwks).resolve():
        raise CommandError("--out and --jwks must be different files")
    for target in targets:
        if target.exists() and not args.force:
            raise CommandError(f"{target} exists (--force replaces it)")
    key = generate_private_jwk(args.alg, kid=args.kid)
    public = {"keys": [{**key.public.to_dict(), "use": "sig"}]}
    try:
        _write_private(out, json.dumps(key.to_dict(), indent=2) + "\n")
        if args.jwks:
            write_jwks(public, args.jwks)
    except OSError as exc:
        raise CommandError(f"cannot write {exc.filename or out}: {exc.strerror}") from None
    info = sys.stdout if args.jwks else sys.stderr
    print(f"private key ({key.alg}, kid {key.kid}) written to {out} (mode 0600)", file=info)
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
    ),
)


__all__ = [
    "COMMAND",
    "KEY_ALGORITHMS",
    "run",
]
