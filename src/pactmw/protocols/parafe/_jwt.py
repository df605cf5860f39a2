"""The few jose (the reference's JWT library) behaviours Parafé verification depends on.

The reference verifies with jose's `jwtVerify`, so its defaults are part of the protocol:
time is whole seconds (`Math.floor(Date.now() / 1000)`), `exp <= now` is expired, `typ` is
compared case-insensitively without an `application/` prefix, numbers are JSON numbers (never
booleans), and `===` never equates two objects. These helpers are pure.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, TypeGuard

from attrs import evolve

from pactmw.core.encoding import b64url_decode, b64url_encode, json_loads
from pactmw.core.errors import JoseError, MalformedInput
from pactmw.core.jwk import PrivateJWK

#: A stand-in for JavaScript's `undefined` (a member that is absent), unlike JSON `null`.
MISSING: Any = object()


def require_agent_key(key: PrivateJWK) -> None:
    """A Parafé agent signs with its registered Ed25519 (EdDSA) or P-256 (ES256) key."""
    if key.alg not in ("ES256", "EdDSA"):
        raise ValueError("a Parafé agent key is Ed25519 or P-256")


def without_kid(key: PrivateJWK) -> PrivateJWK:
    """`key` for signing a proof, whose header names no `kid`: the verifier knows the key
    already (the consent token's `cnf.jkt`, the broker's record of the agent)."""
    return evolve(key, public=evolve(key.public, kid=None))


def random_jti() -> str:
    """A fresh `jti` for what an agent signs: a random UUID, so no two proofs share one."""
    return str(uuid.uuid4())


def is_number(value: Any) -> TypeGuard[int | float]:
    """JavaScript `typeof value === "number"` for parsed JSON (bool is not a number)."""
    return type(value) in (int, float)


def as_float(value: int | float) -> float:
    """A JSON number as a float; integers past the float range become infinities (as
    JavaScript reads them)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def whole_seconds(now: float) -> int:
    """jose's clock: epoch seconds rounded down."""
    return math.floor(now)


def strict_equal(a: Any, b: Any) -> bool:
    """JavaScript `a === b` for parsed JSON values (`MISSING` is `undefined`).

    Objects and arrays are never equal (they would be distinct objects); a number never equals
    a boolean, and `null` never equals `undefined`.
    """
    if a is MISSING or b is MISSING:
        return a is b
    if isinstance(a, (Mapping, list, tuple)) or isinstance(b, (Mapping, list, tuple)):
        return False
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    return bool(a == b)  # both numbers: 1 === 1.0 in JavaScript


def utf16_length(text: str) -> int:
    """JavaScript's `string.length`: UTF-16 code units, not code points."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def sha256_b64url(data: str | bytes) -> str:
    """base64url(SHA-256(data)), text as UTF-8: `ath`, `consent_ref`, `receipt_hash`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return b64url_encode(hashlib.sha256(raw).digest())


def normalize_typ(value: str) -> str:
    """jose's `typ` comparison form: lower case, without an `application/` prefix."""
    lowered = value.lower()
    return lowered[len("application/") :] if lowered.startswith("application/") else lowered


def typ_matches(header: Mapping[str, Any], expected: str) -> bool:
    typ = header.get("typ")
    return isinstance(typ, str) and normalize_typ(typ) == normalize_typ(expected)


#: jose's text for a payload that is not a JSON object, checked after the signature.
CLAIMS_NOT_AN_OBJECT = "JWT Claims Set must be a top-level JSON object"


def claims_failure(exc: JoseError) -> str:
    """What to report when a JWS verified but its payload is not a (strict) JSON object:
    jose's text, then what our strict reading refused (which jose, lenient, may accept)."""
    return f"{CLAIMS_NOT_AN_OBJECT} ({exc})"


def decode_unverified(token: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Header and payload of a compact JWS without checking anything else, or None.

    Both must be JSON objects (jose's `decodeProtectedHeader` and `decodeJwt`). Used only
    where the reference reads an unverified token: a receipt's issuer before its key is
    known, a refusal's exclusions, the session id of an online check.
    """
    if not isinstance(token, str) or token.count(".") != 2:
        return None
    header_b64, payload_b64, _ = token.split(".")
    try:
        header = json_loads(b64url_decode(header_b64))
        payload = json_loads(b64url_decode(payload_b64))
    except MalformedInput:
        return None
    if not isinstance(header, dict) or not isinstance(payload, dict):
        return None
    return header, payload


def unverified_claims(token: Any) -> dict[str, Any]:
    """The payload of a token, unverified; `{}` when it cannot be read."""
    decoded = decode_unverified(token)
    return decoded[1] if decoded is not None else {}


#: Outcomes of `time_check`, each named for the jose error it stands for.
TIME_OK = "ok"
IAT_NOT_NUMBER = "iat_not_number"
NBF_NOT_NUMBER = "nbf_not_number"
NOT_YET_VALID = "not_yet_valid"
EXP_NOT_NUMBER = "exp_not_number"
EXPIRED = "expired"
TOO_OLD = "too_old"
IAT_IN_FUTURE = "iat_in_future"


def time_check(
    claims: Mapping[str, Any], *, now: int, tolerance: int = 0, max_age: int | None = None
) -> str:
    """jose's time checks, in jose's order: `iat` type, `nbf`, `exp`, then `maxTokenAge`.

    `iat` is required (as a number) only with `max_age`; `nbf` and `exp` only when present.
    """
    iat = claims.get("iat", MISSING)
    if (iat is not MISSING or max_age is not None) and not is_number(iat):
        return IAT_NOT_NUMBER
    if "nbf" in claims:
        if not is_number(claims["nbf"]):
            return NBF_NOT_NUMBER
        if claims["nbf"] > now + tolerance:
            return NOT_YET_VALID
    if "exp" in claims:
        if not is_number(claims["exp"]):
            return EXP_NOT_NUMBER
        if claims["exp"] <= now - tolerance:
            return EXPIRED
    if max_age is not None:
        age = now - iat
        if age - tolerance > max_age:
            return TOO_OLD
        if age < -tolerance:
            return IAT_IN_FUTURE
    return TIME_OK


TIME_MESSAGES = {
    IAT_NOT_NUMBER: '"iat" claim must be a number',
    NBF_NOT_NUMBER: '"nbf" claim must be a number',
    NOT_YET_VALID: '"nbf" claim timestamp check failed',
    EXP_NOT_NUMBER: '"exp" claim must be a number',
    EXPIRED: '"exp" claim timestamp check failed',
    TOO_OLD: '"iat" claim timestamp check failed (too far in the past)',
    IAT_IN_FUTURE: '"iat" claim timestamp check failed (it should be in the past)',
}

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?(Z|[+-]\d{2}:\d{2})?")


def parse_iso(value: Any) -> float | None:
    """An ISO 8601 timestamp (as the broker writes them) as epoch seconds, or None.

    A time without an offset is read as UTC.
    """
    if not isinstance(value, str) or _ISO.fullmatch(value) is None:
        return None
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    # Python 3.10's fromisoformat takes at most 6 fraction digits.
    text = re.sub(r"\.(\d{6})\d+", r".\1", text)
    text = re.sub(r"\.(\d{1,5})(?=[+-]|$)", lambda m: "." + m.group(1).ljust(6, "0"), text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


__all__ = [
    "CLAIMS_NOT_AN_OBJECT",
    "EXPIRED",
    "EXP_NOT_NUMBER",
    "IAT_IN_FUTURE",
    "IAT_NOT_NUMBER",
    "MISSING",
    "NBF_NOT_NUMBER",
    "NOT_YET_VALID",
    "TIME_MESSAGES",
    "TIME_OK",
    "TOO_OLD",
    "as_float",
    "claims_failure",
    "decode_unverified",
    "is_number",
    "normalize_typ",
    "parse_iso",
    "random_jti",
    "require_agent_key",
    "sha256_b64url",
    "strict_equal",
    "time_check",
    "typ_matches",
    "unverified_claims",
    "utf16_length",
    "whole_seconds",
    "without_kid",
]
