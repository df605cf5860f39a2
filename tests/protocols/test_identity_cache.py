"""The verified-token cache: a repeated token skips the signature check, never the checks that
can change after verification (agent enabled, audience, time)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from pactmw.core.errors import AuthenticationFailed
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import generate_private_jwk, public_key_set
from pactmw.core.tokencache import VerifiedTokenCache, token_key
from pactmw.protocols.identity import (
    AgentRegistry,
    IdentityVerifier,
    LazyClaims,
    RegisteredAgent,
)
from tests.support.clock import FakeClock
from tests.support.parties import ISSUER

NOW = 1_800_000_000.0


@pytest.fixture
def key() -> Any:
    return generate_private_jwk("ES256", kid="k1")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


def make_verifier(key: Any, clock: FakeClock, **cache: Any) -> IdentityVerifier:
    registry = AgentRegistry(
        [RegisteredAgent(issuer=ISSUER, name="PA", jwks=public_key_set([key]))]
    )
    return IdentityVerifier(
        audience="aud",
        registry=registry,
        clock=clock,
        cache=VerifiedTokenCache(**cache) if cache else None,
    )


def bearer(
    key: Any, sub: str = "u1", *, iat: float = NOW, lifetime: int = 120, **extra: Any
) -> str:
    claims = {"iss": ISSUER, "sub": sub, "aud": "aud", "iat": int(iat), "exp": int(iat) + lifetime}
    claims.update(extra)
    return "Bearer " + sign_compact(claims, key, typ="JWT")


def test_a_repeated_token_skips_the_signature_check(
    key: Any, clock: FakeClock, signature_checks: list[int]
) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key, jti="j1", custom="x")
    first = verifier.verify(token)
    second = verifier.verify(token)
    assert len(signature_checks) == 1
    assert (second.issuer, second.sub, second.name, second.actor_id) == (
        first.issuer,
        first.sub,
        first.name,
        first.actor_id,
    )
    assert isinstance(second.claims, LazyClaims)
    assert dict(second.claims) == dict(first.claims)


def test_the_async_path_uses_the_same_cache(
    key: Any, clock: FakeClock, signature_checks: list[int]
) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key)
    verifier.verify(token)
    assert asyncio.run(verifier.averify(token)).sub == "u1"
    assert len(signature_checks) == 1


def test_disabling_an_agent_refuses_its_cached_tokens_at_once(key: Any, clock: FakeClock) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key)
    verifier.verify(token)
    verifier.registry.disable(ISSUER)
    with pytest.raises(AuthenticationFailed) as refused:
        verifier.verify(token)
    assert refused.value.reason == "disabled_issuer"
    verifier.registry.enable(ISSUER)
    assert verifier.verify(token).sub == "u1"


def test_a_cached_token_still_expires(
    key: Any, clock: FakeClock, signature_checks: list[int]
) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key, lifetime=60)
    verifier.verify(token)
    clock.now = NOW + 60 + 29  # within the 30 s skew, answered from the cache
    assert verifier.verify(token).sub == "u1"
    assert len(signature_checks) == 1
    clock.now = NOW + 60 + 30
    with pytest.raises(AuthenticationFailed) as refused:
        verifier.verify(token)
    assert refused.value.reason == "expired"


def test_refused_tokens_are_not_cached(
    key: Any, clock: FakeClock, signature_checks: list[int]
) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key, iat=NOW + 31)  # iat too far ahead: refused every time
    for _ in range(2):
        with pytest.raises(AuthenticationFailed):
            verifier.verify(token)
    assert len(verifier.cache) == 0
    assert len(signature_checks) == 2


def test_a_tampered_copy_is_a_different_entry(key: Any, clock: FakeClock) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key)
    verifier.verify(token)
    head, payload, signature = token.removeprefix("Bearer ").split(".")
    forged = f"Bearer {head}.{payload}.{signature[:-2]}AA"
    assert token_key(forged) != token_key(token)
    with pytest.raises(AuthenticationFailed):
        verifier.verify(forged)


def test_the_cache_is_bounded_in_entries_and_age(key: Any, clock: FakeClock) -> None:
    verifier = make_verifier(key, clock, max_entries=3, max_age=10.0)
    tokens = [bearer(key, sub=f"u{i}") for i in range(5)]
    for token in tokens:
        verifier.verify(token)
    assert len(verifier.cache) == 3
    # The oldest went first.
    assert verifier.cache.get(token_key(tokens[0].removeprefix("Bearer ")), clock.now) is None
    assert verifier.cache.get(token_key(tokens[4].removeprefix("Bearer ")), clock.now) is not None
    clock.now += 10
    assert verifier.cache.get(token_key(tokens[4].removeprefix("Bearer ")), clock.now) is None


def test_the_cache_keeps_no_token(key: Any, clock: FakeClock) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key)
    verifier.verify(token)
    entry = next(iter(verifier.cache._entries.items()))
    assert token.removeprefix("Bearer ").encode() not in repr(entry).encode()
    signature = token.rsplit(".", 1)[1]
    assert signature not in repr(entry)


def test_a_cache_can_be_switched_off(
    key: Any, clock: FakeClock, signature_checks: list[int]
) -> None:
    verifier = make_verifier(key, clock, max_entries=0)
    token = bearer(key)
    verifier.verify(token)
    verifier.verify(token)
    assert len(signature_checks) == 2


def test_real_clock_default_is_bounded_by_the_token_lifetime() -> None:
    cache: VerifiedTokenCache[str] = VerifiedTokenCache(max_age=300)
    now = time.time()
    cache.put(b"k", ("v",), expires_at=now + 3600, now=now)
    assert cache.get(b"k", now + 299) == (now + 300, "v")
    assert cache.get(b"k", now + 300) is None


def test_expired_entries_are_dropped_as_new_ones_arrive() -> None:
    cache: VerifiedTokenCache[str] = VerifiedTokenCache(max_entries=1000, max_age=10)
    for second in range(100):
        cache.put(str(second).encode(), ("v",), expires_at=second + 5, now=second)
    # Only the tokens of the last five seconds are still worth keeping.
    assert len(cache) <= 6


@pytest.mark.parametrize("spelling", ["Bearer {}", "bearer {}", "Bearer  {}", " Bearer\t{} "])
def test_every_spelling_of_the_header_finds_the_cached_token(
    key: Any, clock: FakeClock, signature_checks: list[int], spelling: str
) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key, jti="j1").removeprefix("Bearer ")
    verifier.verify("Bearer " + token)
    again = verifier.verify(spelling.format(token))
    assert len(signature_checks) == 1
    assert again.sub == "u1"
    assert again.claims["jti"] == "j1"


def test_a_cache_hit_reads_the_claims_of_the_presented_token(key: Any, clock: FakeClock) -> None:
    verifier = make_verifier(key, clock)
    token = bearer(key, custom={"nested": [1, 2]})
    first = verifier.verify(token)
    entry = next(iter(verifier.cache._entries.values()))
    assert len(entry) == 6  # until, issuer, sub, audience, exp, nbf: no payload kept
    second = verifier.verify(token)
    assert isinstance(second.claims, LazyClaims)
    assert dict(second.claims) == dict(first.claims)
    assert second.claims["custom"] == {"nested": [1, 2]}
