"""Fresh-token JWT verification throughput: pactmw against raw `cryptography`, PyJWT, joserfc.

Run:  .venv/bin/python benchmarks/verify.py [--seconds S] [--rounds R] [--tokens N]
                                          [--turn-ms T] [--algs ES256,...] [--json]

For each algorithm (ES256, RS256, EdDSA) N distinct tokens (distinct `sub` and `jti`) are
minted up front and every contender cycles through them, so no verification repeats the
token just before it and nothing can be served from a cache. The contenders run interleaved:
R rounds; within a round they take turns of about 50 ms each (rotating order) until every
contender has run about S seconds. The reported figure is the per-contender median over the
rounds, so noise on a shared machine hits all of them alike.

Contenders:
  raw           `cryptography` verify of the token's signature with a pre-parsed key. For ES256
                this includes converting the JWS R||S signature to DER (what any JWS verifier
                must do). No base64, no JSON: the floor every verifier pays.
  pactmw-jose   `parse_compact` + `verify_signature` + `JWS.claims()` (the JOSE layer).
  pactmw-jose-hc  the same with a `HeaderCache`, as pactmw's verifiers call it (an agent's
                header is the same on every token, so it is decoded once).
  pactmw-ident  `IdentityVerifier.verify("Bearer " + token)`: the whole PACT identity check
                (inline-JWKS agent, so no network). ES256/RS256 only.
  pyjwt         `jwt.decode(token, key, algorithms=[alg], audience=AUD)` with a pre-parsed key
                (verifies exp, iat, aud).
  joserfc       `jwt.decode(token, key, algorithms=[alg])` with an imported key, then
                `JWTClaimsRegistry(aud=...).validate(claims)` (exp, iat, aud), to match PyJWT.

cost ratio = raw ops/s / contender ops/s in the same round, the median over the rounds
(1.00x = no overhead beyond the signature check).
The script always exits 0: it is a report, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cryptography
import jwt as pyjwt
from cryptography.hazmat.backends.openssl import backend as _openssl_backend
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from pactmw.core.encoding import b64url_decode
from pactmw.core.jose import HeaderCache, parse_compact, sign_compact, verify_signature
from pactmw.core.jwk import KeySet, PrivateJWK, generate_private_jwk
from pactmw.core.tokencache import VerifiedTokenCache
from pactmw.protocols.identity import (
    IDENTITY_ALGORITHMS,
    AgentRegistry,
    IdentityVerifier,
    RegisteredAgent,
)

try:
    import joserfc
    from joserfc import jwt as joserfc_jwt
    from joserfc.errors import SecurityWarning as _JoserfcSecurityWarning
    from joserfc.jwk import import_key as joserfc_import_key
    from joserfc.jwt import JWTClaimsRegistry

    JOSERFC_ERROR: str | None = None
except Exception as exc:  # any import failure just means "skip joserfc"
    joserfc = None  # type: ignore[assignment]
    JOSERFC_ERROR = f"{type(exc).__name__}: {exc}"

ISSUER = "https://agent.example"
AUDIENCE = "https://provider.example"
ALGORITHMS = ("ES256", "RS256", "EdDSA")
CACHED_SPEEDUP_TARGET = 25.0
TARGETS = {"pactmw-ident": 1.20, "pactmw-jose": 1.10}  # ES256 fresh, cost vs raw
TOKEN_LIFETIME = 300  # IdentityVerifier's default max_lifetime
TURN_SECONDS = 0.05  # default length of one contender turn inside a round

Verify = Callable[[Any], object]


@dataclass
class Contender:
    name: str
    fn: Verify
    inputs: Sequence[Any]  # what `fn` takes, one per distinct token
    cursor: int = 0  # where in `inputs` the next turn continues
    chunk: int = 16  # verifications per turn, calibrated to the turn length
    rates: list[float] = field(default_factory=list)  # ops/s, one per round
    count: int = 0  # this round so far
    elapsed: float = 0.0  # seconds spent in this round so far

    def turn(self) -> None:
        """Verify the next `chunk` fresh tokens and add the time taken to this round's total."""
        fn, inputs, n = self.fn, self.inputs, len(self.inputs)
        i, left = self.cursor, self.chunk
        perf = time.thread_time
        start = perf()
        while left:
            end = min(i + left, n)
            for item in inputs[i:end]:
                fn(item)
            left -= end - i
            i = end if end < n else 0
        self.elapsed += perf() - start
        self.count += self.chunk
        self.cursor = i

    def end_round(self) -> None:
        self.rates.append(self.count / self.elapsed)
        self.count, self.elapsed = 0, 0.0


def run_round(contenders: list[Contender], seconds: float) -> None:
    """One round: the contenders take short turns until each has verified for ~`seconds`.

    Many short turns per round mean a burst of load from another process lands on every
    contender alike. (On a quiet machine 2 ms, 50 ms and 300 ms turns gave the same ratios.)
    """
    while min(c.elapsed for c in contenders) < seconds:
        for c in contenders:
            c.turn()
    for c in contenders:
        c.end_round()


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def mint_tokens(key: PrivateJWK, n: int) -> list[str]:
    """`n` distinct, valid, short-lived tokens (distinct `sub` and `jti`)."""
    now = int(time.time())
    return [
        sign_compact(
            {
                "iss": ISSUER,
                "sub": f"user-{i:06d}",
                "aud": AUDIENCE,
                "iat": now,
                "exp": now + TOKEN_LIFETIME,
                "jti": f"{os.urandom(8).hex()}-{i}",
                "scope": "orders:read profile",
            },
            key,
            typ="JWT",
        )
        for i in range(n)
    ]


def _raw_contender(alg: str, key: PrivateJWK, tokens: list[str]) -> Contender:
    public = key.public.key
    inputs = []
    for token in tokens:
        head, body, sig = token.split(".")
        inputs.append((f"{head}.{body}".encode("ascii"), b64url_decode(sig)))
    sha256 = hashes.SHA256()
    fn: Verify
    if alg == "ES256":
        ecdsa = ec.ECDSA(sha256)
        from_bytes = int.from_bytes

        def fn(item: tuple[bytes, bytes]) -> None:
            msg, sig = item
            der = encode_dss_signature(from_bytes(sig[:32], "big"), from_bytes(sig[32:], "big"))
            public.verify(der, msg, ecdsa)  # type: ignore[call-arg]

    elif alg == "RS256":
        pkcs1 = padding.PKCS1v15()

        def fn(item: tuple[bytes, bytes]) -> None:
            public.verify(item[1], item[0], pkcs1, sha256)  # type: ignore[call-arg]

    else:

        def fn(item: tuple[bytes, bytes]) -> None:
            public.verify(item[1], item[0])  # type: ignore[call-arg]

    return Contender("raw", fn, inputs)


def build_contenders(alg: str, key: PrivateJWK, tokens: list[str]) -> list[Contender]:
    contenders = [_raw_contender(alg, key, tokens)]
    public_jwk = key.public
    allowed = frozenset({alg})

    def jose_layer(token: str) -> object:
        jws = parse_compact(token, allowed_algs=allowed)
        verify_signature(jws, public_jwk)
        return jws.claims()

    contenders.append(Contender("pactmw-jose", jose_layer, tokens))

    headers = HeaderCache()

    def jose_layer_hc(token: str) -> object:
        jws = parse_compact(token, allowed_algs=allowed, header_cache=headers)
        verify_signature(jws, public_jwk)
        return jws.claims()

    contenders.append(Contender("pactmw-jose-hc", jose_layer_hc, tokens))

    if alg in IDENTITY_ALGORITHMS:
        agent = RegisteredAgent(issuer=ISSUER, name="bench", jwks=KeySet((public_jwk,)))
        # Fresh: the verified-token cache is off, or cycling the tokens would measure hits.
        fresh = IdentityVerifier(
            audience=AUDIENCE,
            registry=AgentRegistry([agent]),
            cache=VerifiedTokenCache(max_entries=0),
        )
        bearer = ["Bearer " + t for t in tokens]
        contenders.append(Contender("pactmw-ident", fresh.verify, bearer))
        # Cached: the same tokens presented again (an agent reuses its JWT for minutes).
        cached = IdentityVerifier(audience=AUDIENCE, registry=AgentRegistry([agent]))
        for token in bearer:
            cached.verify(token)
        contenders.append(Contender("pactmw-cached", cached.verify, bearer))

    crypto_key = public_jwk.key
    algs = [alg]

    def pyjwt_decode(token: str) -> object:
        return pyjwt.decode(token, crypto_key, algorithms=algs, audience=AUDIENCE)

    contenders.append(Contender("pyjwt", pyjwt_decode, tokens))

    if joserfc is not None:
        jkey = joserfc_import_key(dict(public_jwk.members))
        claims_registry = JWTClaimsRegistry(aud={"essential": True, "value": AUDIENCE})

        def joserfc_decode(token: str) -> object:
            decoded = joserfc_jwt.decode(token, jkey, algorithms=algs)
            claims_registry.validate(decoded.claims)
            return decoded.claims

        contenders.append(Contender("joserfc", joserfc_decode, tokens))
    return contenders


def check_contenders(contenders: list[Contender], turn_seconds: float) -> None:
    """Check each contender accepts the tokens, warm it up and size its turns."""
    for c in contenders:
        for item in c.inputs[:8]:
            c.fn(item)  # raises if a contender refuses a valid token
        c.chunk = 8
        while c.elapsed < 0.05:  # warm-up, and a first rate estimate
            c.turn()
        rate = c.count / c.elapsed
        c.chunk = max(1, round(rate * turn_seconds))
        c.cursor, c.count, c.elapsed = 0, 0, 0.0


def measure(
    alg: str, n_tokens: int, seconds: float, rounds: int, turn_seconds: float = TURN_SECONDS
) -> dict[str, Any]:
    _log(f"[{alg}] generating key and minting {n_tokens} tokens ...")
    key = generate_private_jwk(alg)
    tokens = mint_tokens(key, n_tokens)
    assert len(set(tokens)) == n_tokens
    contenders = build_contenders(alg, key, tokens)
    check_contenders(contenders, turn_seconds)
    _log(f"[{alg}] {len(contenders)} contenders x {rounds} rounds x {seconds:g} s")
    for r in range(rounds):
        # Rotate the order so no contender always runs first (or right after a slow one).
        shift = r % len(contenders)
        run_round(contenders[shift:] + contenders[:shift], seconds)
    raw_rates = contenders[0].rates
    results = {}
    for c in contenders:
        med = statistics.median(c.rates)
        # Each round's ratio pairs rates measured in the same seconds, so a burst of load from
        # another process moves both; the median of those ratios is the figure reported.
        ratios = [raw / rate for raw, rate in zip(raw_rates, c.rates, strict=True)]
        results[c.name] = {
            "ops_per_s": med,
            "us_per_op": 1e6 / med,
            "cost_vs_raw": statistics.median(ratios),
            "cost_vs_raw_rounds": [min(ratios), max(ratios)],
            "spread_pct": 100 * (max(c.rates) - min(c.rates)) / med,
            "rounds_ops_per_s": c.rates,
        }
    return {"tokens": n_tokens, "contenders": results}


def print_table(alg: str, data: dict[str, Any]) -> None:
    print(f"\n{alg}  (fresh tokens: {data['tokens']} distinct, cycled)")
    print(
        f"  {'contender':<15} {'ops/s':>9} {'µs/op':>8} {'cost×raw':>9} {'rounds':>13}"
        f" {'spread':>7}"
    )
    for name, row in data["contenders"].items():
        low, high = row["cost_vs_raw_rounds"]
        print(
            f"  {name:<15} {row['ops_per_s']:>9,.0f} {row['us_per_op']:>8.1f}"
            f" {row['cost_vs_raw']:>8.2f}× {f'{low:.2f}–{high:.2f}':>13} {row['spread_pct']:>6.0f}%"
        )


def target_lines(results: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    lines: list[str] = []
    verdicts: dict[str, Any] = {}
    es = results.get("ES256", {}).get("contenders", {})
    labels = {"pactmw-ident": "pactmw identity", "pactmw-jose": "pactmw JOSE layer"}
    if "pactmw-cached" in es:
        speedup = 1 / es["pactmw-cached"]["cost_vs_raw"]
        slow, fast = (1 / r for r in reversed(es["pactmw-cached"]["cost_vs_raw_rounds"]))
        verdict = "PASS" if speedup >= CACHED_SPEEDUP_TARGET else "MISS"
        verdicts["pactmw-cached"] = {
            "speedup_vs_raw": speedup,
            "target": CACHED_SPEEDUP_TARGET,
            "verdict": verdict,
        }
        lines.append(
            f"ES256 cached: pactmw identity {speedup:.1f}× faster than raw (rounds"
            f" {slow:.1f}–{fast:.1f}×; target ≥ {CACHED_SPEEDUP_TARGET:.0f}×): {verdict}"
        )
    for name, target in TARGETS.items():
        if name not in es:
            continue
        ratio = es[name]["cost_vs_raw"]
        low, high = es[name]["cost_vs_raw_rounds"]
        verdict = "PASS" if ratio <= target else "MISS"
        verdicts[name] = {"cost_vs_raw": ratio, "target": target, "verdict": verdict}
        lines.append(
            f"ES256 fresh: {labels[name]} cost = {ratio:.2f}× raw (rounds {low:.2f}–{high:.2f}×;"
            f" target ≤ {target:.2f}×): {verdict}"
        )
    if "pactmw-jose-hc" in es:
        low, high = es["pactmw-jose-hc"]["cost_vs_raw_rounds"]
        ratio = es["pactmw-jose-hc"]["cost_vs_raw"]
        verdicts["pactmw-jose-hc"] = {"cost_vs_raw": ratio}
        lines.append(
            f"ES256 fresh: pactmw JOSE layer with its header cache (as the verifiers call it)"
            f" cost = {ratio:.2f}× raw (rounds {low:.2f}–{high:.2f}×; documented)"
        )
    for name in ("pyjwt", "joserfc"):
        if name in es:
            ratio = es[name]["cost_vs_raw"]
            low, high = es[name]["cost_vs_raw_rounds"]
            verdicts[name] = {"cost_vs_raw": ratio}
            lines.append(
                f"ES256 fresh: {name} cost = {ratio:.2f}× raw (rounds {low:.2f}–{high:.2f}×;"
                " for comparison)"
            )
    return lines, verdicts


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cryptography": cryptography.__version__,
        "openssl": _openssl_backend.openssl_version_text(),
        "pyjwt": pyjwt.__version__,
        "joserfc": getattr(joserfc, "__version__", None) if joserfc is not None else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=0.3,
        help="seconds per contender per round (default 0.3)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--tokens", type=int, default=4096, help="distinct tokens per algorithm (default 4096)"
    )
    parser.add_argument(
        "--algs",
        default=",".join(ALGORITHMS),
        help="comma-separated subset of ES256,RS256,EdDSA (default: all)",
    )
    parser.add_argument(
        "--turn-ms",
        type=float,
        default=TURN_SECONDS * 1000,
        help=f"length of one contender turn inside a round (default {TURN_SECONDS * 1000:g})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    args = parser.parse_args(argv)
    algs = [a.strip() for a in args.algs.split(",") if a.strip()]
    unknown = set(algs) - set(ALGORITHMS)
    if unknown:
        parser.error(f"unknown algorithm(s): {', '.join(sorted(unknown))}")
    if args.seconds <= 0 or args.rounds < 1 or args.tokens < 16 or args.turn_ms <= 0:
        parser.error("need --seconds > 0, --rounds >= 1, --tokens >= 16, --turn-ms > 0")
    # Tokens are minted per algorithm and must still be valid when its last round runs.
    if args.rounds * args.seconds * 7 > 0.8 * TOKEN_LIFETIME:
        parser.error(
            f"--rounds x --seconds x 7 contenders must stay under {0.8 * TOKEN_LIFETIME:g} s"
            f" (the tokens live {TOKEN_LIFETIME} s)"
        )

    # joserfc warns on every EdDSA use (RFC 9864 deprecates the name); the token is the same.
    if joserfc is not None:
        warnings.simplefilter("ignore", _JoserfcSecurityWarning)

    env = environment()
    if not args.json:
        print(
            f"Python {env['python']} ({env['machine']}, {env['cpus']} CPUs), "
            f"cryptography {env['cryptography']} ({env['openssl']}), PyJWT {env['pyjwt']}, "
            f"joserfc {env['joserfc'] or 'n/a'}"
        )
        print(
            f"{args.rounds} interleaved rounds × {args.seconds:g} s per contender"
            f" (turns of {args.turn_ms:g} ms); "
            "median per contender; cost×raw = raw ops/s ÷ contender ops/s"
        )
        print(
            "raw = cryptography verify with a pre-parsed key"
            " (ES256: includes the R‖S → DER conversion)"
        )
        if joserfc is None:
            print(f"joserfc: skipped ({JOSERFC_ERROR})")

    started = time.perf_counter()
    results: dict[str, Any] = {}
    for alg in algs:
        results[alg] = measure(alg, args.tokens, args.seconds, args.rounds, args.turn_ms / 1000)
        if not args.json:
            print_table(alg, results[alg])
            sys.stdout.flush()
    lines, verdicts = target_lines(results)
    elapsed = time.perf_counter() - started

    if args.json:
        out = {
            "environment": env,
            "config": {
                "seconds_per_contender_per_round": args.seconds,
                "rounds": args.rounds,
                "turn_ms": args.turn_ms,
                "tokens": args.tokens,
                "algorithms": algs,
            },
            "joserfc_skipped": JOSERFC_ERROR,
            "results": results,
            "targets_es256": verdicts,
            "elapsed_s": elapsed,
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        if "ES256" in results:
            print()
            for line in lines:
                print(line)
        print(f"\n(total {elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
