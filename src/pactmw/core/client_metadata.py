"""Client metadata documents: a personal agent identified by the HTTPS URL of its metadata.

A `client_id` that is a URL (the OAuth "Client ID Metadata Document" pattern; Poppy §4.1)
names a JSON document the agent serves there: its name, its `jwks_uri`, its `redirect_uris`.
`ClientMetadataCache` fetches it with the same SSRF-safe, bounded fetcher as JWKS and checks
what makes the document the agent's own (Poppy ledger PAP-4.1-02/03, PAP-3-07):

- the document is fetched from `client_id` itself, https only, and no redirect is followed
  (a redirect would let another host speak for the URL);
- it is JSON (`application/json` or a `+json` type), strict (duplicate members refused),
  at most the policy's `max_bytes`;
- its `client_id` equals the URL fetched, character for character;
- its `client_name` is a label the pages show: no bidirectional controls (U+202A-U+202E,
  U+2066-U+2069), which could reorder the sentence around it (`bidi_control_in`);
- `jwks_uri` and every `redirect_uris` entry are https URLs on the same host as `client_id`
  (the SDK compares the host name, not the port: so do we); `logo_uri`, when given, is https.

Unknown members are kept (`document`), never refused (PAP-3.3-03). Answers are cached by
their `Cache-Control` within `CachePolicy` bounds (GUIDE-fetch-04); a failure is remembered
for `failure_ttl` seconds so a flood of requests naming a broken `client_id` makes one fetch.
A refetch that gets no answer (unreachable, timed out, refused address) or a 5xx, 408 or 429
keeps the document verified before, as `JwksCache` keeps keys, for at most the policy's
`stale_if_error` after it was last verified; any other answer (another status, a redirect,
a document that no longer checks) replaces it at once.
The agent's keys then come from `JwksCache` for the verified `jwks_uri` only (GUIDE-jwt-03).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from attrs import field, frozen

from pactmw.core.encoding import bidi_control_in, json_loads, loggable
from pactmw.core.errors import FetchError, MalformedInput, PactmwError
from pactmw.core.fetch import FetchPolicy, http_get
from pactmw.core.jwk import PublicJWK
from pactmw.core.keys import CachePolicy, DocumentCache, Fetcher, JwksCache

logger = logging.getLogger("pactmw.client_metadata")


class ClientMetadataError(PactmwError):
    """A client metadata document could not be fetched or is not the agent's own.

    `code` is stable and log-safe: `invalid_client_id`, `unfetchable`, `invalid_content_type`,
    `invalid_client_metadata` or `client_id_mismatch`.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@frozen
class ClientMetadata:
    """A verified client metadata document. `document` is all of it, unknown members too."""

    client_id: str
    client_name: str
    jwks_uri: str
    redirect_uris: tuple[str, ...] = ()
    logo_uri: str | None = None
    token_endpoint_auth_method: str = "private_key_jwt"  # noqa: S105 - a method name
    extensions: Mapping[str, Any] = field(factory=lambda: MappingProxyType({}))
    document: Mapping[str, Any] = field(factory=lambda: MappingProxyType({}), repr=False)


def _https_host(url: str) -> str | None:
    """The host of an https URL without credentials or fragment, or None."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return None
    if parts.scheme != "https" or not host or parts.username is not None or parts.fragment:
        return None
    if parts.password is not None:
        return None
    return host


def check_client_id(client_id: str) -> str:
    """The host of a `client_id` that may name a metadata document; `invalid_client_id` else."""
    host = _https_host(client_id) if isinstance(client_id, str) else None
    if host is None:
        raise ClientMetadataError(
            "invalid_client_id", "client_id must be an https URL without credentials or fragment"
        )
    return host


def _same_host_url(name: str, value: Any, host: str) -> str:
    if not isinstance(value, str) or _https_host(value) != host:
        raise ClientMetadataError(
            "invalid_client_metadata", f"{name} must be an https URL on the client_id's host"
        )
    return value


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def parse_client_metadata(client_id: str, body: bytes, content_type: str | None) -> ClientMetadata:
    """Check a document fetched from `client_id` (see the module docstring). Pure."""
    host = check_client_id(client_id)
    if not _is_json(content_type):
        raise ClientMetadataError("invalid_content_type", "client metadata must be JSON")
    try:
        document = json_loads(body)
    except MalformedInput as exc:
        raise ClientMetadataError("invalid_client_metadata", f"not strict JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ClientMetadataError("invalid_client_metadata", "client metadata must be an object")
    if document.get("client_id") != client_id:
        raise ClientMetadataError(
            "client_id_mismatch", "client_id does not equal the URL the document came from"
        )
    name = document.get("client_name")
    if not isinstance(name, str) or not name.strip():
        raise ClientMetadataError(
            "invalid_client_metadata", "client_name must be a non-empty string"
        )
    control = bidi_control_in(name)
    if control is not None:
        raise ClientMetadataError(
            "invalid_client_metadata",
            f"client_name must not hold bidirectional controls ({control})",
        )
    jwks_uri = _same_host_url("jwks_uri", document.get("jwks_uri"), host)
    redirects = document.get("redirect_uris", [])
    if not isinstance(redirects, list):
        raise ClientMetadataError("invalid_client_metadata", "redirect_uris must be an array")
    redirect_uris = tuple(_same_host_url("redirect_uris", r, host) for r in redirects)
    logo = document.get("logo_uri")
    if logo is not None and (not isinstance(logo, str) or _https_host(logo) is None):
        raise ClientMetadataError("invalid_client_metadata", "logo_uri must be an https URL")
    method = document.get("token_endpoint_auth_method", "private_key_jwt")
    if method != "private_key_jwt":
        raise ClientMetadataError(
            "invalid_client_metadata", "token_endpoint_auth_method must be private_key_jwt"
        )
    extensions = document.get("extensions", {})
    if not isinstance(extensions, dict):
        raise ClientMetadataError("invalid_client_metadata", "extensions must be an object")
    return ClientMetadata(
        client_id=client_id,
        client_name=name,
        jwks_uri=jwks_uri,
        redirect_uris=redirect_uris,
        logo_uri=logo,
        token_endpoint_auth_method=method,
        extensions=MappingProxyType(extensions),
        document=MappingProxyType(document),
    )


@frozen
class _Answer:
    metadata: ClientMetadata | None
    error: ClientMetadataError | None
    expires_at: float
    verified_at: float = 0.0  # when `metadata` was last fetched and checked


def _no_word_from_the_agent(exc: FetchError) -> bool:
    """Whether a failed fetch says nothing about the document: no answer at all, or one that
    says "try later" (5xx, 408, 429). A 4xx, a redirect or an oversized 200 is the host's
    answer about its document, and that answer wins."""
    status = exc.status
    return status is None or status >= 500 or status in (408, 429)


class ClientMetadataCache(DocumentCache[_Answer]):
    """A bounded cache of verified client metadata, plus the agents' keys through `jwks`.

    Safe to share across threads and event loops; concurrent misses for one `client_id`
    share one fetch. `clock` is monotonic seconds (injectable for tests). Every `client_id`
    (and the `jwks_uri` its document names) is a request's choice: until `mark_verified`, its
    first fetch may be refused while too many such fetches run (`unfetchable`; see
    `SharedFetches`).
    """

    what = "client metadata"
    log = logger
    failure_ttl = 30.0

    def __init__(
        self,
        fetch_policy: FetchPolicy | None = None,
        cache_policy: CachePolicy | None = None,
        *,
        jwks: JwksCache | None = None,
        clock: Callable[[], float] = time.monotonic,
        fetcher: Fetcher = http_get,
    ) -> None:
        super().__init__(fetch_policy, cache_policy, clock=clock, fetcher=fetcher)
        self.jwks = jwks or JwksCache(self.fetch_policy, self.cache_policy, clock=clock)

    def _fetch_document(self, client_id: str, previous: _Answer | None) -> _Answer:
        """Fetch and check (blocking); never raises: a failure is an answer too."""
        now = self._clock()
        try:
            check_client_id(client_id)
            try:
                response = self._fetcher(client_id, self.fetch_policy)
            except FetchError as exc:  # redirects, size, time, addresses: all refused here
                kept = self._keep(client_id, previous, now, exc)
                if kept is not None:
                    return kept
                raise ClientMetadataError("unfetchable", str(exc)) from exc
            metadata = parse_client_metadata(
                client_id, response.body, response.headers.get("content-type")
            )
        except ClientMetadataError as exc:
            logger.warning(
                "client metadata refused: reason=%s client_id=%s error=%r",
                exc.code,
                loggable(client_id),  # any URL a caller names, and what its host answered
                loggable(str(exc)),
            )
            return _Answer(None, exc, now + self.failure_ttl)
        return _Answer(metadata, None, now + self.cache_policy.ttl(response.headers), now)

    def _keep(
        self, client_id: str, previous: _Answer | None, now: float, exc: BaseException
    ) -> _Answer | None:
        """The document verified before, still served after a refetch that failed with `exc`,
        or None when that failure is the new answer.

        Why: an agent's host failing for a moment (a 500, a timeout, a restart) must not fail
        every request of that agent for `failure_ttl`, just as a failing JWKS server does not
        lock out agents whose keys are cached (`JwksCache`, SECURITY.md). Here we deliberately
        differ from the Poppy SDK (`personal_agent_protocol.identity.AgentIdentityClient.
        fetch_metadata`), which drops the document when its cache time is over and remembers
        a failed refetch as a failure for 30 s; the guide (GUIDE-fetch-04) bounds caching but
        says nothing of failures. We keep it as `JwksCache` keeps keys, with the same bound
        (`CachePolicy.serves_stale`): a document the agent did publish, never used longer than
        `stale_if_error` after it was last verified. Only a failure that says nothing about the
        document keeps it; an answer that does (a 4xx, a redirect, an oversized body, a
        document that no longer checks) is what the agent says now, and wins at once.
        """
        if isinstance(exc, FetchError) and not _no_word_from_the_agent(exc):
            return None
        if previous is None or previous.metadata is None:
            return None
        if not self.cache_policy.serves_stale(previous.verified_at, now):
            return None
        logger.warning(
            "client metadata refetch failed: reason=unfetchable client_id=%s error=%r "
            "state=keeping the document verified before",
            loggable(client_id),
            loggable(str(exc)) if isinstance(exc, FetchError) else type(exc).__name__,
        )
        # Ask again after `failure_ttl` (one fetch, not one per request, while the host is
        # down), and never later than the bound, which is checked at that refetch.
        last_use = previous.verified_at + self.cache_policy.stale_if_error
        return _Answer(
            previous.metadata, None, min(now + self.failure_ttl, last_use), previous.verified_at
        )

    def _crashed(self, client_id: str, previous: _Answer | None, exc: BaseException) -> _Answer:
        """What a fetch that raised leaves: the document verified before (see `_keep`), or an
        `unfetchable` answer, kept `failure_ttl`."""
        now = self._clock()
        kept = self._keep(client_id, previous, now, exc)
        if kept is not None:
            return kept
        error = ClientMetadataError("unfetchable", f"unexpected {type(exc).__name__}")
        return _Answer(None, error, now + self.failure_ttl)

    @staticmethod
    def _timed_out(client_id: str) -> ClientMetadataError:
        return ClientMetadataError("unfetchable", f"fetching {client_id} timed out")

    @staticmethod
    def _refused(client_id: str) -> ClientMetadataError:
        return ClientMetadataError(
            "unfetchable", f"too many new clients being fetched: {client_id}"
        )

    def mark_verified(self, client_id: str) -> None:
        """Record that `client_id`'s document and the keys of its `jwks_uri` just verified an
        assertion: both are kept over documents and keys that never did."""
        super().mark_verified(client_id)
        metadata = self.last_verified(client_id)
        if metadata is not None:
            self.jwks.mark_verified(metadata.jwks_uri)

    @staticmethod
    def _result(answer: _Answer | None) -> ClientMetadata:
        assert answer is not None  # `_stale(None)`: a missing answer is always fetched
        if answer.metadata is None:
            assert answer.error is not None
            raise ClientMetadataError(answer.error.code, str(answer.error))
        return answer.metadata

    def last_verified(self, client_id: str) -> ClientMetadata | None:
        """The metadata last verified for `client_id`, even past its cache time, or None;
        never fetches. For display only (a consent page naming the agent that just asked):
        anything that trusts the document calls `get`."""
        answer = self._documents.peek(client_id)
        return None if answer is None else answer.metadata

    def get(self, client_id: str) -> ClientMetadata:
        """The verified metadata of `client_id` (blocking on a miss); `ClientMetadataError`."""
        return self._result(self._documents.get(client_id, self._stale))

    async def aget(self, client_id: str) -> ClientMetadata:
        """Async `get`: a hit never leaves the event loop; a fetch runs in a worker thread."""
        return self._result(await self._documents.aget(client_id, self._stale))

    def get_keys(
        self, client_id: str, kid: str | None, alg: str
    ) -> tuple[ClientMetadata, tuple[PublicJWK, ...]]:
        """The metadata and the keys of its `jwks_uri` that may verify (`kid`, `alg`).

        Raises `ClientMetadataError` or `KeyUnavailable`.
        """
        metadata = self.get(client_id)
        return metadata, self.jwks.get_keys(metadata.jwks_uri, kid, alg, vetted=False)

    async def aget_keys(
        self, client_id: str, kid: str | None, alg: str
    ) -> tuple[ClientMetadata, tuple[PublicJWK, ...]]:
        """Async `get_keys`."""
        metadata = await self.aget(client_id)
        return metadata, await self.jwks.aget_keys(metadata.jwks_uri, kid, alg, vetted=False)


__all__ = [
    "ClientMetadata",
    "ClientMetadataCache",
    "ClientMetadataError",
    "check_client_id",
    "parse_client_metadata",
]
