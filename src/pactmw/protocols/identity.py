"""PACT 1.0 personal-agent identity (spec §3, reference `verifyPlatformJwt`).

The checks run in the reference's order: Bearer parsing, `alg` (before any key lookup),
issuer registered and enabled, signature, `aud`, required claims, expiry, lifetime, future
`iat`. `jti` is deliberately not tracked: the spec lets a personal agent reuse a token until it
expires, and the conformance suite fails a Provider that refuses reuse.

The verification is written once, as a generator that yields what it needs (an agent record,
keys) and receives the answers; `verify` and `averify` are the two small drivers that answer
with blocking or non-blocking I/O (the pattern of httpx's auth flows).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from attrs import field, frozen

from pactmw.core.drive import adrive, drive
from pactmw.core.encoding import b64url_decode_segment, is_storable_text, json_loads, loggable
from pactmw.core.errors import AuthenticationFailed, JoseError
from pactmw.core.jose import JWS, HeaderCache, parse_compact, verify_with_any
from pactmw.core.keys import DiscoveryCache, JwksCache
from pactmw.core.threads import WorkerThreads
from pactmw.core.tokencache import VerifiedTokenCache, token_key
from pactmw.protocols._agent_registry import (
    NO_KEYS,
    AgentOverrides,
    AgentRegistry,
    AgentResolver,
    MemoryAgentOverrides,
    RegisteredAgent,
    RuntimeAgent,
    RuntimeAgents,
)
from pactmw.protocols._identity_lookups import (
    Keys,
    Need,
    NeedAgent,
    NeedDiscovery,
    NeedKeys,
    aanswer,
    alookup,
    answer,
    keys_at_hand,
)
from pactmw.protocols.delegation import Delegation

logger = logging.getLogger("pactmw.identity")

#: PACT §3.2: personal-agent JWTs are ES256 or RS256, nothing else.
IDENTITY_ALGORITHMS = frozenset({"ES256", "RS256"})


class LazyClaims(Mapping[str, Any]):
    """The verified claims of a compact JWS, parsed from its payload on first use.

    Cache hits hand these out: a cache entry keeps no claims at all (the presented token is
    the verified one, byte for byte, by its SHA-256 key), and a request that never reads
    `claims` never pays for decoding them.
    """

    __slots__ = ("_parsed", "_token")

    def __init__(self, token: str) -> None:
        self._token = token
        self._parsed: Mapping[str, Any] | None = None

    def _claims(self) -> Mapping[str, Any]:
        if self._parsed is None:
            payload = self._token.split(".")[1].encode("ascii")
            self._parsed = MappingProxyType(json_loads(b64url_decode_segment(payload)))
        return self._parsed

    def __getitem__(self, name: str) -> Any:
        return self._claims()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._claims())

    def __len__(self) -> int:
        return len(self._claims())


#: What the token cache keeps of a verified token, after its `until`: issuer, sub, audience,
#: exp and nbf (the issuer and audience strings are shared by every token of an agent).
_Entry = tuple[float, str, str, str, float, float | None]


def actor_id_for(issuer: str, sub: str) -> str:
    """A stable, opaque id for the user `(issuer, sub)`: `pa:` + 37 hex digits of SHA-256."""
    return "pa:" + hashlib.sha256(f"{issuer}\n{sub}".encode()).hexdigest()[:37]


#: `actor_id_for` of the users seen lately: an app reads `actor_id` on every request of the
#: same few users, and the digest costs seven times the lookup. Safe to keep: the id depends
#: on nothing but its two arguments (no check is skipped by reusing it).
_recent_actor_id = functools.lru_cache(maxsize=4096)(actor_id_for)


# Not slotted: built with dict stores, not an `object.__setattr__` per field (0.15 µs a check).
@frozen(slots=False)
class PersonalAgent:
    """A verified caller: which personal agent, for which of its users (`sub`).

    `actor_id` is what an app keys the user by. `claims` are the verified JWT claims.
    """

    # The identity verifier builds these positionally, in this order.
    issuer: str
    sub: str
    name: str
    claims: Mapping[str, Any] = field(repr=False)
    audience: str
    #: Set by the Provider when a valid delegation token came with the request (PACT §5.5).
    delegation: Delegation | None = None

    @property
    def actor_id(self) -> str:
        """`pa:` + 37 hex digits of SHA-256(issuer, sub): stable and opaque, for apps to key
        the user by (computed on use: most requests never need it)."""
        return _recent_actor_id(self.issuer, self.sub)


_Agent = RegisteredAgent | None


def parse_bearer(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive)."""
    if not authorization:
        raise AuthenticationFailed("missing_token")
    if not isinstance(authorization, str):
        # An ASGI server's header values are bytes: the caller decodes them (latin-1).
        raise AuthenticationFailed("malformed_header", "the header value must be a str")
    parts = authorization.split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        raise AuthenticationFailed("malformed_header", "expected 'Bearer <token>'")
    return parts[1]


_MAX_NUMERIC_DATE = 2**53


def _number(claims: Mapping[str, Any], name: str) -> float:
    """A NumericDate claim. Exact type checks: bool (an int subclass) is never a date, and a
    huge int is refused before `float()` could overflow."""
    value: Any = claims.get(name)
    kind = type(value)
    if (kind is int and -_MAX_NUMERIC_DATE <= value <= _MAX_NUMERIC_DATE) or (
        kind is float and math.isfinite(value)
    ):
        return float(value)
    raise AuthenticationFailed("bad_claims", f"{name} missing or not a number")


class IdentityVerifier:
    """Verifies PACT personal-agent JWTs. Thread-safe; share one per Provider.

    `audience` is the Provider-wide `aud` value (spec §3.1: one opaque string per Provider,
    never a card URL). With `open_mode`, issuers that are not registered are accepted when
    OIDC discovery finds their JWKS (spec §3.1 "open Provider"); every other check still runs.
    """

    def __init__(
        self,
        *,
        audience: str,
        registry: AgentRegistry,
        keys: JwksCache | None = None,
        open_mode: bool = False,
        discovery: DiscoveryCache | None = None,
        clock: Callable[[], float] = time.time,
        leeway: float = 30.0,
        max_lifetime: float = 300.0,
        cache: VerifiedTokenCache[str, str, str, float, float | None] | None = None,
        threads: WorkerThreads | None = None,
    ) -> None:
        if not audience:
            raise ValueError("audience must be a non-empty string")
        self.audience = audience
        self.registry = registry
        self.keys = keys or JwksCache()
        self.open_mode = open_mode
        self.discovery = discovery or DiscoveryCache(self.keys.fetch_policy)
        self._clock = clock
        self._headers = HeaderCache()
        #: Verified tokens, so a token presented again skips the signature check; the checks
        #: that can change (agent enabled, audience, time) still run on every request.
        self.cache: VerifiedTokenCache[str, str, str, float, float | None] = (
            cache if cache is not None else VerifiedTokenCache(max_age=max_lifetime)
        )
        self.leeway = leeway
        self.max_lifetime = max_lifetime
        #: The worker threads of the async drivers (store reads of a blocking registry); a
        #: Provider and its guard share this pool.
        self.threads = threads if threads is not None else WorkerThreads()

    # -- the one verification flow -----------------------------------------------------------

    def _begin(self, authorization: str | None) -> tuple[str, bytes, _Entry | None]:
        """The token, its cache key and its cache entry (None on a miss)."""
        now = self._clock()
        fast = None
        if type(authorization) is str and authorization.startswith("Bearer "):
            # The header every client sends. When this token is cached it holds no whitespace
            # (it parsed as a JWS), so `parse_bearer` would return it too: a hit skips the
            # split (0.3 µs of a 2.5 µs hit). Any other spelling takes the general path.
            fast = authorization[7:]
            key = token_key(fast)
            entry = self.cache.get(key, now)
            if entry is not None:
                return fast, key, entry
        token = parse_bearer(authorization)
        if token != fast:
            key = token_key(token)
            entry = self.cache.get(key, now)
        return token, key, entry

    def _start(self, token: str, key: bytes) -> PersonalAgent | Generator[Need, Any, PersonalAgent]:
        """Check a token the cache does not hold: in place when nothing needs I/O (the registry
        answers from memory, the agent's keys are inline or cached), else through the flow."""
        try:
            jws = parse_compact(token, allowed_algs=IDENTITY_ALGORITHMS, header_cache=self._headers)
            claims = jws.claims()
        except JoseError as exc:
            raise AuthenticationFailed(
                "unsupported_alg" if exc.code == "alg_not_allowed" else "malformed_token", str(exc)
            ) from exc
        issuer = claims.get("iss")
        if not isinstance(issuer, str) or not issuer:
            raise AuthenticationFailed("unknown_issuer", "iss missing or not a string")
        if self.registry.may_block:
            return self._flow(jws, claims, issuer, key, NeedAgent(issuer))
        try:
            agent = self.registry.lookup(issuer)  # in memory: no I/O to hand out
            if agent is None or not agent.enabled:
                return self._flow(jws, claims, issuer, key, agent)  # its refusals
            if (keys := keys_at_hand(self.keys, agent, jws)) is None:
                return self._flow(jws, claims, issuer, key, agent)  # a fetch to wait for
            # The flow's steps for this agent, without a generator and a driver to pay for.
            return self._conclude(jws, claims, agent, keys, key)
        except AuthenticationFailed as exc:
            exc.issuer = issuer  # what the token claims: for the logs, never trusted
            raise

    def _flow(
        self, jws: JWS, claims: dict[str, Any], issuer: str, key: bytes, asked: NeedAgent | _Agent
    ) -> Generator[Need, Any, PersonalAgent]:
        """The checks after parsing, yielding for what needs I/O: the agent (when `asked` is a
        `NeedAgent`; else it is the registry's answer), discovery, keys."""
        try:
            agent: _Agent = (yield asked) if isinstance(asked, NeedAgent) else asked
            discovered = False
            if agent is None and self.open_mode:
                jwks_uri: str | None = yield NeedDiscovery(issuer)
                if jwks_uri is not None:
                    agent = RegisteredAgent(issuer=issuer, jwks_uri=jwks_uri)
                    discovered = True
            if agent is None:
                raise AuthenticationFailed("unknown_issuer")
            if not agent.enabled:
                raise AuthenticationFailed("disabled_issuer")
            candidates = keys_at_hand(self.keys, agent, jws)
            if candidates is None:
                assert agent.jwks_uri is not None
                candidates = yield NeedKeys(agent.jwks_uri, jws.kid, jws.alg, not discovered)
            caller = self._conclude(jws, claims, agent, candidates, key)
            if discovered:
                # An issuer that verifies: fresh issuers must not push its discovery out.
                self.discovery.mark_verified(issuer)
            return caller
        except AuthenticationFailed as exc:
            exc.issuer = issuer  # what the token claims: for the logs, never trusted
            raise

    def _recheck(self, token: str, entry: _Entry, agent: RegisteredAgent | None) -> PersonalAgent:
        """A token verified before: only what can have changed since is checked again.

        Plain code, not part of the generator flow: a cache hit is the hot path.
        """
        _until, issuer, sub, audience, exp, nbf = entry
        if agent is None and self.open_mode:
            agent = RegisteredAgent(issuer=issuer, jwks=NO_KEYS)
        if agent is None:
            raise AuthenticationFailed("unknown_issuer")
        if not agent.enabled:
            raise AuthenticationFailed("disabled_issuer")
        if (agent.audience or self.audience) != audience:
            raise AuthenticationFailed("bad_audience")
        now = self._clock()  # after the agent lookup, which may have waited on a store
        if exp <= now - self.leeway:
            raise AuthenticationFailed("expired")
        if nbf is not None and nbf > now + self.leeway:
            raise AuthenticationFailed("not_yet_valid")
        # Positional (issuer, sub, name, claims, audience): 0.3 µs less than keywords.
        return PersonalAgent(issuer, sub, agent.name, LazyClaims(token), audience)

    def _conclude(
        self, jws: JWS, claims: dict[str, Any], agent: RegisteredAgent, keys: Keys, key: bytes
    ) -> PersonalAgent:
        """The signature (`unknown_kid` when no key fits), then the claim rules; the caller
        when they pass, its token cached under `key`."""
        if not keys:  # inline keys: a JWKS fetched for this token refuses a misfit itself
            raise AuthenticationFailed("unknown_kid")
        if not verify_with_any(jws, keys):
            raise AuthenticationFailed("bad_signature")
        now = self._clock()
        audience = agent.audience or self.audience
        # One string, compared exactly; an array is refused even if it contains the audience.
        aud = claims.get("aud")
        if type(aud) is not str or aud != audience:
            raise AuthenticationFailed("bad_audience")
        sub = claims.get("sub")
        # `sub` keys conversations: it must be text a store can keep.
        if not isinstance(sub, str) or not sub or not is_storable_text(sub):
            raise AuthenticationFailed("bad_claims", "sub missing or not a non-empty string")
        iat = _number(claims, "iat")
        exp = _number(claims, "exp")
        if exp <= now - self.leeway:
            raise AuthenticationFailed("expired")
        if exp - iat > self.max_lifetime:
            raise AuthenticationFailed("lifetime_too_long")
        if iat > now + self.leeway:
            raise AuthenticationFailed("iat_in_future")
        nbf = _number(claims, "nbf") if "nbf" in claims else None
        if nbf is not None and nbf > now + self.leeway:
            raise AuthenticationFailed("not_yet_valid")
        # Positional, as in `_recheck`; the claims were freshly parsed for this token: no copy.
        caller = PersonalAgent(agent.issuer, sub, agent.name, MappingProxyType(claims), audience)
        entry = (agent.issuer, sub, audience, exp, nbf)
        self.cache.put(key, entry, expires_at=exp + self.leeway, now=now)
        if agent.jwks_uri is not None:
            # Keys in use: key sets that never verified anything must not push them out.
            self.keys.mark_verified(agent.jwks_uri)
        return caller

    # -- the two drivers -------------------------------------------------------------------

    def verify(self, authorization: str | None, *, brand: str | None = None) -> PersonalAgent:
        """Verify an `Authorization` header value (blocking when keys must be fetched).

        Returns the `PersonalAgent`; raises `AuthenticationFailed` with a stable `reason` (and
        the `issuer` the token named, when it named one). `brand` only names the Brand in the
        log line of a refusal.
        """
        try:
            token, key, entry = self._begin(authorization)
            if entry is not None:
                return self._recheck(token, entry, self.registry.lookup(entry[1]))
            started = self._start(token, key)
            if isinstance(started, PersonalAgent):
                return started
            return drive(started, functools.partial(answer, self))
        except AuthenticationFailed as exc:
            log_refusal(exc, brand)
            raise

    async def averify(
        self, authorization: str | None, *, brand: str | None = None
    ) -> PersonalAgent:
        """Async `verify`: a cached key never leaves the event loop; fetches run in threads."""
        try:
            token, key, entry = self._begin(authorization)
            if entry is None:
                started = self._start(token, key)
                if isinstance(started, PersonalAgent):
                    return started
                return await adrive(started, functools.partial(aanswer, self))
            return self._recheck(token, entry, await alookup(self, entry[1]))
        except AuthenticationFailed as exc:
            log_refusal(exc, brand)
            raise

    def cached(
        self, authorization: str | None, *, brand: str | None = None
    ) -> PersonalAgent | None:
        """`averify` without a coroutine when it would not wait (a cached token, a registry
        that never blocks); None when it would. Raises and logs as `averify`."""
        if self.registry.may_block:
            return None
        try:
            token, _key, entry = self._begin(authorization)
            if entry is None:
                return None
            return self._recheck(token, entry, self.registry.lookup(entry[1]))
        except AuthenticationFailed as exc:
            log_refusal(exc, brand)
            raise

    def provisional(
        self, authorization: str | None, *, brand: str | None = None
    ) -> tuple[PersonalAgent, Callable[[], None]] | None:
        """A cached token of a configured agent, checked without reading the store: the caller,
        and `confirm`, which reads the agent's runtime switch (blocking) and raises
        `AuthenticationFailed` if it was turned off.

        None when this takes no shortcut (the registry never blocks, the token is not cached,
        the agent was added at runtime or is configured disabled, or a check fails): then
        `averify` decides. An async driver that holds the caller back from every effect until
        `confirm` has passed can fold that store read into the request's one worker-thread
        hop, instead of a hop of its own. For a configured agent only the switch can differ
        from the configuration, so the caller is exactly what `averify` returns.
        """
        if not self.registry.may_block:
            return None
        try:
            token, _key, entry = self._begin(authorization)
            if entry is None:
                return None
            issuer = entry[1]
            agent = self.registry.configured(issuer)
            if agent is None or not agent.enabled:
                return None
            caller = self._recheck(token, entry, agent)
        except AuthenticationFailed:
            return None  # averify refuses it again, and logs the refusal
        return caller, lambda: self._confirm(issuer, brand)

    def _confirm(self, issuer: str, brand: str | None) -> None:
        """The runtime switch of a configured agent, read from the registry (blocking)."""
        agent = self.registry.lookup(issuer)
        if agent is not None and agent.enabled:
            return
        exc = AuthenticationFailed("unknown_issuer" if agent is None else "disabled_issuer")
        exc.issuer = issuer
        log_refusal(exc, brand)
        raise exc


#: Refusals that point at a misconfiguration (of the Provider or of the agent): WARNING, so
#: they show under uvicorn's, Django's and Flask's default logging. Others are routine.
MISCONFIGURATION_REASONS = frozenset({"unknown_issuer", "bad_audience", "jwks_unavailable"})


def log_refusal(exc: AuthenticationFailed, brand: str | None = None) -> None:
    """Log a refused personal agent: the reason code, issuer and Brand, which credential was
    refused (`identity_jwt`, `delegation_token`: the same reason code can be either's), and
    a delegation refusal's detail, never the token."""
    level = logging.WARNING if exc.reason in MISCONFIGURATION_REASONS else logging.INFO
    if not logger.isEnabledFor(level):
        return
    line = "personal agent refused: reason=%s issuer=%s brand=%s credential=%s"
    args: list[object] = [
        exc.reason,
        loggable(exc.issuer or "-"),  # the unverified token's: the caller wrote it
        loggable(brand or "-"),
        exc.credential,
    ]
    if exc.credential == "delegation_token" and exc.detail:
        # Our own words, but they may quote the token's header (its `kid`).
        line += " detail=%r"
        args.append(loggable(exc.detail))
    logger.log(level, line, *args)


__all__ = [
    "IDENTITY_ALGORITHMS",
    "MISCONFIGURATION_REASONS",
    "AgentOverrides",
    "AgentRegistry",
    "AgentResolver",
    "IdentityVerifier",
    "LazyClaims",
    "MemoryAgentOverrides",
    "PersonalAgent",
    "RegisteredAgent",
    "RuntimeAgent",
    "RuntimeAgents",
    "actor_id_for",
    "log_refusal",
    "parse_bearer",
]
