"""AP2 artifacts carried in A2A messages beside Parafé data, and the AP2 card entry. Pure.

Spec §5.3 ("AP2 data in A2A messages", provisional): AP2 v0.2 defines no binding to A2A. Its
samples put each artifact in its own data part under a fixed key and declare the extension
`https://github.com/google-agentic-commerce/ap2/v1`; the reference implementation
(a2a-extension `withAp2`/`readAp2`) does the same, and adds `ap2.CheckoutReceipt` for
Checkout Receipts. Parafé data lives in `message.metadata`, AP2 data in `parts`, so the two
never collide. This module will follow whatever binding AP2 (now at the FIDO Alliance)
publishes.

Only the A2A wire JSON is read and written: A2A 1.0 data parts `{"data": {...}, "mediaType":
"application/json"}` and A2A 0.3 ones `{"kind": "data", "data": {...}}`. (The reference also
handles @a2a-js/sdk's in-memory objects, which never travel as JSON.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from attrs import field, frozen

#: The extension URI the AP2 samples declare (provisional, see the module docstring).
AP2_EXTENSION_URI = "https://github.com/google-agentic-commerce/ap2/v1"
#: The data-part keys of the AP2 samples, and the reference's key for Checkout Receipts.
AP2_CHECKOUT_MANDATE_KEY = "ap2.mandates.CheckoutMandateSdJwt"
AP2_PAYMENT_MANDATE_KEY = "ap2.mandates.PaymentMandateSdJwt"
AP2_CHECKOUT_RECEIPT_KEY = "ap2.CheckoutReceipt"
AP2_PAYMENT_RECEIPT_KEY = "ap2.PaymentReceipt"
#: The card entry's description by default (the AP2 samples' text).
AP2_DESCRIPTION = "Supports the Agent Payments Protocol."

PartShape = Literal["1.0", "0.3"]

#: (attribute of `Ap2Data`, data-part key), in the order the reference writes and reads them.
_FIELDS = (
    ("checkout_mandate", AP2_CHECKOUT_MANDATE_KEY),
    ("payment_mandate", AP2_PAYMENT_MANDATE_KEY),
    ("checkout_receipt", AP2_CHECKOUT_RECEIPT_KEY),
    ("payment_receipt", AP2_PAYMENT_RECEIPT_KEY),
)
_MANDATES = frozenset({"checkout_mandate", "payment_mandate"})

Receipt = str | Mapping[str, Any]


@frozen
class Ap2Data:
    """The AP2 artifacts of one message. Mandates are SD-JWT strings as presented (a
    `~~`-joined chain ending in `~`); receipts are JWTs (the AP2 samples also send unsigned
    receipt objects, so a receipt may be a JSON object)."""

    checkout_mandate: str | None = field(default=None, repr=False)
    payment_mandate: str | None = field(default=None, repr=False)
    checkout_receipt: Receipt | None = field(default=None, repr=False)
    payment_receipt: Receipt | None = field(default=None, repr=False)

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name, _ in _FIELDS)


def _data_of(part: Any) -> Mapping[str, Any] | None:
    """The `data` object of a data part (A2A 1.0: no `kind`; 0.3: `kind: "data"`), or None."""
    if not isinstance(part, Mapping):
        return None
    if "kind" in part and part["kind"] != "data":
        return None
    data = part.get("data")
    return data if isinstance(data, Mapping) else None


def _fits(name: str, value: Any) -> bool:
    if name in _MANDATES:
        return isinstance(value, str)
    return isinstance(value, str | Mapping)


def read_ap2(message: Any) -> Ap2Data | None:
    """The AP2 artifacts in an A2A message's data parts, or None when there are none.

    As the reference's `readAp2`: the first part that carries a key wins; a value of the wrong
    type (a mandate that is not a string, a receipt that is neither a string nor an object)
    is passed over, and a later part may still supply it. Total: any JSON value gives a
    result, never an exception.
    """
    parts = message.get("parts") if isinstance(message, Mapping) else None
    if not isinstance(parts, list):
        return None
    found: dict[str, Any] = {}
    for part in parts:
        data = _data_of(part)
        if data is None:
            continue
        for name, key in _FIELDS:
            if name not in found and key in data and _fits(name, data[key]):
                found[name] = data[key]
    return Ap2Data(**found) if found else None


def _shape_of(parts: list[Any]) -> PartShape:
    # The reference writes in the shape of the message's existing parts.
    for part in parts:
        if isinstance(part, Mapping) and "kind" in part:
            return "0.3"
    return "1.0"


def ap2_parts(data: Ap2Data, *, shape: PartShape = "1.0") -> list[dict[str, Any]]:
    """One data part per artifact of `data`, in the shape of A2A `shape` ("1.0" or "0.3").

    Pass them as a client's `extra_parts` (and `AP2_EXTENSION_URI` in its `extensions`), or
    use `with_ap2` on a whole message. Raises `TypeError` for a mandate that is not a string
    or a receipt that is neither a string nor a JSON object.
    """
    if shape not in ("1.0", "0.3"):
        raise ValueError("shape must be '1.0' or '0.3'")
    parts: list[dict[str, Any]] = []
    for name, key in _FIELDS:
        value = getattr(data, name)
        if value is None:
            continue
        if not _fits(name, value):
            what = (
                "the mandate as presented (an SD-JWT string)"
                if name in _MANDATES
                else ("a receipt JWT or a JSON object")
            )
            raise TypeError(f"{name} must be {what}")
        payload = {key: value if isinstance(value, str) else dict(value)}
        if shape == "0.3":
            parts.append({"kind": "data", "data": payload})
        else:
            parts.append({"data": payload, "mediaType": "application/json"})
    return parts


def with_ap2(
    message: Mapping[str, Any], data: Ap2Data, *, shape: PartShape | None = None
) -> dict[str, Any]:
    """A copy of `message` with each AP2 artifact of `data` in its own data part and
    `AP2_EXTENSION_URI` in `extensions` (the reference's `withAp2`).

    Parafé data in `metadata` is untouched. The parts take the shape of the message's
    existing parts (A2A 0.3 when one has a `kind`), unless `shape` says otherwise.
    """
    existing = message.get("parts")
    parts = list(existing) if isinstance(existing, list) else []
    parts.extend(ap2_parts(data, shape=shape or _shape_of(parts)))
    extensions = list(message.get("extensions") or [])
    if AP2_EXTENSION_URI not in extensions:
        extensions.append(AP2_EXTENSION_URI)
    return {**message, "parts": parts, "extensions": extensions}


def ap2_card_extension(*, required: bool = False, description: str | None = None) -> dict[str, Any]:
    """The AP2 entry of an agent card's `capabilities.extensions`, as the AP2 samples declare
    it (the reference's `buildAp2AgentCardExtension`); list it beside Parafé's."""
    return {
        "uri": AP2_EXTENSION_URI,
        "description": AP2_DESCRIPTION if description is None else description,
        "required": required,
    }


__all__ = [
    "AP2_CHECKOUT_MANDATE_KEY",
    "AP2_CHECKOUT_RECEIPT_KEY",
    "AP2_DESCRIPTION",
    "AP2_EXTENSION_URI",
    "AP2_PAYMENT_MANDATE_KEY",
    "AP2_PAYMENT_RECEIPT_KEY",
    "Ap2Data",
    "PartShape",
    "Receipt",
    "ap2_card_extension",
    "ap2_parts",
    "read_ap2",
    "with_ap2",
]
