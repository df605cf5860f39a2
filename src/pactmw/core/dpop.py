"""DPoP proofs (RFC 9449): checking that a request comes from the holder of a key. Pure.

A DPoP proof is a JWS the client signs, per request, with a key whose public half rides in
the proof's own header. `check_dpop_proof` applies RFC 9449 §4.3 in the order Poppy's SDK
does (so that two failures report the same way on both), and returns what the caller must
still do once: mark the proof's `jti` used. `spend_dpop_proof` and `aspend_dpop_proof` do
that through an injected `ReplayMemory` (a Store's `use_once` when several processes serve):

1. exactly one `DPoP` header holding one compact JWS (§4.3 items 1-2; PAP-4.3-19);
2. header `typ` is `dpop+jwt`, `alg` an allowed asymmetric algorithm, `jwk` a public key of
   a type that fits `alg` and carries no private member (§4.3 items 4-6; PAP-4.3-20);
3. the signature verifies with that `jwk` (item 7; PAP-4.3-02);
4. `htm` equals the request method and `htu` the request URL without query and fragment,
   both normalised as RFC 3986 §6.2.2-6.2.3 say (items 8-9; PAP-4.3-04);
5. `iat` within `window` seconds of now, either way (item 11; PAP-4.3-05);
6. `nonce`, when the server requires one (item 10; PAP-4.3-21);
7. with an access token, `ath` is its base64url SHA-256; without one `ath` is refused
   (item 12; PAP-4.3-07: a proof for a token request has no token to hash);
8. the key's RFC 7638 thumbprint equals the token's (or authorization's) bound `jkt`
   (item 12; PAP-4.3-03);
9. `jti` (16 to 256 characters) not seen before for this key while it could be accepted
   (§11.1; PAP-4.3-06): the replay key is a digest of `<thumbprint>:<jti>`.

Every failure is a `DpopError`: `error` is the wire code (`invalid_dpop_proof`, or
`use_dpop_nonce` for a missing or stale nonce), `reason` a log-safe word saying which check.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from attrs import field, frozen

from pactmw.core.encoding import b64url_encode, json_number
from pactmw.core.errors import JoseError, MalformedInput, PactmwError
from pactmw.core.jose import parse_compact, verify_signature
from pactmw.core.jwk import ALGORITHM_KEY_TYPES, PublicJWK, import_public_jwk
from pactmw.core.replay import ReplayMemory, remember_until

DPOP_TYP = "dpop+jwt"
#: ES256 must always be accepted (Poppy PAP-3.2-09); RS256 is what the SDK also allows.
DEFAULT_DPOP_ALGS = frozenset({"ES256", "RS256"})
#: Poppy's acceptance window for `iat` (§4.3, the SDK's 60 s), both ways.
DEFAULT_WINDOW = 60.0
MIN_JTI_LENGTH = 16  # 96+ bits: a shorter jti is guessable, so replay keys could collide
MAX_JTI_LENGTH = 256
INVALID_DPOP_PROOF = "invalid_dpop_proof"
USE_DPOP_NONCE = "use_dpop_nonce"

_DEFAULT_PORTS = {"https": 443, "http": 80}
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class DpopError(PactmwError):
    """A DPoP proof was refused. `error` is the OAuth error code, `reason` which check."""

    def __init__(self, reason: str, message: str, *, error: str = INVALID_DPOP_PROOF) -> None:
        super().__init__(message)
        self.error = error
        self.reason = reason


@frozen
class DpopProof:
    """A proof that passed every check but replay: `replay_key` is what to mark used, until
    `replay_expires_at` (the last instant `iat` is still within the window) included."""

    jti: str
    iat: float
    htm: str
    htu: str
    key: PublicJWK = field(repr=False)
    thumbprint: str
    nonce: str | None
    replay_key: str = field(repr=False)
    replay_expires_at: float
    claims: Mapping[str, Any] = field(repr=False)


def access_token_hash(token: str) -> str:
    """The `ath` of an access token: base64url (no padding) of SHA-256 of its ASCII bytes."""
    return b64url_encode(hashlib.sha256(token.encode("ascii", "surrogateescape")).digest())


def _normalise_percent(text: str) -> str:
    """RFC 3986 §6.2.2.1-2: upper-case escapes; decode those of unreserved characters."""

    def one(match: re.Match[str]) -> str:
        byte = int(match.group(1), 16)
        return chr(byte) if byte in _UNRESERVED else f"%{match.group(1).upper()}"

    return _PERCENT.sub(one, text)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, on an absolute path."""
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    joined = "/".join(output)
    return joined if joined.startswith("/") else "/" + joined


def normalize_htu(url: str) -> str:
    """An http(s) URL as `htu` is compared (RFC 9449 §4.3 item 9): query and fragment
    dropped; scheme and host lower-cased; the default port dropped; an empty path is `/`;
    percent-escapes normalised and dot segments removed (RFC 3986 §6.2.2, §6.2.3).

    `MalformedInput` for anything that is not an absolute http(s) URL with a host.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise MalformedInput("not a URL") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not host or parts.username is not None:
        raise MalformedInput("an htu must be an absolute http(s) URL without credentials")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = _remove_dot_segments(_normalise_percent(parts.path or "/"))
    return urlunsplit((scheme, netloc, path, "", ""))


def _one_proof(values: str | Sequence[str] | None) -> str:
    if values is None or isinstance(values, str):
        found = [] if values is None else [values]
    else:
        found = list(values)
    if len(found) != 1:
        raise DpopError("header", "exactly one DPoP header is required")
    proof = found[0].strip()
    # Two headers folded into one ("a, b") or anything but one compact JWS is refused.
    if not proof or proof.count(".") != 2 or any(c in proof for c in ", \t"):
        raise DpopError("header", "the DPoP header must hold one compact JWS")
    return proof


def _proof_key(header: Mapping[str, Any]) -> PublicJWK:
    jwk = header.get("jwk")
    if not isinstance(jwk, dict):
        raise DpopError("jwk", "the DPoP header must carry a jwk object")
    try:
        return import_public_jwk(jwk)  # which refuses private members (`d`, `p`, ...)
    except MalformedInput as exc:
        raise DpopError("jwk", f"the DPoP jwk is not usable: {exc}") from exc


def _replay_key(thumbprint: str, jti: str) -> str:
    raw = f"{thumbprint}:{jti}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def check_dpop_proof(
    header_values: str | Sequence[str] | None,
    *,
    method: str,
    url: str,
    now: float,
    access_token: str | None = None,
    jkt: str | None = None,
    nonce: str | None = None,
    allowed_algs: frozenset[str] = DEFAULT_DPOP_ALGS,
    window: float = DEFAULT_WINDOW,
) -> DpopProof:
    """Every RFC 9449 §4.3 check but replay (see the module docstring); `DpopError` if one fails.

    `header_values` are all the request's `DPoP` header values; `url` its public URL (as the
    client sees it: behind a proxy, rebuilt from the configured origin). `jkt` is the bound
    key's thumbprint, when the request presents a bound token; `nonce` the one the server
    requires, if it requires nonces. `allowed_algs` must hold asymmetric algorithms only.
    """
    if not allowed_algs or not allowed_algs <= ALGORITHM_KEY_TYPES.keys():
        raise MalformedInput(f"allowed_algs must be among {sorted(ALGORITHM_KEY_TYPES)}")
    compact = _one_proof(header_values)
    try:
        jws = parse_compact(compact, allowed_algs=allowed_algs)
    except JoseError as exc:
        raise DpopError("alg" if exc.code == "alg_not_allowed" else "jws", str(exc)) from exc
    if jws.header.get("typ") != DPOP_TYP:
        raise DpopError("typ", "the DPoP header typ must be dpop+jwt")
    key = _proof_key(jws.header)
    try:
        verify_signature(jws, key)
        claims = jws.claims()
    except JoseError as exc:
        raise DpopError("signature", str(exc)) from exc

    jti, htm, htu = claims.get("jti"), claims.get("htm"), claims.get("htu")
    iat = json_number(claims.get("iat"))
    if not isinstance(jti, str) or not MIN_JTI_LENGTH <= len(jti) <= MAX_JTI_LENGTH:
        raise DpopError("jti", f"jti must be a string of {MIN_JTI_LENGTH}-{MAX_JTI_LENGTH} chars")
    if not isinstance(htm, str) or not isinstance(htu, str) or iat is None:
        raise DpopError("claims", "htm, htu and a numeric iat are required")
    if htm != method:
        raise DpopError("htm", "htm does not match the request method")
    try:
        matches = normalize_htu(htu) == normalize_htu(url)
    except MalformedInput as exc:
        raise DpopError("htu", "htu is not an http(s) URL") from exc
    if not matches:
        raise DpopError("htu", "htu does not match the request URL")
    if not now - window <= iat <= now + window:
        raise DpopError("iat", "the proof was not made within the acceptance window")
    carried = claims.get("nonce")
    if nonce is not None and not (isinstance(carried, str) and hmac.compare_digest(carried, nonce)):
        raise DpopError("nonce", "the proof must carry the server's nonce", error=USE_DPOP_NONCE)
    ath = claims.get("ath")
    if access_token is not None:
        if not isinstance(ath, str) or not hmac.compare_digest(
            ath, access_token_hash(access_token)
        ):
            raise DpopError("ath", "ath does not match the access token")
    elif "ath" in claims:
        raise DpopError("ath", "ath is only allowed with an access token")
    if jkt is not None and not hmac.compare_digest(key.thumbprint, jkt):
        raise DpopError("jkt", "the proof key is not the key the token is bound to")
    return DpopProof(
        jti=jti,
        iat=iat,
        htm=htm,
        htu=htu,
        key=key,
        thumbprint=key.thumbprint,
        nonce=carried if isinstance(carried, str) else None,
        replay_key=_replay_key(key.thumbprint, jti),
        replay_expires_at=iat + window,
        claims=claims,
    )


def _refuse_replay(first: bool) -> None:
    if not first:
        raise DpopError("replay", "the proof has been used before")


def spend_dpop_proof(proof: DpopProof, *, replay: ReplayMemory, now: float) -> None:
    """Mark a checked proof's `jti` used in `replay` (blocking); a proof seen before is
    refused (`reason` `replay`). The last step of verification: call it only once every
    other check of the request has passed, so a refused request burns no proof."""
    until = remember_until(proof.replay_expires_at)
    _refuse_replay(replay.first_use(proof.replay_key, now=now, expires_at=until))


async def aspend_dpop_proof(proof: DpopProof, *, replay: ReplayMemory, now: float) -> None:
    """Async `spend_dpop_proof`: a memory that `may_block` is called in a worker thread."""
    key, until = proof.replay_key, remember_until(proof.replay_expires_at)
    if replay.may_block:
        first = await asyncio.to_thread(replay.first_use, key, now=now, expires_at=until)
    else:
        first = replay.first_use(key, now=now, expires_at=until)
    _refuse_replay(first)


__all__ = [
    "DEFAULT_DPOP_ALGS",
    "DEFAULT_WINDOW",
    "DPOP_TYP",
    "INVALID_DPOP_PROOF",
    "MAX_JTI_LENGTH",
    "MIN_JTI_LENGTH",
    "USE_DPOP_NONCE",
    "DpopError",
    "DpopProof",
    "access_token_hash",
    "aspend_dpop_proof",
    "check_dpop_proof",
    "normalize_htu",
    "spend_dpop_proof",
]
