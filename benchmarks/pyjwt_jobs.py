"""Should pactmw use PyJWT? pactmw's own JOSE code against PyJWT, job by job, in one run.

Run:  .venv/bin/python benchmarks/pyjwt_jobs.py [--seconds S] [--rounds R] [--json]

Each job is something PyJWT could do for pactmw. Both contenders do the same work on the
same inputs, interleaved in R rounds of short turns (verify.py's `Contender`), and the
figure is each one's median ops/s over the rounds:

  verify         a fresh ES256 personal-agent JWT (4096 distinct tokens, cycled): pactmw's
                 `IdentityVerifier.verify` (no cache, inline JWKS: every PACT rule) against
                 `jwt.decode(token, key, algorithms=["ES256"], audience=AUD)` with a
                 pre-parsed key (exp, iat, aud only)
  import-jwk     a public EC P-256 JWK (a dict) to a usable key: `import_public_jwk`
                 (which also computes the RFC 7638 thumbprint) against `jwt.PyJWK(dict)`
  parse-jwks     a JWKS of two EC and one RSA key: `parse_jwks` against
                 `jwt.PyJWKSet.from_dict`
  sign           an ES256 JWT from claims with a loaded key: `sign_compact` against
                 `jwt.encode(claims, key, algorithm="ES256", headers={"kid": ...})`

ratio = pactmw ops/s / PyJWT ops/s: above 1.00x pactmw is faster. The script always exits 0:
it is a report, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import jwt as pyjwt
from verify import AUDIENCE, ISSUER, Contender, check_contenders, mint_tokens, run_round

from pactmw.core.jose import sign_compact
from pactmw.core.jwk import KeySet, generate_private_jwk, import_public_jwk, parse_jwks
from pactmw.core.tokencache import VerifiedTokenCache
from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent

TOKENS = 4096


def jobs() -> dict[str, tuple[Contender, Contender]]:
    """job -> (pactmw's contender, PyJWT's), over the same inputs."""
    key = generate_private_jwk("ES256", kid="bench-1")
    tokens = mint_tokens(key, TOKENS)
    verifier = IdentityVerifier(
        audience=AUDIENCE,
        registry=AgentRegistry(
            [RegisteredAgent(issuer=ISSUER, name="bench", jwks=KeySet((key.public,)))]
        ),
        cache=VerifiedTokenCache(max_entries=0),  # fresh tokens: measure the checks, no hits
    )
    bearers = [f"Bearer {token}" for token in tokens]
    public = key.public.key

    def pyjwt_verify(token: str) -> object:
        return pyjwt.decode(token, public, algorithms=["ES256"], audience=AUDIENCE)

    jwk = {**key.public.to_dict(), "use": "sig"}
    jwks = {
        "keys": [
            {**generate_private_jwk("ES256", kid=f"ec-{i}").public.to_dict(), "use": "sig"}
            for i in range(2)
        ]
        + [{**generate_private_jwk("RS256", kid="rsa-1").public.to_dict(), "use": "sig"}]
    }
    now = int(time.time())
    claims = [
        {"iss": ISSUER, "sub": f"user-{i}", "aud": AUDIENCE, "iat": now, "exp": now + 120,
         "jti": os.urandom(8).hex()}
        for i in range(256)
    ]  # fmt: skip
    private = key.key

    def pyjwt_sign(payload: dict[str, Any]) -> object:
        return pyjwt.encode(payload, private, algorithm="ES256", headers={"kid": "bench-1"})

    return {
        "verify": (
            Contender("pactmw", verifier.verify, bearers),
            Contender("pyjwt", pyjwt_verify, tokens),
        ),
        "import-jwk": (
            Contender("pactmw", import_public_jwk, [jwk]),
            Contender("pyjwt", pyjwt.PyJWK, [jwk]),
        ),
        "parse-jwks": (
            Contender("pactmw", parse_jwks, [jwks]),
            Contender("pyjwt", pyjwt.PyJWKSet.from_dict, [jwks]),
        ),
        "sign": (
            Contender("pactmw", lambda c: sign_compact(c, key, typ="JWT"), claims),
            Contender("pyjwt", pyjwt_sign, claims),
        ),
    }


def measure(pair: Sequence[Contender], seconds: float, rounds: int) -> dict[str, float]:
    contenders = list(pair)
    check_contenders(contenders, 0.05)
    for index in range(rounds):
        order = contenders[index % 2 :] + contenders[: index % 2]  # alternate who goes first
        run_round(order, seconds)
    return {c.name: statistics.median(c.rates) for c in contenders}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="per contender per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    args = parser.parse_args(argv)

    results: dict[str, dict[str, float]] = {}
    for job, pair in jobs().items():
        print(f"measuring {job} ...", file=sys.stderr, flush=True)
        results[job] = measure(pair, args.seconds, args.rounds)
    if args.json:
        print(json.dumps({"pyjwt": pyjwt.__version__, "results": results}, indent=2))
        return 0
    print(f"pactmw's JOSE code vs PyJWT {pyjwt.__version__} (median ops/s of {args.rounds} rounds)")
    print(f"  {'job':<12}{'pactmw':>12}{'pyjwt':>12}{'ratio':>9}")
    for job, rates in results.items():
        ratio = rates["pactmw"] / rates["pyjwt"]
        print(f"  {job:<12}{rates['pactmw']:>12,.0f}{rates['pyjwt']:>12,.0f}{ratio:>8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
