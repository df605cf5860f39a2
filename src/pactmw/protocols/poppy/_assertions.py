"""Client assertions (§4.1, RFC 7523 `private_key_jwt`) and Session assertions (§4.2).

Both are JWTs a personal agent signs with a key of its verified `jwks_uri` (never one the
token embeds, GUIDE-jwt-03). The verification is written once, as a flow that yields what
it needs (the agent's metadata and keys, one use of the `jti`), driven with blocking calls
by `verify_client`/`verify_session` and with awaits by their `a` twins. Checks, in order:

1. header: `alg` ES256 or RS256 (never `none`, never HMAC: GUIDE-jwt-02), `typ` absent or
   `JWT` (a `poppy-browser+jwt` browser assertion or a `dpop+jwt` proof is refused);
2. the key: chosen by `kid` and `alg` from the client's verified metadata (PAP-4.1-02/03);
3. the signature;
4. claims: `iss` = the client_id; `sub` = the client_id (client assertion) or a User ID
   (Session assertion); `aud` = the Company's `auth.issuer`, one string, character for
   character (PAP-4.1-05, PAP-4.2-07; an array or the token endpoint URL is refused);
   numeric `iat` and `exp` with `0 < exp - iat <= 300` (PAP-4.2-08); not expired and not
   issued in the future, with 30 s of skew (GUIDE-jwt-04); `jti` of 16-256 characters;
5. the `jti` used once per client_id (and kind) through `exp` + skew (PAP-4.2-09, GUIDE-jwt-05).

A client assertion that fails is `401 invalid_client`; a Session assertion `400
invalid_grant`. The reason goes to the log (`PoppyError.detail`), never to the caller.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any

from attrs import field, frozen

from pactmw.core.client_metadata import ClientMetadata, ClientMetadataCache, ClientMetadataError
from pactmw.core.drive import adrive, drive
from pactmw.core.encoding import is_storable_text, json_number, loggable
from pactmw.core.errors import JoseError, KeyUnavailable
from pactmw.core.jose import HeaderCache, parse_compact, verify_with_any
from pactmw.core.jwk import PublicJWK
from pactmw.core.replay import ReplayMemory, remember_until
from pactmw.protocols.poppy._errors import PoppyError

logger = logging.getLogger("pactmw.poppy")

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_ALGS = frozenset({"ES256", "RS256"})
MAX_ASSERTION_LIFETIME = 300.0
ASSERTION_SKEW = 30.0
MIN_JTI_LENGTH = 16
MAX_JTI_LENGTH = 256
MAX_USER_ID_LENGTH = 256
CLIENT = "client"
SESSION = "session"


@frozen
class VerifiedAssertion:
    """An assertion that passed every check, its `jti` now spent."""

    kind: str  # CLIENT or SESSION
    client_id: str
    subject: str  # the client_id again, or the User ID of a Session assertion
    jti: str
    issued_at: float
    expires_at: float
    metadata: ClientMetadata = field(repr=False)
    claims: Mapping[str, Any] = field(repr=False)


@frozen
class _NeedClient:
    client_id: str
    kid: str | None
    alg: str


@frozen
class _NeedFirstUse:
    key: str
    now: float
    expires_at: float


_Need = _NeedClient | _NeedFirstUse


def _refusal(kind: str, detail: str) -> PoppyError:
    if kind == CLIENT:
        return PoppyError(401, "invalid_client", detail)
    return PoppyError(400, "invalid_grant", detail)


def _replay_key(kind: str, client_id: str, jti: str) -> str:
    raw = f"{kind}:{client_id}:{jti}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def check_assertion_claims(
    claims: Mapping[str, Any],
    *,
    kind: str,
    client_id: str,
    issuer: str,
    now: float,
    skew: float = ASSERTION_SKEW,
    max_lifetime: float = MAX_ASSERTION_LIFETIME,
) -> tuple[str, str, float, float]:
    """Step 4 of the module docstring, pure: (subject, jti, iat, exp), or a `PoppyError`."""
    if claims.get("iss") != client_id:
        raise _refusal(kind, "iss is not the client_id")
    subject = claims.get("sub")
    if kind == CLIENT:
        if subject != client_id:
            raise _refusal(kind, "sub is not the client_id")
    elif (
        not isinstance(subject, str)
        or not subject
        or len(subject) > MAX_USER_ID_LENGTH
        or not is_storable_text(subject)
    ):
        raise _refusal(kind, "sub is not a User ID")
    assert isinstance(subject, str)
    aud = claims.get("aud")
    # One string, exactly the issuer: an array, or the token endpoint URL, is refused.
    if not isinstance(aud, str) or aud != issuer:
        raise _refusal(kind, "aud is not the issuer")
    iat, exp = json_number(claims.get("iat")), json_number(claims.get("exp"))
    if iat is None or exp is None:
        raise _refusal(kind, "iat and exp must be numbers")
    if not 0 < exp - iat <= max_lifetime:
        raise _refusal(kind, f"the lifetime must be positive and at most {max_lifetime:g} s")
    if now > exp + skew or iat > now + skew:
        raise _refusal(kind, "the assertion is not valid now")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not MIN_JTI_LENGTH <= len(jti) <= MAX_JTI_LENGTH:
        raise _refusal(kind, f"jti must be a string of {MIN_JTI_LENGTH}-{MAX_JTI_LENGTH} chars")
    return subject, jti, iat, exp


class AssertionVerifier:
    """Verifies one Company's client and Session assertions. Thread-safe; share one.

    `issuer` is the Company's `auth.issuer` (the only accepted `aud`); `clients` fetches
    and caches agents' metadata and keys; `replay` remembers `jti`s (a `StoreReplayMemory`
    when several processes serve the Company); `clock` gives epoch seconds.
    """

    def __init__(
        self,
        *,
        issuer: str,
        clients: ClientMetadataCache,
        replay: ReplayMemory,
        clock: Callable[[], float] = time.time,
        skew: float = ASSERTION_SKEW,
        max_lifetime: float = MAX_ASSERTION_LIFETIME,
    ) -> None:
        if not issuer:
            raise ValueError("issuer must be a non-empty string")
        self.issuer = issuer
        self.clients = clients
        self.replay = replay
        self.skew = skew
        self.max_lifetime = max_lifetime
        self._clock = clock
        self._headers = HeaderCache()

    # -- the one flow --------------------------------------------------------------------

    def _flow(
        self, kind: str, compact: str, client_id: str
    ) -> Generator[_Need, Any, VerifiedAssertion]:
        try:
            jws = parse_compact(compact, allowed_algs=ASSERTION_ALGS, header_cache=self._headers)
            claims = jws.claims()
        except JoseError as exc:
            raise _refusal(kind, f"not an acceptable JWS: {exc.code}") from exc
        if jws.header.get("typ") not in (None, "JWT"):
            raise _refusal(kind, "typ must be absent or JWT")
        try:
            answer: tuple[ClientMetadata, tuple[PublicJWK, ...]] = yield _NeedClient(
                client_id, jws.kid, jws.alg
            )
        except (ClientMetadataError, KeyUnavailable) as exc:
            raise _refusal(kind, f"no key for the client: {exc.code}") from exc
        metadata, candidates = answer
        if not verify_with_any(jws, candidates):
            raise _refusal(kind, "the signature does not verify")
        now = self._clock()
        subject, jti, iat, exp = check_assertion_claims(
            claims,
            kind=kind,
            client_id=client_id,
            issuer=self.issuer,
            now=now,
            skew=self.skew,
            max_lifetime=self.max_lifetime,
        )
        key = _replay_key(kind, client_id, jti)
        first: bool = yield _NeedFirstUse(key, now, remember_until(exp + self.skew))
        if not first:
            raise _refusal(kind, "the jti was used before")
        # This agent's document and keys are in use: made-up client_ids must not push them out.
        self.clients.mark_verified(client_id)
        return VerifiedAssertion(
            kind=kind,
            client_id=client_id,
            subject=subject,
            jti=jti,
            issued_at=iat,
            expires_at=exp,
            metadata=metadata,
            claims=claims,
        )

    def _answer(self, need: _Need) -> Any:
        if isinstance(need, _NeedClient):
            return self.clients.get_keys(need.client_id, need.kid, need.alg)
        return self.replay.first_use(need.key, now=need.now, expires_at=need.expires_at)

    async def _aanswer(self, need: _Need) -> Any:
        if isinstance(need, _NeedClient):
            return await self.clients.aget_keys(need.client_id, need.kid, need.alg)
        if self.replay.may_block:
            return await asyncio.to_thread(
                self.replay.first_use, need.key, now=need.now, expires_at=need.expires_at
            )
        return self.replay.first_use(need.key, now=need.now, expires_at=need.expires_at)

    # -- the entry points ----------------------------------------------------------------

    @staticmethod
    def _client_form(form: Mapping[str, str]) -> tuple[str, str]:
        """(client_id, assertion) of a form authenticating with `private_key_jwt`."""
        assertion_type = form.get("client_assertion_type")
        assertion = form.get("client_assertion")
        if assertion_type != CLIENT_ASSERTION_TYPE or not assertion:
            raise _refusal(CLIENT, "a jwt-bearer client_assertion is required")
        client_id = form.get("client_id")
        if not client_id:
            # RFC 7521 §4.2: client_id may be left out; the assertion's iss names the client
            # (unverified here: the signature is checked with that client's keys).
            try:
                client_id = (
                    parse_compact(assertion, allowed_algs=ASSERTION_ALGS).claims().get("iss")
                )
            except JoseError as exc:
                raise _refusal(CLIENT, "not an acceptable JWS") from exc
            if not isinstance(client_id, str) or not client_id:
                raise _refusal(CLIENT, "no client_id")
        return client_id, assertion

    def _run(self, kind: str, assertion: str, client_id: str) -> VerifiedAssertion:
        try:
            return drive(self._flow(kind, assertion, client_id), self._answer)
        except PoppyError as exc:
            _log(exc, client_id)
            raise

    async def _arun(self, kind: str, assertion: str, client_id: str) -> VerifiedAssertion:
        try:
            return await adrive(self._flow(kind, assertion, client_id), self._aanswer)
        except PoppyError as exc:
            _log(exc, client_id)
            raise

    def verify_client(self, form: Mapping[str, str]) -> VerifiedAssertion:
        """The client assertion of a token, device authorization or revocation request's
        form (`client_id`, `client_assertion_type`, `client_assertion`); blocking."""
        client_id, assertion = self._client_form(form)
        return self._run(CLIENT, assertion, client_id)

    async def averify_client(self, form: Mapping[str, str]) -> VerifiedAssertion:
        """Async `verify_client`."""
        client_id, assertion = self._client_form(form)
        return await self._arun(CLIENT, assertion, client_id)

    def verify_session(self, assertion: str, *, client_id: str) -> VerifiedAssertion:
        """The Session assertion of a jwt-bearer token request by the authenticated
        `client_id`; blocking."""
        return self._run(SESSION, assertion, client_id)

    async def averify_session(self, assertion: str, *, client_id: str) -> VerifiedAssertion:
        """Async `verify_session`."""
        return await self._arun(SESSION, assertion, client_id)


def _log(exc: PoppyError, client_id: str | None) -> None:
    # The reason and the client, never the assertion (GUIDE-secrets-01); both quote what the
    # caller sent, so `loggable`.
    logger.info(
        "assertion refused: error=%s client_id=%s reason=%r",
        exc.error,
        loggable(client_id),
        loggable(exc.detail),
    )


__all__ = [
    "ASSERTION_ALGS",
    "ASSERTION_SKEW",
    "CLIENT",
    "CLIENT_ASSERTION_TYPE",
    "MAX_ASSERTION_LIFETIME",
    "MAX_JTI_LENGTH",
    "MAX_USER_ID_LENGTH",
    "MIN_JTI_LENGTH",
    "SESSION",
    "AssertionVerifier",
    "VerifiedAssertion",
    "check_assertion_claims",
]
