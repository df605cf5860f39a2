"""JwksCache and DiscoveryCache against a real local server, with a fake monotonic clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from pactmw.core.errors import KeyUnavailable
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import PrivateJWK, generate_private_jwk, public_key_set
from pactmw.core.keys import CachePolicy, DiscoveryCache, JwksCache
from tests.support.clock import FakeClock
from tests.support.jwks_server import JwksServer, Mode

POLICY = FetchPolicy(allow_http_on_loopback=True, timeout=2.0)
DAY = 24 * 3600.0


@pytest.fixture(scope="module")
def key_a() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="a")


@pytest.fixture(scope="module")
def key_b() -> PrivateJWK:
    return generate_private_jwk("ES256", kid="b")


@pytest.fixture(scope="module")
def module_server() -> Iterator[JwksServer]:
    with JwksServer() as server:
        yield server


@pytest.fixture
def server(module_server: JwksServer, key_a: PrivateJWK) -> JwksServer:
    module_server.reset()
    module_server.set_keys(public_key_set([key_a]))
    return module_server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def cache(clock: FakeClock) -> JwksCache:
    return JwksCache(POLICY, clock=clock)


def _hits(server: JwksServer) -> int:
    return server.hits[server.jwks_path]


def _reason(cache: JwksCache, uri: str, kid: str | None, alg: str = "ES256") -> str:
    with pytest.raises(KeyUnavailable) as info:
        cache.get_keys(uri, kid, alg)
    return info.value.code


# -- fetch, hit, refetch ------------------------------------------------------------------------


def test_first_fetch_then_hits_from_cache(
    server: JwksServer, cache: JwksCache, clock: FakeClock, key_a: PrivateJWK
) -> None:
    assert _hits(server) == 0
    (found,) = cache.get_keys(server.url, "a", "ES256")
    assert found.thumbprint == key_a.public.thumbprint
    assert _hits(server) == 1
    for _ in range(20):
        clock.advance(10)
        assert cache.get_keys(server.url, "a", "ES256") == (found,)
        assert cache.get_keys(server.url, None, "ES256") == (found,)
    assert _hits(server) == 1


def _at_hand(cache: JwksCache, uri: str, kid: str | None, alg: str = "ES256") -> object:
    """`keys_at_hand`'s answer: the keys, None, or the refusal's code."""
    try:
        return cache.keys_at_hand(uri, kid, alg)
    except KeyUnavailable as exc:
        return exc.code


def test_keys_at_hand_answer_as_get_keys_without_fetching(
    server: JwksServer, cache: JwksCache, clock: FakeClock, key_a: PrivateJWK
) -> None:
    """What `get_keys` answers from the cache, refusals included; None where it would fetch."""
    assert _at_hand(cache, server.url, "a") is None  # nothing fetched yet
    assert _hits(server) == 0
    keys = cache.get_keys(server.url, "a", "ES256")
    assert _at_hand(cache, server.url, "a") == keys
    assert _at_hand(cache, server.url, None) == keys
    assert _at_hand(cache, server.url, "a", "RS256") == "unknown_kid"  # as get_keys, no fetch
    assert _at_hand(cache, server.url, "nope") == "unknown_kid"  # within the refetch cooldown
    clock.advance(30)
    assert _at_hand(cache, server.url, "nope") is None  # get_keys would refetch now
    assert _at_hand(cache, server.url, "a") == keys
    clock.advance(DAY)
    assert _at_hand(cache, server.url, "a") is None  # expired
    assert _hits(server) == 1
    server.mode = Mode.FAIL
    assert _reason(cache, server.url + "?other", "a") == "jwks_unavailable"  # one fetch
    assert _at_hand(cache, server.url + "?other", "a") == "jwks_unavailable"  # the cooldown
    assert _hits(server) == 2


def test_alg_mismatch_is_unknown_kid_not_a_fetch_storm(
    server: JwksServer, cache: JwksCache, clock: FakeClock
) -> None:
    cache.get_keys(server.url, "a", "ES256")
    assert _reason(cache, server.url, "a", "RS256") == "unknown_kid"
    assert _hits(server) == 1


def test_unknown_kid_refetches_at_most_once_per_cooldown(
    server: JwksServer, cache: JwksCache, clock: FakeClock
) -> None:
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 1
    # Right after a fetch, an unknown kid does not refetch (the cooldown counts from the fetch).
    assert _reason(cache, server.url, "nope") == "unknown_kid"
    assert _hits(server) == 1

    clock.advance(30)
    assert _reason(cache, server.url, "unknown-0") == "unknown_kid"
    assert _hits(server) == 2  # one refetch
    # A flood of 50 made-up kids within the next 30 s: no further fetch.
    for index in range(1, 51):
        clock.advance(0.5)
        assert _reason(cache, server.url, f"unknown-{index}") == "unknown_kid"
    clock.advance(4.5)  # 29.5 s after the refetch
    assert _reason(cache, server.url, "unknown-51") == "unknown_kid"
    assert _hits(server) == 2
    # Known kids keep working throughout.
    assert cache.get_keys(server.url, "a", "ES256")
    clock.advance(0.5)  # 30 s after the last fetch
    assert _reason(cache, server.url, "unknown-52") == "unknown_kid"
    assert _hits(server) == 3


@pytest.mark.parametrize(
    "answer",
    [Mode.FAIL, Mode.GARBAGE, Mode.REDIRECT, Mode.OVERSIZED, Mode.SLOW, Mode.DOWN],
)
def test_a_made_up_kid_cannot_evict_the_known_keys_whatever_the_refetch_gets(
    server: JwksServer, clock: FakeClock, answer: Mode
) -> None:
    # An attacker's made-up kid makes the cache refetch; whatever that refetch meets (an
    # error, junk, a redirect elsewhere, a body past the cap, a server that stalls past the
    # deadline, nothing listening), the keys fetched before keep verifying, and the flood
    # around it makes no further request.
    cache = JwksCache(FetchPolicy(allow_http_on_loopback=True, timeout=0.5), clock=clock)
    (known,) = cache.get_keys(server.url, "a", "ES256")
    server.mode = answer
    server.delay = 2.0  # Mode.SLOW: well past the 0.5 s deadline
    clock.advance(30)
    for index in range(20):
        assert _reason(cache, server.url, f"made-up-{index}") == "unknown_kid"
        assert cache.get_keys(server.url, "a", "ES256") == (known,)
    if answer is not Mode.DOWN:
        assert _hits(server) == 2  # the first fetch and one refetch


def test_an_empty_set_cached_for_a_day_is_not_pinned(
    server: JwksServer, cache: JwksCache, clock: FakeClock, key_a: PrivateJWK
) -> None:
    # A glitch (or a compromised host) answers an empty set that says "keep me a day": the
    # withdrawal is obeyed at once, as an empty set means, but it does not outlive the
    # refetch cooldown once the keys are back.
    cache.get_keys(server.url, "a", "ES256")
    server.set_keys({"keys": []})
    server.extra_headers = {"Cache-Control": "max-age=86400"}
    clock.advance(600)
    assert _reason(cache, server.url, "a") == "unknown_kid"
    server.set_keys(public_key_set([key_a]))
    clock.advance(29)
    assert _reason(cache, server.url, "a") == "unknown_kid"  # within the cooldown
    clock.advance(1)
    assert cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 3


def test_key_rotation_new_kid_accepted_after_one_refetch(
    server: JwksServer, cache: JwksCache, clock: FakeClock, key_a: PrivateJWK, key_b: PrivateJWK
) -> None:
    cache.get_keys(server.url, "a", "ES256")
    server.set_keys(public_key_set([key_a, key_b]))
    clock.advance(30)
    (found,) = cache.get_keys(server.url, "b", "ES256")
    assert found.thumbprint == key_b.public.thumbprint
    assert _hits(server) == 2
    # The old key stays valid while it is published.
    assert cache.get_keys(server.url, "a", "ES256")
    # Retired: once the next refetch sees it gone, it is gone.
    server.set_keys(public_key_set([key_b]))
    clock.advance(600)
    assert _reason(cache, server.url, "a") == "unknown_kid"
    assert _hits(server) == 3
    assert cache.get_keys(server.url, "b", "ES256")
    assert _hits(server) == 3


def test_new_kid_within_the_cooldown_waits(
    server: JwksServer, cache: JwksCache, clock: FakeClock, key_a: PrivateJWK, key_b: PrivateJWK
) -> None:
    cache.get_keys(server.url, "a", "ES256")
    server.set_keys(public_key_set([key_a, key_b]))
    clock.advance(29.9)
    assert _reason(cache, server.url, "b") == "unknown_kid"
    assert _hits(server) == 1
    clock.advance(0.1)
    assert cache.get_keys(server.url, "b", "ES256")
    assert _hits(server) == 2


# -- expiry and Cache-Control -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cache_control", "ttl"),
    [
        (None, 600.0),  # jose's default
        ("max-age=120", 120.0),
        ("public, max-age=3600", 3600.0),
        ("max-age=5", 60.0),  # clamped up to 60 s
        ("max-age=0", 60.0),
        ("no-store", 60.0),
        ("no-cache", 60.0),
        ("max-age=999999999", DAY),  # clamped down to 24 h
        ("max-age=nonsense", 600.0),
    ],
)
def test_expiry_follows_max_age_clamped(
    server: JwksServer, cache: JwksCache, clock: FakeClock, cache_control: str | None, ttl: float
) -> None:
    if cache_control is not None:
        server.extra_headers = {"Cache-Control": cache_control}
    cache.get_keys(server.url, "a", "ES256")
    clock.advance(ttl - 0.5)
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 1
    clock.advance(0.5)
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 2
    # The refreshed entry gets a fresh lifetime.
    clock.advance(ttl - 0.5)
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 2


def test_custom_cache_policy(server: JwksServer, clock: FakeClock) -> None:
    cache = JwksCache(
        POLICY, CachePolicy(default_ttl=10, min_ttl=1, refetch_cooldown=5), clock=clock
    )
    cache.get_keys(server.url, "a", "ES256")
    clock.advance(9.9)
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 1
    clock.advance(0.1)
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 2
    clock.advance(5)
    assert _reason(cache, server.url, "zz") == "unknown_kid"
    assert _hits(server) == 3


# -- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [Mode.DOWN, Mode.FAIL, Mode.GARBAGE, Mode.REDIRECT])
def test_stale_keys_served_while_the_server_fails_until_24h(
    server: JwksServer, cache: JwksCache, clock: FakeClock, failure: Mode
) -> None:
    start = clock.now
    (known,) = cache.get_keys(server.url, "a", "ES256")
    server.mode = failure
    clock.advance(600)  # expired: a refetch is attempted and fails
    assert cache.get_keys(server.url, "a", "ES256") == (known,)
    if failure is not Mode.DOWN:
        assert _hits(server) == 2
    # Unknown kids still fail as unknown, known ones keep working.
    assert _reason(cache, server.url, "other") == "unknown_kid"
    clock.now = start + DAY
    assert cache.get_keys(server.url, "a", "ES256") == (known,)
    clock.now = start + DAY + 1
    assert _reason(cache, server.url, "a") == "jwks_unavailable"
    # Back up: the next attempt after the cooldown recovers.
    server.mode = Mode.OK
    clock.advance(30)
    assert cache.get_keys(server.url, "a", "ES256") == (known,)


def test_failed_attempts_are_spaced_by_the_cooldown(
    server: JwksServer, cache: JwksCache, clock: FakeClock
) -> None:
    cache.get_keys(server.url, "a", "ES256")
    server.mode = Mode.FAIL
    clock.advance(600)
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 2
    for _ in range(10):
        clock.advance(2.9)
        cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 2
    clock.advance(1)
    cache.get_keys(server.url, "a", "ES256")
    assert _hits(server) == 3


def test_published_private_key_keeps_the_previous_keys(
    server: JwksServer, cache: JwksCache, clock: FakeClock, key_a: PrivateJWK, key_b: PrivateJWK
) -> None:
    (known,) = cache.get_keys(server.url, "a", "ES256")
    server.set_keys({"keys": [key_a.public.to_dict(), key_b.to_dict()]})
    clock.advance(600)
    assert cache.get_keys(server.url, "a", "ES256") == (known,)
    assert _reason(cache, server.url, "b") == "unknown_kid"
    assert _hits(server) == 2


@pytest.mark.parametrize("failure", [Mode.DOWN, Mode.FAIL, Mode.GARBAGE])
def test_no_keys_ever_fetched_is_jwks_unavailable_quickly(
    server: JwksServer, cache: JwksCache, clock: FakeClock, failure: Mode
) -> None:
    server.mode = failure
    started = time.monotonic()
    assert _reason(cache, server.url, "a") == "jwks_unavailable"
    assert time.monotonic() - started < 1.0
    # The failure is remembered for the cooldown: no request per incoming token.
    server.reset_hits()
    for _ in range(10):
        clock.advance(2.9)
        assert _reason(cache, server.url, "a") == "jwks_unavailable"
    assert server.total_hits == 0
    server.mode = Mode.OK
    clock.advance(1)
    assert cache.get_keys(server.url, "a", "ES256")


def test_a_jwks_of_ten_thousand_keys_is_refused_at_the_size_cap(
    server: JwksServer, cache: JwksCache, key_a: PrivateJWK
) -> None:
    # 10,000 members (about 1.5 MB) are never read, let alone imported: the body cap
    # (64 KiB) stops the download.
    member = key_a.public.to_dict()
    server.set_keys({"keys": [{**member, "kid": f"k{index}"} for index in range(10_000)]})
    assert _reason(cache, server.url, "k1") == "jwks_unavailable"
    server.send_content_length = False  # streamed: cut once past the cap, all the same
    fresh = JwksCache(POLICY, clock=FakeClock(0.0))
    assert _reason(fresh, server.url, "k1") == "jwks_unavailable"


def test_private_key_in_first_document_is_jwks_unavailable(
    server: JwksServer, cache: JwksCache, key_a: PrivateJWK
) -> None:
    server.set_keys({"keys": [key_a.to_dict()]})
    assert _reason(cache, server.url, "a") == "jwks_unavailable"


def test_http_refused_without_the_policy_flag(server: JwksServer, clock: FakeClock) -> None:
    cache = JwksCache(FetchPolicy(), clock=clock)
    assert _reason(cache, server.url, "a") == "jwks_unavailable"
    assert server.total_hits == 0


# -- concurrency --------------------------------------------------------------------------------


def test_concurrent_misses_share_one_fetch(
    server: JwksServer, cache: JwksCache, key_a: PrivateJWK
) -> None:
    server.mode = Mode.SLOW
    server.delay = 0.5
    barrier = threading.Barrier(20)
    results: list[object] = []
    errors: list[BaseException] = []

    def worker() -> None:
        barrier.wait()
        try:
            results.append(cache.get_keys(server.url, "a", "ES256"))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert errors == []
    assert len(results) == 20
    assert all(r == results[0] for r in results)
    assert _hits(server) == 1


def test_concurrent_unknown_kids_share_one_refetch(
    server: JwksServer, cache: JwksCache, clock: FakeClock
) -> None:
    cache.get_keys(server.url, "a", "ES256")
    clock.advance(30)
    server.mode = Mode.SLOW
    server.delay = 0.3
    barrier = threading.Barrier(20)
    codes: list[str] = []

    def worker(index: int) -> None:
        barrier.wait()
        try:
            cache.get_keys(server.url, f"nope-{index}", "ES256")
        except KeyUnavailable as exc:
            codes.append(exc.code)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert codes == ["unknown_kid"] * 20
    assert _hits(server) == 2


def test_async_concurrent_misses_share_one_fetch(
    server: JwksServer, cache: JwksCache, clock: FakeClock, key_a: PrivateJWK
) -> None:
    server.mode = Mode.SLOW
    server.delay = 0.3

    async def main() -> list[tuple[object, ...]]:
        return await asyncio.gather(*(cache.aget_keys(server.url, "a", "ES256") for _ in range(20)))

    results = asyncio.run(main())
    assert len(results) == 20
    assert all(len(r) == 1 and r == results[0] for r in results)
    assert _hits(server) == 1

    async def unknown() -> str:
        try:
            await cache.aget_keys(server.url, "missing", "ES256")
        except KeyUnavailable as exc:
            return exc.code
        return "accepted"

    assert asyncio.run(unknown()) == "unknown_kid"
    # A cache hit on the async path does not fetch.
    server.mode = Mode.OK
    asyncio.run(main())
    assert _hits(server) == 1


def test_async_and_sync_share_the_cache(
    server: JwksServer, cache: JwksCache, key_a: PrivateJWK
) -> None:
    (found,) = asyncio.run(cache.aget_keys(server.url, "a", "ES256"))
    assert cache.get_keys(server.url, "a", "ES256") == (found,)
    assert _hits(server) == 1


def test_async_unavailable(server: JwksServer, cache: JwksCache) -> None:
    server.mode = Mode.DOWN

    async def main() -> str:
        try:
            await cache.aget_keys(server.url, "a", "ES256")
        except KeyUnavailable as exc:
            return exc.code
        return "accepted"

    assert asyncio.run(main()) == "jwks_unavailable"


# -- bounded size -------------------------------------------------------------------------------


def test_max_uris_evicts_the_least_recently_used(
    server: JwksServer, clock: FakeClock, key_a: PrivateJWK
) -> None:
    for path in ("/a.json", "/b.json", "/c.json"):
        server.set_keys(public_key_set([key_a]))
        server.set_json(path, public_key_set([key_a]).to_dict())
    cache = JwksCache(POLICY, CachePolicy(max_uris=2), clock=clock)
    a, b, c = (server.url_for(p) for p in ("/a.json", "/b.json", "/c.json"))
    cache.get_keys(a, "a", "ES256")
    cache.get_keys(b, "a", "ES256")
    cache.get_keys(a, "a", "ES256")  # a is now the most recently used
    cache.get_keys(c, "a", "ES256")  # evicts b
    assert server.hits["/a.json"] == server.hits["/b.json"] == server.hits["/c.json"] == 1
    cache.get_keys(a, "a", "ES256")
    cache.get_keys(c, "a", "ES256")
    assert server.hits["/a.json"] == server.hits["/c.json"] == 1
    cache.get_keys(b, "a", "ES256")  # refetched, evicts a (least recently used)
    assert server.hits["/b.json"] == 2
    cache.get_keys(c, "a", "ES256")
    assert server.hits["/c.json"] == 1
    cache.get_keys(a, "a", "ES256")
    assert server.hits["/a.json"] == 2


def test_verified_key_sets_are_kept_over_new_ones_and_demoted_past_their_share(
    server: JwksServer, clock: FakeClock, key_a: PrivateJWK
) -> None:
    # Five entries: four (80 %) for key sets that verified something, the rest for newcomers.
    paths = [f"/{name}.json" for name in "abcdefgh"]
    for path in paths:
        server.set_json(path, public_key_set([key_a]).to_dict())
    a, b, c, d, e, f, g, h = (server.url_for(p) for p in paths)
    cache = JwksCache(POLICY, CachePolicy(max_uris=5), clock=clock)
    for uri in (a, b, c, d):
        cache.get_keys(uri, "a", "ES256")
        cache.mark_verified(uri)
    for uri in (e, f, g, h):  # never verified: they push out only each other
        cache.get_keys(uri, "a", "ES256")
    for uri in (a, b, c, d):
        cache.get_keys(uri, "a", "ES256")
    assert all(server.hits[p] == 1 for p in paths)
    cache.get_keys(e, "a", "ES256")  # pushed out by f, g, h: fetched again
    assert server.hits["/e.json"] == 2
    # A fifth verified key set: the least recently used verified one (a) goes back to the
    # newcomers' part, still held...
    cache.mark_verified(e)
    cache.get_keys(a, "a", "ES256")
    assert server.hits["/a.json"] == 1
    # ...where the next newcomer pushes it out, as any newcomer.
    cache.get_keys(f, "a", "ES256")
    cache.get_keys(a, "a", "ES256")
    assert server.hits["/a.json"] == 2


# -- OIDC discovery -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server() -> Iterator[JwksServer]:
    with JwksServer(tls=True) as server:
        yield server


@pytest.fixture
def discovery(
    tls_server: JwksServer, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> DiscoveryCache:
    monkeypatch.setenv("SSL_CERT_FILE", tls_server.ca_file)
    tls_server.reset()
    return DiscoveryCache(POLICY, clock=clock)


CONFIG_PATH = "/.well-known/openid-configuration"


def test_discovery_finds_the_jwks_uri_and_caches_it(
    tls_server: JwksServer, discovery: DiscoveryCache, clock: FakeClock
) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": tls_server.url})
    assert discovery.jwks_uri(issuer) == tls_server.url
    clock.advance(3599)
    assert discovery.jwks_uri(issuer) == tls_server.url
    assert tls_server.hits[CONFIG_PATH] == 1
    clock.advance(1)
    assert discovery.jwks_uri(issuer) == tls_server.url
    assert tls_server.hits[CONFIG_PATH] == 2
    assert asyncio.run(discovery.ajwks_uri(issuer)) == tls_server.url
    assert tls_server.hits[CONFIG_PATH] == 2


def test_discovery_with_a_trailing_slash_issuer(
    tls_server: JwksServer, discovery: DiscoveryCache
) -> None:
    issuer = tls_server.base_url + "/"
    tls_server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": tls_server.url})
    assert discovery.jwks_uri(issuer) == tls_server.url


@pytest.mark.parametrize(
    "document",
    [
        {"issuer": "https://evil.example", "jwks_uri": "https://evil.example/jwks.json"},
        {"jwks_uri": "https://127.0.0.1/jwks.json"},
        {"issuer": "ISSUER/", "jwks_uri": "JWKS"},  # not an exact match
    ],
)
def test_discovery_issuer_mismatch_refused(
    tls_server: JwksServer, discovery: DiscoveryCache, clock: FakeClock, document: dict[str, str]
) -> None:
    issuer = tls_server.base_url
    resolved = {
        k: v.replace("ISSUER", issuer).replace("JWKS", tls_server.url) for k, v in document.items()
    }
    tls_server.set_json(CONFIG_PATH, resolved)
    assert discovery.jwks_uri(issuer) is None
    # Failures are cached for a minute.
    clock.advance(59)
    assert discovery.jwks_uri(issuer) is None
    assert tls_server.hits[CONFIG_PATH] == 1
    clock.advance(1)
    assert discovery.jwks_uri(issuer) is None
    assert tls_server.hits[CONFIG_PATH] == 2


@pytest.mark.parametrize(
    "jwks_uri", ["http://127.0.0.1/jwks.json", "ftp://x/jwks.json", "/relative/jwks.json", 7, None]
)
def test_discovery_refuses_non_https_jwks_uri(
    tls_server: JwksServer, discovery: DiscoveryCache, jwks_uri: object
) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": jwks_uri})
    assert discovery.jwks_uri(issuer) is None


def test_discovery_refuses_non_https_issuers_without_fetching(
    server: JwksServer, clock: FakeClock
) -> None:
    issuer = server.base_url  # http://127.0.0.1:PORT
    server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": server.url})
    discovery = DiscoveryCache(POLICY, clock=clock)
    assert discovery.jwks_uri(issuer) is None
    assert discovery.jwks_uri("ftp://example.com") is None
    assert server.total_hits == 0


@pytest.mark.parametrize("failure", [Mode.FAIL, Mode.GARBAGE, Mode.REDIRECT, Mode.DOWN])
def test_discovery_failures_are_none(
    tls_server: JwksServer, discovery: DiscoveryCache, failure: Mode
) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": tls_server.url})
    tls_server.mode = failure
    try:
        assert discovery.jwks_uri(issuer) is None
    finally:
        tls_server.mode = Mode.OK


@pytest.mark.parametrize(
    "issuer", ["https://" + "a" * 64 + ".example", "https://[::1", "https://a..b", "https://\ud800"]
)
def test_discovery_of_unresolvable_issuers_is_none(clock: FakeClock, issuer: str) -> None:
    # Issuers come from unauthenticated tokens in open mode: no exception may escape.
    assert DiscoveryCache(POLICY, clock=clock).jwks_uri(issuer) is None


def test_concurrent_discovery_misses_share_one_fetch(
    tls_server: JwksServer, discovery: DiscoveryCache
) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": tls_server.url})
    tls_server.mode = Mode.SLOW
    tls_server.delay = 0.3
    barrier = threading.Barrier(10)
    found: list[str | None] = []

    def worker() -> None:
        barrier.wait()
        found.append(discovery.jwks_uri(issuer))

    threads = [threading.Thread(target=worker) for _ in range(10)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
    finally:
        tls_server.mode = Mode.OK
    assert found == [tls_server.url] * 10
    assert tls_server.hits[CONFIG_PATH] == 1


def test_async_discovery_misses_share_one_fetch_and_hits_stay_cached(
    tls_server: JwksServer, discovery: DiscoveryCache, clock: FakeClock
) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": tls_server.url})
    tls_server.mode = Mode.SLOW
    tls_server.delay = 0.3

    async def many() -> list[str | None]:
        return await asyncio.gather(*(discovery.ajwks_uri(issuer) for _ in range(10)))

    try:
        assert asyncio.run(many()) == [tls_server.url] * 10
    finally:
        tls_server.mode = Mode.OK
    assert tls_server.hits[CONFIG_PATH] == 1
    clock.advance(3599)
    assert asyncio.run(many()) == [tls_server.url] * 10
    assert tls_server.hits[CONFIG_PATH] == 1


def test_discovery_failures_are_remembered_for_a_minute(
    tls_server: JwksServer, discovery: DiscoveryCache, clock: FakeClock
) -> None:
    issuer = tls_server.base_url
    tls_server.set_json(CONFIG_PATH, {"issuer": "https://someone-else.example"})
    assert discovery.jwks_uri(issuer) is None
    tls_server.set_json(CONFIG_PATH, {"issuer": issuer, "jwks_uri": tls_server.url})
    clock.advance(59)
    assert discovery.jwks_uri(issuer) is None  # a flood of tokens is not a flood of fetches
    assert tls_server.hits[CONFIG_PATH] == 1
    clock.advance(1)
    assert discovery.jwks_uri(issuer) == tls_server.url
    assert tls_server.hits[CONFIG_PATH] == 2


def test_discovery_keeps_at_most_max_issuers(
    tls_server: JwksServer, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", tls_server.ca_file)
    tls_server.reset()
    discovery = DiscoveryCache(POLICY, clock=clock, max_issuers=1)
    first, second = tls_server.base_url, tls_server.base_url + "/"
    tls_server.set_json(CONFIG_PATH, {"issuer": first, "jwks_uri": tls_server.url})
    assert discovery.jwks_uri(first) == tls_server.url
    assert discovery.jwks_uri(second) is None  # its document names the other issuer
    assert discovery.jwks_uri(first) == tls_server.url  # evicted by `second`: fetched again
    assert tls_server.hits[CONFIG_PATH] == 3
