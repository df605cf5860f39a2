"""Memory of the verified-token cache: a process holding 100,000 cached PACT tokens.

Run:  .venv/bin/python benchmarks/memory.py [--tokens N] [--json]

Fresh child processes each build an `IdentityVerifier` (one agent with an inline ES256
JWKS), verify one token to warm every code path up, then verify N distinct tokens (default
100,000: distinct `sub` and `jti`, the claims of benchmarks/verify.py), each minted just
before and dropped right after, so what stays is what the cache keeps. They measure:

  rss          VmRSS from /proc/self/status before and after (and VmHWM, the peak), after
               gc.collect(): what the operating system sees the process hold; the default
               cache of 100,000 entries
  rss-off      the same work with the cache switched off (`max_entries=0`), side by side:
               the growth that is not the cache's (allocator, interpreter), for comparison
  tracemalloc  the traced Python allocations before and after, in a third process (tracing
               slows it down and costs memory itself, so not in the RSS one)

Target: RSS growth / N <= 400 B per cached token: PASS/MISS. The whole process's RSS is
printed for reference. Always exits 0: a report, not a test.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from typing import Any  # noqa: E402

ISSUER = "https://agent.example"
AUDIENCE = "https://provider.example"
TARGET_BYTES_PER_TOKEN = 400.0
MIB = 1024 * 1024


def status_kib(field: str) -> int:
    """A `kB` field of /proc/self/status (VmRSS, VmHWM), in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(mode: str, n: int) -> dict[str, Any]:
    """Fill one verifier's cache with `n` tokens; measure with `mode` (rss, rss-off or
    tracemalloc)."""
    from pactmw.core.jose import sign_compact
    from pactmw.core.jwk import KeySet, generate_private_jwk
    from pactmw.core.tokencache import VerifiedTokenCache
    from pactmw.protocols.identity import AgentRegistry, IdentityVerifier, RegisteredAgent

    key = generate_private_jwk("ES256", kid="bench")
    agent = RegisteredAgent(issuer=ISSUER, name="bench", jwks=KeySet((key.public,)))
    off = VerifiedTokenCache(max_entries=0) if mode == "rss-off" else None
    # A stopped clock: on a loaded machine filling takes minutes, and no token or cache entry
    # may expire before the last is verified (this measures memory, not time).
    now = int(time.time())
    verifier = IdentityVerifier(
        audience=AUDIENCE, registry=AgentRegistry([agent]), cache=off, clock=lambda: now
    )
    if off is None and verifier.cache.max_entries < n:
        raise SystemExit(f"the default cache holds {verifier.cache.max_entries} < {n} entries")
    salt = os.urandom(4).hex()

    def token(i: int) -> str:
        claims = {
            "iss": ISSUER,
            "sub": f"user-{i:06d}",
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + 300,
            "jti": f"{salt}{i:08x}-{i}",
            "scope": "orders:read profile",
        }
        return "Bearer " + sign_compact(claims, key, typ="JWT")

    verifier.verify(token(n))  # warm-up: every code path once
    verifier.cache.clear()
    if mode == "tracemalloc":
        tracemalloc.start()
    gc.collect()
    rss_before = status_kib("VmRSS")
    traced_before = tracemalloc.get_traced_memory()[0] if mode == "tracemalloc" else 0
    started = time.perf_counter()
    for i in range(n):
        verifier.verify(token(i))
    elapsed = time.perf_counter() - started
    gc.collect()
    cached = len(verifier.cache)
    if cached != (0 if off is not None else n):
        raise SystemExit(f"expected {n} cached tokens, found {cached}")
    result: dict[str, Any] = {
        "mode": mode,
        "tokens": n,
        "cached": cached,
        "fill_seconds": elapsed,
        "rss_before_kib": rss_before,
        "rss_after_kib": status_kib("VmRSS"),
        "hwm_kib": status_kib("VmHWM"),
    }
    if mode == "tracemalloc":
        current, peak = tracemalloc.get_traced_memory()
        result["traced_before"] = traced_before
        result["traced_after"] = current
        result["traced_peak"] = peak
        tracemalloc.stop()
    return result


def run_child(mode: str, n: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", mode, "--tokens", str(n)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode} child failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=100_000, help="tokens (default 100000)")
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    parser.add_argument(
        "--child", choices=("rss", "rss-off", "tracemalloc"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.tokens < 1:
        parser.error("--tokens must be >= 1")
    if args.child:
        print(json.dumps(child(args.child, args.tokens)))
        return 0
    if not os.path.exists("/proc/self/status"):
        print("memory.py needs Linux's /proc/self/status")
        return 0

    started = time.perf_counter()
    if not args.json:
        print(
            f"Python {platform.python_version()} ({platform.machine()}, {os.cpu_count()} CPUs);"
            f" {args.tokens:,} distinct ES256 PACT tokens verified into one IdentityVerifier"
        )
        sys.stdout.flush()
    print("filling the cache (RSS child) ...", file=sys.stderr, flush=True)
    rss = run_child("rss", args.tokens)
    print("the same work, cache off (RSS child) ...", file=sys.stderr, flush=True)
    off = run_child("rss-off", args.tokens)
    print("filling the cache (tracemalloc child) ...", file=sys.stderr, flush=True)
    traced = run_child("tracemalloc", args.tokens)

    growth = (rss["rss_after_kib"] - rss["rss_before_kib"]) * 1024
    off_growth = (off["rss_after_kib"] - off["rss_before_kib"]) * 1024
    traced_growth = traced["traced_after"] - traced["traced_before"]
    per_token = growth / args.tokens
    verdict = "PASS" if per_token <= TARGET_BYTES_PER_TOKEN else "MISS"
    summary = {
        "rss_growth_mib": growth / MIB,
        "rss_growth_bytes_per_token": per_token,
        "rss_after_mib": rss["rss_after_kib"] / 1024,
        "rss_before_mib": rss["rss_before_kib"] / 1024,
        "rss_peak_mib": rss["hwm_kib"] / 1024,
        "cache_off_rss_growth_mib": off_growth / MIB,
        "cache_off_rss_growth_bytes_per_token": off_growth / args.tokens,
        "traced_growth_mib": traced_growth / MIB,
        "traced_bytes_per_token": traced_growth / args.tokens,
        "target_bytes_per_token": TARGET_BYTES_PER_TOKEN,
        "verdict": verdict,
    }
    elapsed = time.perf_counter() - started
    if args.json:
        out = {
            "rss": rss,
            "rss_cache_off": off,
            "tracemalloc": traced,
            "summary": summary,
            "elapsed_s": elapsed,
        }
        print(json.dumps(out, indent=2))
        return 0
    print(f"\n  {'measure':<34} {'before':>9} {'after':>9} {'growth':>9} {'per token':>10}")
    print(
        f"  {'VmRSS (MiB)':<34} {summary['rss_before_mib']:>9.1f} {summary['rss_after_mib']:>9.1f}"
        f" {summary['rss_growth_mib']:>9.1f} {summary['rss_growth_bytes_per_token']:>8.0f} B"
    )
    print(
        f"  {'VmRSS, same work, cache off (MiB)':<34} {off['rss_before_kib'] / 1024:>9.1f}"
        f" {off['rss_after_kib'] / 1024:>9.1f} {summary['cache_off_rss_growth_mib']:>9.1f}"
        f" {summary['cache_off_rss_growth_bytes_per_token']:>8.0f} B"
    )
    print(
        f"  {'tracemalloc, traced Python (MiB)':<34} {traced['traced_before'] / MIB:>9.1f}"
        f" {traced['traced_after'] / MIB:>9.1f} {summary['traced_growth_mib']:>9.1f}"
        f" {summary['traced_bytes_per_token']:>8.0f} B"
    )
    print(
        f"\n  peak RSS (VmHWM) {summary['rss_peak_mib']:.1f} MiB; filling took"
        f" {rss['fill_seconds']:.1f} s ({1e6 * rss['fill_seconds'] / args.tokens:.0f} µs per"
        " token: mint + fresh verification)"
    )
    print(
        f"\n{args.tokens:,} cached tokens: RSS grew {summary['rss_growth_mib']:.1f} MiB,"
        f" {per_token:.0f} B a token (target ≤ {TARGET_BYTES_PER_TOKEN:.0f} B): {verdict}"
    )
    print(
        f"whole process with them: {summary['rss_after_mib']:.1f} MiB RSS (interpreter,"
        " pactmw, cryptography and the cache; for reference)"
    )
    print(f"\n(total {elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
