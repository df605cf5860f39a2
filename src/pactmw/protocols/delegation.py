"""PACT 1.0 Delegated profile: delegation tokens, receipts, the Provider's signing keys.

Pure logic (spec §5.4-§5.6, reference facts in pact-provider.md §5.5-§5.7). The grant check
(is the grant still live?) needs the store and is done by the Provider after `verify_token`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeGuard

from attrs import field, frozen

from pactmw.core.errors import AuthenticationFailed, JoseError, MalformedInput
from pactmw.core.jose import parse_compact, sign_compact, verify_with_any
from pactmw.core.jwk import (
    KeySet,
    PrivateJWK,
    generate_private_jwk,
    import_private_jwk,
    load_private_key_pem,
)

#: The spec allows ES256 or RS256 for delegation tokens and receipts (the reference: ES256).
DELEGATION_ALGORITHMS = frozenset({"ES256", "RS256"})
ACCESS_TOKEN_TYP = "at+jwt"  # noqa: S105 - a JOSE typ (RFC 9068), not a secret
RECEIPT_TYP = "pact-receipt+jws"  # the reference's receipt header type
ACCESS_TOKEN_LIFETIME = 3600.0  # spec §5.4: SHOULD be at most 1 h


class DelegationRejected(AuthenticationFailed):
    """A delegation token was refused: 401 with `error="invalid_token"` (spec §5.5)."""

    www_authenticate = 'Bearer realm="a2a", error="invalid_token"'
    credential = "delegation_token"


@frozen
class Delegation:
    """A verified delegation: which Brand account, which scopes, under which grant.

    `authorization_details` are the RFC 9396 entries the person approved with the scopes
    (each a JSON object with a `type`), in the order they were granted; empty without any.
    """

    account: str
    scopes: frozenset[str]
    grant_id: str
    client_id: str
    claims: Mapping[str, Any] = field(repr=False)
    authorization_details: tuple[Mapping[str, Any], ...] = ()

    def has(self, scope: str) -> bool:
        return scope in self.scopes

    def details_of(self, type: str) -> tuple[Mapping[str, Any], ...]:
        """The approved authorization details of one `type`."""
        return tuple(entry for entry in self.authorization_details if entry.get("type") == type)


def authorization_server_issuer(interface_url: str) -> str:
    """The `iss` of a Brand's authorization server: `{interface URL}/oauth`."""
    return interface_url.rstrip("/") + "/oauth"


def mint_access_token(
    *,
    key: PrivateJWK,
    interface_url: str,
    account: str,
    client_id: str,
    scopes: Iterable[str],
    grant_id: str,
    now: float,
    lifetime: float = ACCESS_TOKEN_LIFETIME,
    authorization_details: Sequence[Mapping[str, Any]] = (),
) -> str:
    """Sign a delegation token (spec §5.4) for one Brand (`aud` = its interface URL).

    `authorization_details` (RFC 9396 §9.1), when any, go into the token as a claim of the
    same name, as the reference Provider puts them.
    """
    if not 0 < lifetime <= ACCESS_TOKEN_LIFETIME:
        raise ValueError("delegation tokens live at most one hour")
    issued = int(now)
    claims: dict[str, Any] = {
        "iss": authorization_server_issuer(interface_url),
        "aud": interface_url,
        "sub": account,
        "client_id": client_id,
        "scope": " ".join(sorted(set(scopes))),
        "grant_id": grant_id,
    }
    if authorization_details:
        claims["authorization_details"] = [dict(entry) for entry in authorization_details]
    claims["iat"] = issued
    claims["exp"] = issued + int(lifetime)
    return sign_compact(claims, key, typ=ACCESS_TOKEN_TYP)


def is_authorization_details(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    """Whether `value` has the shape of RFC 9396 `authorization_details`: a JSON array of
    objects, each with a string `type` (§2). Empty passes; which types a Brand accepts, and
    what each must carry, is the Provider's rule."""
    return isinstance(value, list) and all(
        isinstance(entry, dict) and isinstance(entry.get("type"), str) for entry in value
    )


def parse_delegation_header(value: str | None) -> str:
    """The token of `X-A2A-User-Delegation: Bearer <token>`."""
    parts = (value or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        raise DelegationRejected("malformed_header", "expected 'Bearer <token>'")
    return parts[1]


def verify_access_token(
    header_value: str | None,
    *,
    keys: KeySet,
    interface_url: str,
    client_id: str,
    now: float,
) -> Delegation:
    """Verify a delegation token's signature, `typ`, `iss`, `aud`, times and `client_id`.

    `client_id` is the `iss` of the personal-agent JWT sent with it (checked first, by the
    caller). Like the reference, no clock tolerance: these are our own tokens and clocks.
    Raises `DelegationRejected`; the caller then checks the grant is still live.
    """
    token = parse_delegation_header(header_value)
    try:
        jws = parse_compact(token, allowed_algs=DELEGATION_ALGORITHMS)
        claims = jws.claims()
    except JoseError as exc:
        raise DelegationRejected("malformed_token", str(exc)) from exc
    if jws.header.get("typ") != ACCESS_TOKEN_TYP:
        raise DelegationRejected("bad_typ")
    if not verify_with_any(jws, keys.candidates(jws.kid, jws.alg)):
        if jws.kid is not None and not keys.has_kid(jws.kid):
            # Mostly a rotation that removed the key while its tokens were still out: for the
            # log only, as the answer is PACT's `invalid_token` whatever the cause.
            raise DelegationRejected(
                "bad_signature",
                f"the key that signed it (kid={jws.kid}) is not, or no longer, among the "
                "signing keys of this Provider",
            )
        raise DelegationRejected("bad_signature")
    if claims.get("iss") != authorization_server_issuer(interface_url):
        raise DelegationRejected("bad_issuer")
    if claims.get("aud") != interface_url:
        raise DelegationRejected("bad_audience")
    account, scope, grant_id = claims.get("sub"), claims.get("scope"), claims.get("grant_id")
    iat, exp = claims.get("iat"), claims.get("exp")
    if not (isinstance(account, str) and account and isinstance(grant_id, str) and grant_id):
        raise DelegationRejected("bad_claims")
    if not isinstance(scope, str):
        raise DelegationRejected("bad_claims")
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in (iat, exp)):
        raise DelegationRejected("bad_claims")
    assert isinstance(exp, int)
    if exp <= now:
        raise DelegationRejected("expired")
    if claims.get("client_id") != client_id:
        raise DelegationRejected("wrong_client")
    details = claims.get("authorization_details", [])
    if not is_authorization_details(details):
        raise DelegationRejected("bad_claims")
    return Delegation(
        account=account,
        scopes=frozenset(scope.split()),
        grant_id=grant_id,
        client_id=client_id,
        claims=MappingProxyType(claims),
        authorization_details=tuple(MappingProxyType(entry) for entry in details),
    )


def mint_login_assertion(
    *,
    key: PrivateJWK,
    brand_issuer: str,
    consent_url: str,
    account: str,
    user_code: str,
    email: str | None = None,
    now: float | None = None,
    lifetime: float = 120.0,
    name: str | None = None,
) -> str:
    """What a Brand's login page POSTs to the consent page after signing the user in (§5.3).

    A single-use JWT (a fresh `jti`) bound to the `user_code`, for the consent URL only,
    signed with a key published at the Brand's JWKS. The Provider accepts it for 5 minutes.
    The pages name the person by `email`, else `name` (what they signed in as), else
    `account`.
    """
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "iss": brand_issuer,
        "aud": consent_url.split("?", 1)[0],
        "sub": account,
        "user_code": user_code,
        "jti": base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii"),
        "iat": issued,
        "exp": issued + int(lifetime),
    }
    if email is not None:
        claims["email"] = email
    if name is not None:
        claims["name"] = name
    return sign_compact(claims, key, typ="JWT")


# -- receipts (spec §5.6, pact-provider.md §5.7) -------------------------------------------------


def args_hash(arguments: Mapping[str, Any]) -> str:
    """base64url(SHA-256(compact JSON of the tool arguments)), keys in insertion order.

    Matches JavaScript's `JSON.stringify`, as the reference computes it (not JCS).
    """
    compact = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(compact.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def iso_timestamp(now: float) -> str:
    """ISO-8601 UTC with milliseconds and `Z`, as JavaScript's `toISOString()` writes it."""
    moment = datetime.fromtimestamp(now, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@frozen
class Action:
    """One tool call recorded in a receipt; `args_hash` only for write actions."""

    tool: str
    args_hash: str | None = None

    def to_claim(self) -> dict[str, str]:
        claim = {"tool": self.tool}
        if self.args_hash is not None:
            claim["argsHash"] = self.args_hash
        return claim


def receipt_claims(
    *,
    delegation: Delegation,
    interface_url: str,
    scopes_used: Sequence[str],
    actions: Sequence[Action],
    now: float,
) -> dict[str, Any]:
    """The receipt claims in the reference's order (the signed bytes follow this order)."""
    return {
        "grantId": delegation.grant_id,
        "user": delegation.account,
        "pa": delegation.client_id,
        "brand": interface_url,
        "scopesUsed": list(scopes_used),
        "actions": [action.to_claim() for action in actions],
        "ts": iso_timestamp(now),
    }


def sign_receipt(claims: Mapping[str, Any], key: PrivateJWK) -> dict[str, Any]:
    """`{"jws", "claims"}`: the compact JWS over the claims' UTF-8 JSON, and the claims."""
    return {"jws": sign_compact(dict(claims), key, typ=RECEIPT_TYP), "claims": dict(claims)}


# -- the Provider's signing keys ----------------------------------------------------------------


def _published_keys(data: bytes) -> str | None:
    """What a file of public keys is ("a JWK Set (public keys)", "a public JWK"), or None:
    `pactmw keygen --out key.jwk --jwks jwks.json` writes both side by side, and the
    published one named as a signing key would otherwise be told a JWK member is missing."""
    try:
        found = json.loads(data)
    except ValueError:
        return None
    if isinstance(found, dict) and isinstance(found.get("keys"), list):
        return "a JWK Set (public keys)"
    if isinstance(found, dict) and "kty" in found and "d" not in found:
        return "a public JWK"
    return None


@frozen
class SigningKeys:
    """The Provider's keys for delegation tokens and receipts: the newest signs, all verify.

    Publish `public` at the authorization server's `jwks_uri`; keep retired keys in the list
    until tokens signed with them have expired (an hour) and receipts have been checked.
    """

    keys: tuple[PrivateJWK, ...]

    def __attrs_post_init__(self) -> None:
        if not self.keys:
            raise ValueError("at least one signing key is needed")
        for key in self.keys:
            if key.alg not in DELEGATION_ALGORITHMS:
                raise ValueError(f"delegation keys must be ES256 or RS256, not {key.alg}")

    @property
    def signer(self) -> PrivateJWK:
        """The key that signs: the last one listed (the newest)."""
        return self.keys[-1]

    @property
    def public(self) -> KeySet:
        return KeySet(tuple(key.public for key in self.keys))

    def jwks(self) -> dict[str, Any]:
        """The public JWKS document, each key with `alg` and `use: sig`."""
        return {"keys": [{**key.public.to_dict(), "use": "sig"} for key in self.keys]}

    @classmethod
    def from_files(cls, paths: Iterable[str | Path]) -> SigningKeys:
        """Load keys from JWK (`.json`/`.jwk`) or PEM files, oldest first."""
        loaded: list[PrivateJWK] = []
        for path in paths:
            text = str(path)
            if "\n" in text or text.lstrip().startswith(("{", "-----BEGIN")):
                # A key pasted where its path belongs: an error quoting the "path" (the OS's
                # "No such file") would print the private key at startup, and into logs.
                raise ValueError("an entry is a key itself, not its file's path (not shown)")
            data = Path(path).read_bytes()
            try:
                if data.lstrip().startswith(b"{"):
                    loaded.append(import_private_jwk(data))
                else:
                    loaded.append(load_private_key_pem(data))
            except MalformedInput as exc:
                published = _published_keys(data)
                if published is not None:
                    raise ValueError(
                        f"{path}: is {published}, not a private key: give the file of the "
                        "key itself (`pactmw keygen --out`)"
                    ) from exc
                raise ValueError(f"{path}: {exc}") from exc
        return cls(tuple(loaded))

    @classmethod
    def development(cls, directory: str | Path, alg: str = "ES256") -> SigningKeys:
        """A key generated once into `directory` (mode 0600) and reused: development only.

        Safe when several worker processes start at once on an empty directory: each writes a
        complete key to its own temporary file and links it into place; the first link wins
        and everyone loads that one.
        """
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"provider-signing-key-{alg.lower()}.jwk"
        if not path.exists():
            key = generate_private_jwk(alg)
            temporary = folder / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}"
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(descriptor, "w") as handle:
                    json.dump(key.to_dict(), handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                with contextlib.suppress(FileExistsError):  # another process was first
                    os.link(temporary, path)
            finally:
                temporary.unlink(missing_ok=True)
        return cls.from_files([path])


__all__ = [
    "ACCESS_TOKEN_LIFETIME",
    "ACCESS_TOKEN_TYP",
    "DELEGATION_ALGORITHMS",
    "RECEIPT_TYP",
    "Action",
    "Delegation",
    "DelegationRejected",
    "SigningKeys",
    "args_hash",
    "authorization_server_issuer",
    "is_authorization_details",
    "iso_timestamp",
    "mint_access_token",
    "mint_login_assertion",
    "parse_delegation_header",
    "receipt_claims",
    "sign_receipt",
    "verify_access_token",
]
