"""Checking the receipts a Provider signs for delegated turns (PACT §5.6; pact-provider.md §5.7).

`check_receipt` is pure: given the Provider's keys it verifies the compact JWS (ES256/RS256,
`typ: pact-receipt+jws`), requires the claims that came with the reply to be exactly the
signed ones (RFC 8785 canonical forms compared, so key order and spacing do not matter but
every key and value does: an unsigned extra claim is refused too, which the reference client
would let through), checks their shape and that `pa` and `brand` are the expected ones.

The keys come from the authorization server's RFC 8414 metadata (`jwks_uri`), which the card
links as `oauth2MetadataUrl`. `verify_receipt` fetches metadata and JWKS on every call; to
check many receipts, fetch the keys once with `fetch_receipt_keys` and pass `jwks=`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from attrs import field, frozen

from pactmw.client.a2a import Receipt
from pactmw.client.errors import ReceiptInvalid, ResponseInvalid
from pactmw.client.flow import Flow, RetryPolicy, exchange, run_async, run_sync
from pactmw.client.http import HttpRequest, is_absolute_http_url
from pactmw.client.responses import raise_for_status
from pactmw.client.transport import AsyncioTransport, AsyncTransport, SyncTransport, Transport
from pactmw.core.errors import JoseError, MalformedInput
from pactmw.core.jcs import canonicalize
from pactmw.core.jose import parse_compact, verify_signature
from pactmw.core.jwk import KeySet, parse_jwks
from pactmw.protocols.delegation import DELEGATION_ALGORITHMS, RECEIPT_TYP

_METADATA_URLS = ("issuer", "device_authorization_endpoint", "token_endpoint", "jwks_uri")


@frozen
class ReceiptAction:
    """One recorded tool call; `args_hash` only for write actions."""

    tool: str
    args_hash: str | None = None


@frozen
class VerifiedReceipt:
    """A receipt whose signature, claims, `pa` and `brand` checked out. Keep it: it is the
    user's evidence of what the Brand's agent did under the grant."""

    grant_id: str
    user: str
    pa: str
    brand: str
    scopes_used: tuple[str, ...]
    actions: tuple[ReceiptAction, ...]
    ts: datetime
    kid: str | None
    claims: Mapping[str, Any] = field(repr=False)
    jws: str = field(repr=False)


@frozen
class AuthorizationServerMetadata:
    """RFC 8414 metadata of a Brand's authorization server; `raw` has every field."""

    issuer: str
    device_authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def authorization_details_types(self) -> tuple[str, ...]:
        """RFC 9396 §10 `authorization_details_types_supported` (none when not advertised)."""
        types = self.raw.get("authorization_details_types_supported", [])
        if not isinstance(types, list):
            return ()
        return tuple(kind for kind in types if isinstance(kind, str))


# -- the pure check -----------------------------------------------------------------------------


def _parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str) or "T" not in value:
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _actions(value: Any) -> tuple[ReceiptAction, ...] | None:
    if not isinstance(value, list):
        return None
    actions: list[ReceiptAction] = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
            return None
        args_hash = item.get("argsHash")
        if args_hash is not None and not isinstance(args_hash, str):
            return None
        actions.append(ReceiptAction(item["tool"], args_hash))
    return tuple(actions)


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def check_receipt(
    receipt: Receipt | Mapping[str, Any],
    keys: KeySet,
    *,
    expected_pa: str,
    expected_brand: str,
) -> VerifiedReceipt:
    """Verify a receipt against the Provider's keys; `ReceiptInvalid(reason)` otherwise.

    `expected_pa` is this personal agent's issuer; `expected_brand` the interface URL the
    message was sent to.
    """
    token: Any
    returned: Any
    if isinstance(receipt, Receipt):
        token, returned = receipt.jws, receipt.claims
    else:
        token, returned = receipt.get("jws"), receipt.get("claims")
    if not isinstance(token, str) or not isinstance(returned, Mapping):
        raise ReceiptInvalid("malformed", "a receipt is {jws, claims}")
    try:
        jws = parse_compact(token, allowed_algs=DELEGATION_ALGORITHMS)
    except JoseError as exc:
        raise ReceiptInvalid(exc.code, str(exc)) from exc
    if not all(token.split(".")):
        raise ReceiptInvalid("malformed", "detached or empty JWS segments")
    if jws.header.get("typ") != RECEIPT_TYP:
        raise ReceiptInvalid("bad_typ", f"typ must be {RECEIPT_TYP}")
    candidates = keys.candidates(jws.kid, jws.alg)
    if not candidates:
        raise ReceiptInvalid("unknown_key", f"no {jws.alg} key with kid {jws.kid!r}")
    for key in candidates:
        try:
            verify_signature(jws, key)
            break
        except JoseError:
            continue
    else:
        raise ReceiptInvalid("bad_signature")
    try:
        signed = jws.claims()
    except JoseError as exc:
        raise ReceiptInvalid("malformed", str(exc)) from exc
    try:
        equal = canonicalize(signed) == canonicalize(dict(returned))
    # OverflowError: an integer past what an IEEE double holds (RFC 8785 compares doubles).
    except (TypeError, ValueError, OverflowError) as exc:
        raise ReceiptInvalid("bad_claims", str(exc)) from exc
    if not equal:
        raise ReceiptInvalid("claims_mismatch", "the returned claims are not the signed ones")
    grant_id, user, pa, brand = (signed.get(k) for k in ("grantId", "user", "pa", "brand"))
    scopes_used, actions = signed.get("scopesUsed"), _actions(signed.get("actions"))
    ts = _parse_ts(signed.get("ts"))
    if (
        not (isinstance(grant_id, str) and grant_id and isinstance(user, str) and user)
        or not (is_absolute_http_url(pa) and is_absolute_http_url(brand))
        or not (isinstance(scopes_used, list) and all(isinstance(s, str) for s in scopes_used))
        or actions is None
        or ts is None
    ):
        raise ReceiptInvalid("bad_claims", "grantId, user, pa, brand, scopesUsed, actions, ts")
    assert isinstance(pa, str)
    assert isinstance(brand, str)
    if pa != expected_pa:
        raise ReceiptInvalid("wrong_pa", f"receipt is for {pa}")
    if not _same_url(brand, expected_brand):
        raise ReceiptInvalid("wrong_brand", f"receipt is for {brand}")
    return VerifiedReceipt(
        grant_id=grant_id,
        user=user,
        pa=pa,
        brand=brand,
        scopes_used=tuple(scopes_used),
        actions=actions,
        ts=ts,
        kid=jws.kid,
        claims=MappingProxyType(signed),
        jws=token,
    )


def parse_metadata(document: Any, *, url: str = "") -> AuthorizationServerMetadata:
    """RFC 8414 metadata with `issuer`, both endpoints and `jwks_uri` as absolute URLs."""
    if not isinstance(document, dict) or not all(
        is_absolute_http_url(document.get(k)) for k in _METADATA_URLS
    ):
        raise ResponseInvalid(f"{url}: authorization server metadata needs {_METADATA_URLS}")
    return AuthorizationServerMetadata(
        issuer=document["issuer"],
        device_authorization_endpoint=document["device_authorization_endpoint"],
        token_endpoint=document["token_endpoint"],
        jwks_uri=document["jwks_uri"],
        raw=MappingProxyType(document),
    )


# -- fetching -----------------------------------------------------------------------------------


def _get_json(url: str, policy: RetryPolicy) -> Flow[Any]:
    request = HttpRequest("GET", url, headers=(("Accept", "application/json"),))
    response = yield from exchange(lambda: request, policy, idempotent=True)
    raise_for_status(response)
    return response.json()


def metadata_flow(url: str, policy: RetryPolicy) -> Flow[AuthorizationServerMetadata]:
    return parse_metadata((yield from _get_json(url, policy)), url=url)


def keys_flow(
    policy: RetryPolicy, *, metadata_url: str | None = None, jwks_uri: str | None = None
) -> Flow[KeySet]:
    """The receipt keys: from `jwks_uri`, or from the `jwks_uri` of the metadata."""
    if (metadata_url is None) == (jwks_uri is None):
        raise ValueError("give exactly one of metadata_url and jwks_uri")
    if jwks_uri is None:
        assert metadata_url is not None
        jwks_uri = (yield from metadata_flow(metadata_url, policy)).jwks_uri
    document = yield from _get_json(jwks_uri, policy)
    try:
        return parse_jwks(document)
    except MalformedInput as exc:
        raise ResponseInvalid(f"{jwks_uri}: not a usable JWKS ({exc})") from exc


def _keys_from(jwks: KeySet | Mapping[str, Any]) -> KeySet:
    if isinstance(jwks, KeySet):
        return jwks
    try:
        return parse_jwks(jwks)
    except MalformedInput as exc:
        raise ValueError(f"not a usable JWKS: {exc}") from exc


def verify_flow(
    receipt: Receipt | Mapping[str, Any],
    *,
    expected_pa: str,
    expected_brand: str,
    metadata_url: str | None,
    jwks_uri: str | None,
    jwks: KeySet | Mapping[str, Any] | None,
    policy: RetryPolicy,
) -> Flow[VerifiedReceipt]:
    if jwks is not None:
        if metadata_url is not None or jwks_uri is not None:
            raise ValueError("give exactly one of metadata_url, jwks_uri and jwks")
        keys = _keys_from(jwks)
    else:
        keys = yield from keys_flow(policy, metadata_url=metadata_url, jwks_uri=jwks_uri)
    return check_receipt(receipt, keys, expected_pa=expected_pa, expected_brand=expected_brand)


def fetch_authorization_server_metadata(
    url: str, *, transport: Transport | None = None, retry: RetryPolicy | None = None
) -> AuthorizationServerMetadata:
    """GET RFC 8414 metadata (the card's `oauth2MetadataUrl`)."""
    flow = metadata_flow(url, retry or RetryPolicy())
    return run_sync(flow, transport or SyncTransport(), time.sleep)


async def afetch_authorization_server_metadata(
    url: str, *, transport: AsyncTransport | None = None, retry: RetryPolicy | None = None
) -> AuthorizationServerMetadata:
    flow = metadata_flow(url, retry or RetryPolicy())
    return await run_async(flow, transport or AsyncioTransport(), asyncio.sleep)


def fetch_receipt_keys(
    *,
    metadata_url: str | None = None,
    jwks_uri: str | None = None,
    transport: Transport | None = None,
    retry: RetryPolicy | None = None,
) -> KeySet:
    """The Provider's receipt keys, to pass as `jwks=` to many `verify_receipt` calls."""
    flow = keys_flow(retry or RetryPolicy(), metadata_url=metadata_url, jwks_uri=jwks_uri)
    return run_sync(flow, transport or SyncTransport(), time.sleep)


async def afetch_receipt_keys(
    *,
    metadata_url: str | None = None,
    jwks_uri: str | None = None,
    transport: AsyncTransport | None = None,
    retry: RetryPolicy | None = None,
) -> KeySet:
    flow = keys_flow(retry or RetryPolicy(), metadata_url=metadata_url, jwks_uri=jwks_uri)
    return await run_async(flow, transport or AsyncioTransport(), asyncio.sleep)


def verify_receipt(
    receipt: Receipt | Mapping[str, Any],
    *,
    expected_pa: str,
    expected_brand: str,
    metadata_url: str | None = None,
    jwks_uri: str | None = None,
    jwks: KeySet | Mapping[str, Any] | None = None,
    transport: Transport | None = None,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> VerifiedReceipt:
    """Verify a receipt with keys from `metadata_url` (RFC 8414), `jwks_uri` or `jwks`.

    `ReceiptInvalid(reason)` when it does not verify; fetch failures raise their own errors
    (`HTTPError`, `NetworkError`, `ResponseInvalid`): "could not check" is not "invalid".
    """
    flow = verify_flow(
        receipt,
        expected_pa=expected_pa,
        expected_brand=expected_brand,
        metadata_url=metadata_url,
        jwks_uri=jwks_uri,
        jwks=jwks,
        policy=retry or RetryPolicy(),
    )
    return run_sync(flow, transport or SyncTransport(), sleep)


async def averify_receipt(
    receipt: Receipt | Mapping[str, Any],
    *,
    expected_pa: str,
    expected_brand: str,
    metadata_url: str | None = None,
    jwks_uri: str | None = None,
    jwks: KeySet | Mapping[str, Any] | None = None,
    transport: AsyncTransport | None = None,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> VerifiedReceipt:
    """`verify_receipt` for asyncio."""
    flow = verify_flow(
        receipt,
        expected_pa=expected_pa,
        expected_brand=expected_brand,
        metadata_url=metadata_url,
        jwks_uri=jwks_uri,
        jwks=jwks,
        policy=retry or RetryPolicy(),
    )
    return await run_async(flow, transport or AsyncioTransport(), sleep)


__all__ = [
    "AuthorizationServerMetadata",
    "ReceiptAction",
    "VerifiedReceipt",
    "afetch_authorization_server_metadata",
    "afetch_receipt_keys",
    "averify_receipt",
    "check_receipt",
    "fetch_authorization_server_metadata",
    "fetch_receipt_keys",
    "keys_flow",
    "metadata_flow",
    "parse_metadata",
    "verify_flow",
    "verify_receipt",
]
