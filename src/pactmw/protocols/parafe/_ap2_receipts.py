"""AP2 mandates behind a consent token, and AP2 receipts (spec §5.3). Pure.

A `delegated` or `verified` token carries `mandate_refs`: one `{family, closed_jwt, sd_hash}`
per AP2 mandate the broker checked, the mandate's hash in the two forms AP2's specification
(`sd_hash`, the final SD-JWT as presented) and its SDK (`closed_jwt`, the closed mandate's
JWT) use. An AP2 merchant answers a Checkout Mandate with a Checkout Receipt (a payment
processor: a Payment Receipt), accepted or not: an ES256 JWT whose `reference` is the
mandate's hash, filed unchanged in the session's index with its `kind`.

The claims follow AP2's `checkout_receipt.json`/`payment_receipt.json` as the reference builds
them (a2a-extension `ap2.ts`, @getparafe/sdk `signAp2Receipt`); the hashes are checked against
the AP2 Python SDK's vectors in the tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from attrs import evolve, field, frozen

from pactmw.core.encoding import b64url_decode, b64url_encode, json_loads
from pactmw.core.errors import MalformedInput
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import PrivateJWK

#: A receipt's `kind` in the session index (spec §5.3), by what it answers.
AP2_RECEIPT_KINDS: Mapping[str, str] = MappingProxyType(
    {"checkout": "ap2.checkout_receipt", "payment": "ap2.payment_receipt"}
)
#: Which hash goes in a receipt's `reference`: the AP2 SDK's by default (what its samples
#: check), or the AP2 specification's.
ReferenceForm = Literal["closed_jwt", "sd_hash"]

_SD_HASHES = {"sha-256": "sha256", "sha-384": "sha384", "sha-512": "sha512"}
_FAMILIES = ("checkout", "payment")


def _b64url_digest(algorithm: str, text: str) -> str:
    return b64url_encode(hashlib.new(algorithm, text.encode("ascii")).digest())


@frozen
class MandateReferences:
    """An AP2 mandate's hash in both forms: `sd_hash` (AP2's specification: the final SD-JWT
    as presented, with its `_sd_alg`) and `closed_jwt` (AP2's SDK: SHA-256 of the closed
    mandate's JWT). Both are given until FIDO settles it."""

    sd_hash: str
    closed_jwt: str

    def reference(self, form: ReferenceForm = "closed_jwt") -> str:
        """The hash of the given form."""
        if form == "sd_hash":
            return self.sd_hash
        if form == "closed_jwt":
            return self.closed_jwt
        raise ValueError("reference_form must be 'closed_jwt' or 'sd_hash'")


def mandate_references(mandate: str) -> MandateReferences:
    """Both reference forms of an AP2 mandate as presented (a `~~`-joined chain, or one
    SD-JWT, ending in `~`), as the reference's `ap2MandateReferences`. Does not verify it.

    Raises `ValueError` for anything that is not a presented SD-JWT.
    """
    if not isinstance(mandate, str) or not mandate.endswith("~"):
        raise ValueError(
            'An AP2 mandate as presented is an SD-JWT (or ~~-joined chain) ending in "~"'
        )
    if not mandate.isascii():
        raise ValueError("An AP2 mandate is ASCII (base64url and ~)")
    last = mandate.split("~~")[-1]
    jwt = last.split("~")[0]
    segments = jwt.split(".")
    try:
        if len(segments) != 3:
            raise MalformedInput("not a compact JWS")
        payload = json_loads(b64url_decode(segments[1]))
    except MalformedInput as exc:
        raise ValueError(f"The mandate's last SD-JWT is not a JWT ({exc})") from exc
    if not isinstance(payload, dict):
        raise ValueError("The mandate's last SD-JWT is not a JWT (payload is not an object)")
    sd_alg = payload.get("_sd_alg")
    name = sd_alg.lower() if isinstance(sd_alg, str) else "sha-256"
    if name not in _SD_HASHES:
        raise ValueError(f'Unsupported _sd_alg "{sd_alg}"')
    return MandateReferences(
        sd_hash=_b64url_digest(_SD_HASHES[name], last),
        closed_jwt=_b64url_digest("sha256", jwt),
    )


@frozen
class MandateRef:
    """One entry of a consent token's `mandate_refs`: a mandate the broker verified."""

    family: str
    closed_jwt: str
    sd_hash: str

    def matches(self, references: MandateReferences) -> bool:
        """Whether `references` (of a mandate presented to you) name this mandate, in either
        form, as the broker's index checks an AP2 receipt's `reference`."""
        return references.closed_jwt == self.closed_jwt or references.sd_hash == self.sd_hash


def parse_mandate_refs(value: Any) -> tuple[MandateRef, ...]:
    """The `mandate_refs` claim as `MandateRef`s; entries that are not `{family: "checkout" |
    "payment", closed_jwt, sd_hash}` with string hashes are passed over."""
    if not isinstance(value, list):
        return ()
    refs: list[MandateRef] = []
    for entry in value:
        if not isinstance(entry, Mapping):
            continue
        family, closed, sd = entry.get("family"), entry.get("closed_jwt"), entry.get("sd_hash")
        if family in _FAMILIES and isinstance(closed, str) and isinstance(sd, str):
            refs.append(MandateRef(family=family, closed_jwt=closed, sd_hash=sd))
    return tuple(refs)


# -- AP2 receipts ------------------------------------------------------------------------------


@frozen
class Ap2Outcome:
    """What an AP2 receipt says: `status` `Success` (the default, or `Error` when `error` is
    set) and the members its kind needs.

    Checkout: `order_id` on success. Payment: `payment_id` always, `psp_confirmation_id` and
    `network_confirmation_id` on success. `Error` needs `error` (an AP2 error code, e.g.
    `invalid_mandate`, `invalid_credential`, `unresolved_constraint`,
    `mandates_not_supported`) and `error_description`.
    """

    status: Literal["Success", "Error"] | None = None
    error: str | None = None
    error_description: str | None = None
    order_id: str | None = None
    payment_id: str | None = None
    psp_confirmation_id: str | None = None
    network_confirmation_id: str | None = None


@frozen
class Ap2Receipt:
    """A signed AP2 receipt: return `receipt` to the shopping agent (`Ap2Data`) and file it
    with `kind`."""

    receipt: str = field(repr=False)
    kind: str
    reference: str
    references: MandateReferences
    claims: Mapping[str, Any] = field(repr=False)


def ap2_receipt_claims(
    kind: str, outcome: Ap2Outcome, *, iss: str, reference: str, iat: int
) -> dict[str, Any]:
    """The claims of an AP2 Checkout (`kind` "checkout") or Payment ("payment") Receipt.
    Raises `ValueError` for a receipt AP2's schema would refuse."""
    if kind not in AP2_RECEIPT_KINDS:
        raise ValueError("kind must be 'checkout' or 'payment'")
    if not iss:
        raise ValueError("iss is required (the merchant or payment processor issuing it)")
    status = outcome.status or ("Error" if outcome.error else "Success")
    if status not in ("Success", "Error"):
        raise ValueError("status must be 'Success' or 'Error'")
    claims: dict[str, Any] = {"status": status, "iss": iss, "iat": iat, "reference": reference}
    if status == "Error":
        if not outcome.error or not outcome.error_description:
            raise ValueError("An Error receipt needs error and error_description")
        claims["error"] = outcome.error
        claims["error_description"] = outcome.error_description
    elif outcome.error:
        raise ValueError("A Success receipt has no error")
    if kind == "checkout":
        if status == "Success":
            if not outcome.order_id:
                raise ValueError("A Success checkout receipt needs order_id")
            claims["order_id"] = outcome.order_id
        return claims
    if not outcome.payment_id:
        raise ValueError("A payment receipt needs payment_id")
    claims["payment_id"] = outcome.payment_id
    if status == "Success":
        if not outcome.psp_confirmation_id or not outcome.network_confirmation_id:
            raise ValueError(
                "A Success payment receipt needs psp_confirmation_id and network_confirmation_id"
            )
        claims["psp_confirmation_id"] = outcome.psp_confirmation_id
        claims["network_confirmation_id"] = outcome.network_confirmation_id
    return claims


def sign_ap2_receipt(
    key: PrivateJWK,
    kind: str,
    outcome: Ap2Outcome,
    mandate: str | MandateReferences,
    *,
    iss: str,
    now: float,
    reference_form: ReferenceForm = "closed_jwt",
    kid: str | None = None,
) -> Ap2Receipt:
    """Sign an AP2 receipt for `mandate` (as presented, or its `MandateReferences`), accepted
    or not (an `Error` outcome, with the AP2 error code of the verification).

    ES256 is AP2's only algorithm, so `key` must be P-256. The header is `{alg: ES256, typ:
    JWT, kid?}`. Raises `ValueError` for another key or an incomplete receipt.
    """
    if key.alg != "ES256":
        raise ValueError("AP2 receipts are signed ES256: use a P-256 key")
    references = mandate if isinstance(mandate, MandateReferences) else mandate_references(mandate)
    reference = references.reference(reference_form)
    claims = ap2_receipt_claims(kind, outcome, iss=iss, reference=reference, iat=int(now))
    signing_key = evolve(key, public=evolve(key.public, kid=kid))
    return Ap2Receipt(
        receipt=sign_compact(claims, signing_key, typ="JWT"),
        kind=AP2_RECEIPT_KINDS[kind],
        reference=reference,
        references=references,
        claims=MappingProxyType(claims),
    )


__all__ = [
    "AP2_RECEIPT_KINDS",
    "Ap2Outcome",
    "Ap2Receipt",
    "MandateRef",
    "MandateReferences",
    "ReferenceForm",
    "ap2_receipt_claims",
    "mandate_references",
    "parse_mandate_refs",
    "sign_ap2_receipt",
]
