"""Key material from the broker, and proof-replay memory: the only I/O of a verifier.

`BrokerKeys` answers for one trusted broker: its JWKS (through `JwksCache`: an unknown `kid`
triggers at most one refetch per 60 s, §14; while no keys could be fetched yet, a fetch is
tried again at most once a second by default), agent DID documents (cached 10 minutes; a 410
says the agent was revoked) and the online-verification POST. `StaticBrokerKeys` answers the
same questions from values, never touching the network (tests, air-gapped deployments).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from pactmw.core import _fork
from pactmw.core.encoding import json_dumps, json_loads
from pactmw.core.errors import FetchError, KeyUnavailable, MalformedInput
from pactmw.core.fetch import FetchPolicy
from pactmw.core.jwk import KeySet, PublicJWK, parse_jwks
from pactmw.core.keys import CachePolicy, JwksCache
from pactmw.protocols.parafe._constants import (
    DEFAULT_BROKER_URL,
    DID_DOCUMENT_TTL,
    JWKS_REFETCH_COOLDOWN,
    JWKS_RETRY_WITHOUT_KEYS,
    PROOF_REPLAY_WINDOW,
)
from pactmw.protocols.parafe._did import DidDocument, DidUnavailable, did_path
from pactmw.protocols.parafe._http import HttpAnswer, http_request

if TYPE_CHECKING:
    from pactmw.core.keys import _Entry

JWKS_PATH = "/.well-known/jwks.json"


class KeySource(Protocol):
    """Where a verifier gets broker keys, DID documents and online answers (sync and async).

    `broker_keys` raises `KeyUnavailable`; `did_document` raises `DidUnavailable`; `post`
    raises `FetchError` when the broker cannot be reached (any HTTP answer is returned).
    """

    @property
    def broker_url(self) -> str: ...

    def broker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]: ...

    async def abroker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]: ...

    def did_document(self, agent_id: str) -> DidDocument: ...

    async def adid_document(self, agent_id: str) -> DidDocument: ...

    def post(self, path: str, body: Mapping[str, Any]) -> HttpAnswer: ...

    async def apost(self, path: str, body: Mapping[str, Any]) -> HttpAnswer: ...


def broker_key_set(document: Any) -> KeySet:
    """The broker's keys from its JWKS document (object, or JSON text/bytes).

    Keys are selected by pactmw's one JWKS rule (`parse_jwks`), which agrees with jose's on
    every key the broker publishes (§4 step 9: `use`, `key_ops` when it is an array, `crv`);
    `status` is ignored (§12 item 12). Raises `MalformedInput` when the document is not a JWKS.
    """
    if isinstance(document, KeySet):
        return document
    return parse_jwks(document)


def trusted_broker_url(
    url: str, policy: FetchPolicy, allowed_by: str = "allow_http_on_loopback"
) -> str:
    """Check a configured broker URL: https, or http to loopback in development (when the
    fetch policy allows loopback). Trailing slashes are dropped. Raises `ValueError`, which
    names `allowed_by`, the setting that allows loopback where the URL was configured."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"invalid broker URL {url!r}") from exc
    if not host or parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"broker URL {url!r} must be a plain https URL")
    if parts.scheme == "http":
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not (loopback and policy.allow_http_on_loopback):
            raise ValueError(
                f"a broker URL must be https (http only to loopback, with {allowed_by})"
            )
    elif parts.scheme != "https":
        raise ValueError(f"broker URL {url!r} must be https")
    return url.rstrip("/")


def _did_from_answer(answer: HttpAnswer, url: str) -> DidDocument:
    try:
        body = json_loads(answer.body)
    except MalformedInput:
        body = None
    # Any 2xx is the document, as the reference's `res.ok` takes it (a2a-extension for proofs,
    # @getparafe/verify for receipts); 410 and other statuses are the caller's to read.
    if not 200 <= answer.status < 300:
        raise DidUnavailable(f"{url} answered {answer.status}", status=answer.status, body=body)
    if not isinstance(body, dict):
        raise DidUnavailable(f"{url} is not a JSON object")
    return DidDocument(document=body)


class _BrokerJwksCache(JwksCache):
    """`JwksCache` that waits only `retry_without_keys` seconds after a failed fetch while it
    holds no keys, instead of the full refetch cooldown.

    The reference forgets a failed fetch and fetches again on the next call (§14). With no keys
    every token is refused anyway, so waiting 60 s would refuse everything for a minute after
    one failed fetch at start-up. Once keys are held, `CachePolicy.refetch_cooldown` applies
    (unknown kids, and failures after an expiry, which keep serving the known keys).
    """

    def __init__(self, *args: Any, retry_without_keys: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_without_keys = min(retry_without_keys, self.cache_policy.refetch_cooldown)

    def _decide(self, entry: _Entry | None, kid: str | None, alg: str, now: float) -> bool:
        if entry is not None and entry.keys is None:
            return now - entry.attempted_at >= self.retry_without_keys
        return super()._decide(entry, kid, alg, now)


class BrokerKeys:
    """Keys and documents of one broker this agent trusts, cached; share one per broker.

    `broker_url` must be https (http only to loopback when `fetch_policy` allows loopback).
    `clock` is monotonic seconds (injectable for tests). Thread-safe, and usable from any
    number of event loops: fetches run in worker threads.

    The JWKS is fetched on first use and kept by `cache_policy` (by default the broker's
    `Cache-Control` max-age between 60 s and a day, 10 minutes without one). A `kid` it does not
    hold triggers one refetch, at most once per `refetch_cooldown` (60 s by default, the
    reference's `minRefetchIntervalMs`); until then such tokens are refused. A failed fetch
    keeps the keys held before (for up to `cache_policy.stale_if_error`). While no keys have
    been fetched yet (the first fetch failed), the next call fetches again once
    `retry_without_keys` seconds (default 1 s, at most the cooldown) have passed since the last
    attempt: the reference retries on the very next call; the one-second floor keeps a broker
    that is down from being asked once per request. Concurrent callers share one fetch.
    """

    def __init__(
        self,
        broker_url: str = DEFAULT_BROKER_URL,
        *,
        fetch_policy: FetchPolicy | None = None,
        cache_policy: CachePolicy | None = None,
        did_ttl: float = DID_DOCUMENT_TTL,
        max_documents: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        retry_without_keys: float = JWKS_RETRY_WITHOUT_KEYS,
    ) -> None:
        self.fetch_policy = fetch_policy or FetchPolicy()
        self._broker_url = trusted_broker_url(broker_url, self.fetch_policy)
        self.jwks_uri = self._broker_url + JWKS_PATH
        self.jwks: JwksCache = _BrokerJwksCache(
            self.fetch_policy,
            cache_policy or CachePolicy(refetch_cooldown=JWKS_REFETCH_COOLDOWN),
            clock=clock,
            retry_without_keys=retry_without_keys,
        )
        self.did_ttl = did_ttl
        self._max_documents = max_documents
        self._clock = clock
        self._lock = threading.Lock()
        self._documents: OrderedDict[str, tuple[DidDocument, float]] = OrderedDict()
        _fork.fresh_lock_in_child(self)  # a lock no thread of a forked child holds

    @property
    def broker_url(self) -> str:
        return self._broker_url

    # -- broker JWKS ---------------------------------------------------------------------

    def broker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        return self.jwks.get_keys(self.jwks_uri, kid, alg)

    async def abroker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        return await self.jwks.aget_keys(self.jwks_uri, kid, alg)

    # -- DID documents -------------------------------------------------------------------

    def did_url(self, agent_id: str) -> str:
        return self._broker_url + did_path(agent_id)

    def _cached(self, agent_id: str) -> DidDocument | None:
        with self._lock:
            hit = self._documents.get(agent_id)
            if hit is None:
                return None
            if self._clock() >= hit[1]:
                del self._documents[agent_id]
                return None
            self._documents.move_to_end(agent_id)
            return hit[0]

    def _store(self, agent_id: str, document: DidDocument) -> None:
        with self._lock:
            self._documents[agent_id] = (document, self._clock() + self.did_ttl)
            self._documents.move_to_end(agent_id)
            while len(self._documents) > self._max_documents:
                self._documents.popitem(last=False)

    def _fetch_document(self, agent_id: str) -> DidDocument:
        url = self.did_url(agent_id)
        try:
            answer = http_request("GET", url, self.fetch_policy)
        except FetchError as exc:
            raise DidUnavailable(str(exc)) from exc
        document = _did_from_answer(answer, url)
        # Only good answers are kept: a failure is asked again next time (the reference's way).
        self._store(agent_id, document)
        return document

    def did_document(self, agent_id: str) -> DidDocument:
        """The agent's DID document (cached `did_ttl` seconds); `DidUnavailable` otherwise."""
        return self._cached(agent_id) or self._fetch_document(agent_id)

    async def adid_document(self, agent_id: str) -> DidDocument:
        cached = self._cached(agent_id)
        if cached is not None:
            return cached
        return await asyncio.to_thread(self._fetch_document, agent_id)

    # -- online verification -------------------------------------------------------------

    def post(self, path: str, body: Mapping[str, Any]) -> HttpAnswer:
        """POST JSON to the broker (bounded by the fetch policy's timeout and size cap)."""
        return http_request(
            "POST", self._broker_url + path, self.fetch_policy, body=json_dumps(dict(body))
        )

    async def apost(self, path: str, body: Mapping[str, Any]) -> HttpAnswer:
        return await asyncio.to_thread(self.post, path, body)


class StaticBrokerKeys:
    """Broker keys and DID documents given as values; nothing is fetched.

    `jwks` is the broker's JWKS (document or `KeySet`); `did_documents` maps agent ids to
    their DID documents; `revoked` maps agent ids to the body of their 410 answer. Online
    verification is not available (`post` raises `FetchError`).
    """

    def __init__(
        self,
        jwks: Any,
        *,
        did_documents: Mapping[str, Any] | None = None,
        revoked: Mapping[str, Any] | None = None,
        broker_url: str = DEFAULT_BROKER_URL,
    ) -> None:
        self.keys = broker_key_set(jwks)
        self._documents = dict(did_documents or {})
        self._revoked = dict(revoked or {})
        self._broker_url = broker_url.rstrip("/")

    @property
    def broker_url(self) -> str:
        return self._broker_url

    def broker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        candidates = self.keys.candidates(kid, alg)
        if not candidates:
            raise KeyUnavailable("unknown_kid", "no key fits the token's kid and alg")
        return candidates

    async def abroker_keys(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        return self.broker_keys(kid, alg)

    def did_document(self, agent_id: str) -> DidDocument:
        if agent_id in self._revoked:
            raise DidUnavailable("agent revoked", status=410, body=self._revoked[agent_id])
        document = self._documents.get(agent_id)
        if isinstance(document, DidDocument):
            return document
        if not isinstance(document, Mapping):
            raise DidUnavailable(f"no DID document for {agent_id}", status=404)
        return DidDocument(document=document)

    async def adid_document(self, agent_id: str) -> DidDocument:
        return self.did_document(agent_id)

    def post(self, path: str, body: Mapping[str, Any]) -> HttpAnswer:
        raise FetchError("static broker keys cannot verify online")

    async def apost(self, path: str, body: Mapping[str, Any]) -> HttpAnswer:
        return self.post(path, body)


# -- proof replay memory (§6 step 10, §14) ---------------------------------------------------


def replay_key(initiator: str, jti: str) -> str:
    """The replay-memory key of a proof: a digest of `"<initiator>:<jti>"` (fixed length, and
    safe for any store whatever the attacker-chosen `jti` holds)."""
    raw = f"{initiator}:{jti}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


REPLAY_WINDOW = PROOF_REPLAY_WINDOW


__all__ = [
    "JWKS_PATH",
    "REPLAY_WINDOW",
    "BrokerKeys",
    "KeySource",
    "StaticBrokerKeys",
    "broker_key_set",
    "replay_key",
    "trusted_broker_url",
]
