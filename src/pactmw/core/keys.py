"""Key sets fetched over HTTP: the only I/O a verifier does.

`JwksCache` keeps one entry per JWKS URI. The decisions (is the entry fresh, may an unknown
`kid` trigger a refetch, may stale keys be served after a failure) are pure functions of the
entry and the time; the fetch itself is one blocking call that the sync path makes in the
calling thread and the async path in a worker thread. Concurrent misses for one URI share one
fetch, and no lock is held while fetching.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import ClassVar, Generic, Protocol, TypeVar

from attrs import frozen

from pactmw.core._shared_fetch import FetchRules, SharedFetches
from pactmw.core.encoding import json_loads, loggable
from pactmw.core.errors import FetchError, KeyUnavailable, MalformedInput
from pactmw.core.fetch import FetchPolicy, FetchResponse, http_get, max_age
from pactmw.core.jwk import KeySet, PublicJWK, parse_jwks

logger = logging.getLogger("pactmw.keys")

Fetcher = Callable[[str, FetchPolicy], FetchResponse]


class _Expiring(Protocol):
    """What every cached document holds: when it is to be fetched again."""

    @property
    def expires_at(self) -> float: ...


_Document = TypeVar("_Document", bound=_Expiring)


@frozen
class CachePolicy:
    """How long key sets live. Defaults follow jose's remote key sets, which the reference uses."""

    default_ttl: float = 600.0
    min_ttl: float = 60.0
    max_ttl: float = 24 * 3600.0
    refetch_cooldown: float = 30.0
    stale_if_error: float = 24 * 3600.0
    max_uris: int = 1000

    def ttl(self, headers: Mapping[str, str]) -> float:
        """How long to keep an answer with these headers: its `Cache-Control` max-age within
        [`min_ttl`, `max_ttl`], or `default_ttl` when it gives none."""
        ttl = max_age(headers)
        return self.default_ttl if ttl is None else min(max(ttl, self.min_ttl), self.max_ttl)

    def serves_stale(self, fetched_at: float, now: float) -> bool:
        """Whether a document last fetched at `fetched_at` may still answer at `now` after its
        refetch failed: for `stale_if_error` seconds counted from that fetch (not from its
        expiry), so no document is ever used more than that long after it was last seen."""
        return now - fetched_at <= self.stale_if_error


@frozen
class _Entry:
    keys: KeySet | None  # None until a fetch has succeeded
    fetched_at: float  # last successful fetch
    expires_at: float
    attempted_at: float  # last fetch attempt, successful or not


class DocumentCache(ABC, Generic[_Document]):
    """What `JwksCache` and `ClientMetadataCache` share: documents fetched with
    `fetch_policy` (by `fetcher`) and kept within `cache_policy`, where concurrent misses for
    one URL share one fetch. Safe to share across threads and event loops; `clock` is
    monotonic seconds (injectable for tests).

    A subclass says what one fetch yields (`_fetch_document`, which never raises: a failure
    is a document too), what a fetch that raised anyway leaves (`_crashed`), what a waiter
    that gave up raises (`_timed_out`), and what a fetch refused by the limit on new keys
    raises (`_refused`). A caller that verified something with a document says so with
    `mark_verified`, so that made-up keys cannot push it out (see `SharedFetches`).
    """

    #: What the documents are, for the log line of a refused fetch, and where it goes.
    what: ClassVar[str]
    log: ClassVar[logging.Logger]

    def __init__(
        self,
        fetch_policy: FetchPolicy | None = None,
        cache_policy: CachePolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        fetcher: Fetcher = http_get,
    ) -> None:
        self.fetch_policy = fetch_policy or FetchPolicy()
        self.cache_policy = cache_policy or CachePolicy()
        self._clock = clock
        self._fetcher = fetcher
        rules = FetchRules(
            fetch=self._fetch_document,
            crashed=self._crashed,
            timeout=self.fetch_policy.timeout * 2,
            timed_out=self._timed_out,
            refused=self._refused,
            what=self.what,
            logger=self.log,
        )
        self._documents: SharedFetches[_Document] = SharedFetches(
            rules, self.cache_policy.max_uris, clock=clock
        )

    def mark_verified(self, key: str) -> None:
        """Record that the document held for `key` just served a successful verification: it
        is kept over documents that never did, and its refetches are never refused."""
        self._documents.promote(key)

    @abstractmethod
    def _fetch_document(self, url: str, previous: _Document | None) -> _Document: ...

    @abstractmethod
    def _crashed(self, url: str, previous: _Document | None, exc: BaseException) -> _Document: ...

    @abstractmethod
    def _timed_out(self, url: str) -> Exception: ...

    @abstractmethod
    def _refused(self, url: str) -> Exception: ...

    def _stale(self, answer: _Document | None) -> bool:
        """Whether `answer` is fetched (again) before it serves: none is held, or it is past
        its `expires_at` (`JwksCache` asks more of an entry: `_needs_fetch`)."""
        return answer is None or self._clock() >= answer.expires_at


class JwksCache(DocumentCache[_Entry]):
    """A bounded cache of remote JWKS documents, safe to share across threads and event loops.

    `clock` is a monotonic clock in seconds (injectable for tests).
    """

    what = "JWKS"
    log = logger

    # -- the pure part ---------------------------------------------------------------------

    def _decide(self, entry: _Entry | None, kid: str | None, alg: str, now: float) -> bool:
        """Tell whether a fetch is needed before answering for (`kid`, `alg`)."""
        if entry is None or entry.keys is None:
            # Nothing known yet; after a failure, wait out the cooldown before trying again.
            return entry is None or now - entry.attempted_at >= self.cache_policy.refetch_cooldown
        if now >= entry.expires_at:
            return now - entry.attempted_at >= self.cache_policy.refetch_cooldown or (
                entry.fetched_at == entry.attempted_at
            )
        if entry.keys.candidates(kid, alg):
            return False
        # An unknown kid may mean the agent rotated its keys: refetch, but at most once per
        # cooldown so a flood of made-up kids cannot turn us into a traffic amplifier.
        return now - entry.attempted_at >= self.cache_policy.refetch_cooldown

    def _answer(
        self, uri: str, entry: _Entry | None, kid: str | None, alg: str, now: float
    ) -> tuple[PublicJWK, ...]:
        if entry is None or entry.keys is None:
            raise KeyUnavailable("jwks_unavailable", f"no keys could be fetched from {uri}")
        if now >= entry.expires_at and not self.cache_policy.serves_stale(entry.fetched_at, now):
            raise KeyUnavailable("jwks_unavailable", f"keys from {uri} are too old to use")
        candidates = entry.keys.candidates(kid, alg)
        if not candidates:
            raise KeyUnavailable("unknown_kid", "no key fits the token's kid and alg")
        return candidates

    def _fetch_document(self, uri: str, previous: _Entry | None) -> _Entry:
        """Fetch (blocking) and compute the new entry; never raises."""
        now = self._clock()
        try:
            response = self._fetcher(uri, self.fetch_policy)
            keys = parse_jwks(response.body)
        except Exception as exc:  # any failure must keep the known keys, never hang waiters
            # One greppable line: what failed, where, and what it means for requests.
            kept = previous is not None and previous.keys is not None
            state = "keeping the keys fetched before" if kept else "no keys"
            if isinstance(exc, (FetchError, MalformedInput)):
                logger.warning(
                    "JWKS fetch failed: reason=jwks_unavailable uri=%s error=%r state=%s",
                    loggable(uri),
                    loggable(str(exc)),
                    state,
                )
            else:
                logger.exception(
                    "JWKS fetch failed unexpectedly: reason=jwks_unavailable uri=%s state=%s",
                    loggable(uri),
                    state,
                )
            if previous is None:
                return _Entry(keys=None, fetched_at=now, expires_at=now, attempted_at=now)
            # Keep serving what we knew (stale-if-error); `_answer` bounds how stale.
            return _Entry(
                keys=previous.keys,
                fetched_at=previous.fetched_at,
                expires_at=previous.expires_at,
                attempted_at=now,
            )
        ttl = self.cache_policy.ttl(response.headers)
        return _Entry(keys=keys, fetched_at=now, expires_at=now + ttl, attempted_at=now)

    def _crashed(self, uri: str, previous: _Entry | None, exc: BaseException) -> _Entry:
        """What a fetch that raised leaves: the entry before it, or one with no keys."""
        now = self._clock()
        return previous or _Entry(keys=None, fetched_at=now, expires_at=now, attempted_at=now)

    def _timed_out(self, uri: str) -> KeyUnavailable:
        return KeyUnavailable("jwks_unavailable", f"fetching {uri} timed out")

    def _refused(self, uri: str) -> KeyUnavailable:
        return KeyUnavailable("jwks_unavailable", f"too many new key sets being fetched: {uri}")

    def _needs_fetch(self, kid: str | None, alg: str) -> Callable[[_Entry | None], bool]:
        return lambda entry: self._decide(entry, kid, alg, self._clock())

    # -- the two drivers -------------------------------------------------------------------

    def get_keys(
        self, uri: str, kid: str | None, alg: str, *, vetted: bool = True
    ) -> tuple[PublicJWK, ...]:
        """The keys that may verify a token with `kid`/`alg`, fetching if needed (blocking).

        `vetted=False` for a URI a request chose (an open-mode discovery document, a Poppy
        agent's metadata): until `mark_verified`, its first fetch may be refused while too
        many such fetches run (`jwks_unavailable`). Raises `KeyUnavailable` (`unknown_kid` or
        `jwks_unavailable`).
        """
        entry = self._documents.get(uri, self._needs_fetch(kid, alg), vetted=vetted)
        return self._answer(uri, entry, kid, alg, self._clock())

    def keys_at_hand(self, uri: str, kid: str | None, alg: str) -> tuple[PublicJWK, ...] | None:
        """What `get_keys` answers when it needs no fetch (raising as it would), or None when
        it would fetch: a caller that has nothing else to wait for can skip its I/O driver."""
        entry = self._documents.held(uri, self._needs_fetch(kid, alg))
        return None if entry is None else self._answer(uri, entry, kid, alg, self._clock())

    async def aget_keys(
        self, uri: str, kid: str | None, alg: str, *, vetted: bool = True
    ) -> tuple[PublicJWK, ...]:
        """Async `get_keys`: a cache hit never leaves the event loop; a fetch runs in a thread."""
        entry = await self._documents.aget(uri, self._needs_fetch(kid, alg), vetted=vetted)
        return self._answer(uri, entry, kid, alg, self._clock())


class _FetchLimitReached(FetchError):
    """A discovery refused by the limit on new keys (logged once per burst, not per call)."""


@frozen
class _Discovered:
    jwks_uri: str | None  # None: discovery failed (kept for `failure_ttl`)
    expires_at: float


class DiscoveryCache(DocumentCache[_Discovered]):
    """OIDC discovery of an issuer's `jwks_uri` for open mode (PACT §3.1).

    `{iss}/.well-known/openid-configuration` must be https and its `issuer` must equal `iss`.
    Answers are cached for an hour, failures for a minute, at most `max_issuers` of them. As
    with key sets, concurrent misses for one issuer share one fetch, and a cached answer
    never leaves the event loop. Every issuer is a token's choice: until `mark_verified`, its
    discovery may be refused while too many run (see `SharedFetches`).
    """

    what = "OIDC discovery"
    log = logger
    success_ttl = 3600.0
    failure_ttl = 60.0

    def __init__(
        self,
        fetch_policy: FetchPolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        fetcher: Fetcher = http_get,
        max_issuers: int = 1000,
    ) -> None:
        super().__init__(
            fetch_policy, CachePolicy(max_uris=max_issuers), clock=clock, fetcher=fetcher
        )

    def _discover(self, issuer: str) -> str | None:
        if not issuer.startswith("https://"):
            return None
        url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            document = json_loads(self._fetcher(url, self.fetch_policy).body)
        except (FetchError, MalformedInput) as exc:
            # The issuer is what a token named (discovery runs for unregistered ones too).
            logger.warning("OIDC discovery failed for %s: %s", loggable(issuer), loggable(exc))
            return None
        if not isinstance(document, dict) or document.get("issuer") != issuer:
            logger.warning("OIDC discovery for %s: issuer mismatch", loggable(issuer))
            return None
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith("https://"):
            return None
        return jwks_uri

    def _fetch_document(self, issuer: str, previous: _Discovered | None) -> _Discovered:
        found = self._discover(issuer)
        ttl = self.success_ttl if found else self.failure_ttl
        return _Discovered(jwks_uri=found, expires_at=self._clock() + ttl)

    def _crashed(
        self, issuer: str, previous: _Discovered | None, exc: BaseException
    ) -> _Discovered:
        return _Discovered(jwks_uri=None, expires_at=self._clock() + self.failure_ttl)

    def _timed_out(self, issuer: str) -> FetchError:
        return FetchError(f"OIDC discovery for {issuer} timed out")

    def _refused(self, issuer: str) -> _FetchLimitReached:
        return _FetchLimitReached(f"too many new issuers being discovered: {issuer}")

    def jwks_uri(self, issuer: str) -> str | None:
        """The issuer's discovered https `jwks_uri`, or None (blocking on a miss)."""
        try:
            answer = self._documents.get(issuer, self._stale)
        except _FetchLimitReached:  # said once per burst where it was refused
            return None
        except FetchError as exc:  # waited too long for another caller's fetch
            logger.warning("%s", loggable(exc))
            return None
        return answer.jwks_uri if answer is not None else None

    async def ajwks_uri(self, issuer: str) -> str | None:
        """Async `jwks_uri`: a cached answer never leaves the event loop; a fetch runs in a
        worker thread."""
        try:
            answer = await self._documents.aget(issuer, self._stale)
        except _FetchLimitReached:
            return None
        except FetchError as exc:
            logger.warning("%s", loggable(exc))
            return None
        return answer.jwks_uri if answer is not None else None


__all__ = [
    "CachePolicy",
    "DiscoveryCache",
    "DocumentCache",
    "Fetcher",
    "JwksCache",
]
