"""`check_receipt`, the pure receipt check, on receipts signed here (ES256 and RS256)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest

from pactmw.client import Receipt, ReceiptInvalid, check_receipt
from pactmw.core.jose import sign_compact
from pactmw.core.jwk import KeySet, PrivateJWK, generate_private_jwk, public_key_set
from pactmw.protocols.delegation import RECEIPT_TYP

PA = "https://pa.example"
BRAND = "https://provider.example/a2a/acme"
CLAIMS: dict[str, Any] = {
    "grantId": "a2agrant_01",
    "user": "acct-42",
    "pa": PA,
    "brand": BRAND,
    "scopesUsed": ["orders:read", "orders:cancel"],
    "actions": [{"tool": "list_orders"}, {"tool": "cancel_order", "argsHash": "abc"}],
    "ts": "2026-09-30T12:00:00.123Z",
}
KEYS = {alg: generate_private_jwk(alg, kid=f"k-{alg}") for alg in ("ES256", "RS256")}


def signed(claims: dict[str, Any], key: PrivateJWK, typ: str = RECEIPT_TYP) -> dict[str, Any]:
    return {"jws": sign_compact(claims, key, typ=typ), "claims": claims}


def check(receipt: Any, keys: KeySet | None = None, **expected: str) -> Any:
    return check_receipt(
        receipt,
        keys or public_key_set(KEYS.values()),
        expected_pa=expected.get("pa", PA),
        expected_brand=expected.get("brand", BRAND),
    )


def reason(receipt: Any, keys: KeySet | None = None, **expected: str) -> str:
    with pytest.raises(ReceiptInvalid) as caught:
        check(receipt, keys, **expected)
    return caught.value.reason


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_valid_receipt(alg: str) -> None:
    verified = check(signed(CLAIMS, KEYS[alg]))
    assert verified.kid == f"k-{alg}"
    assert verified.scopes_used == ("orders:read", "orders:cancel")
    assert [(a.tool, a.args_hash) for a in verified.actions] == [
        ("list_orders", None),
        ("cancel_order", "abc"),
    ]
    assert verified.ts.year == 2026
    assert verified.ts.utcoffset() is not None


def test_key_order_and_trailing_slash_do_not_matter() -> None:
    receipt = signed(CLAIMS, KEYS["ES256"])
    reordered = Receipt(jws=receipt["jws"], claims=dict(reversed(list(CLAIMS.items()))))
    check(reordered, brand=BRAND + "/")
    check(signed({**CLAIMS, "ts": "2026-09-30T14:00:00+02:00"}, KEYS["ES256"]))


def test_signed_extra_claims_are_fine_unsigned_ones_are_not() -> None:
    check(signed({**CLAIMS, "extra": 1}, KEYS["ES256"]))
    receipt = signed(CLAIMS, KEYS["ES256"])
    assert reason({**receipt, "claims": {**CLAIMS, "extra": 1}}) == "claims_mismatch"
    assert reason({**receipt, "claims": {**CLAIMS, "user": "acct-43"}}) == "claims_mismatch"


def forge_hs256(claims: dict[str, Any]) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": RECEIPT_TYP}).encode())
    body = b64(json.dumps(claims).encode())
    mac = hmac.new(b"secret", f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{b64(mac)}"


@pytest.mark.parametrize(
    ("receipt", "expected"),
    [
        ({"jws": "a.b", "claims": CLAIMS}, "malformed"),
        ({"jws": 3, "claims": CLAIMS}, "malformed"),
        ({"jws": forge_hs256(CLAIMS), "claims": CLAIMS}, "alg_not_allowed"),
        (signed(CLAIMS, KEYS["ES256"], typ="JWT"), "bad_typ"),
        (signed(CLAIMS, generate_private_jwk("ES256", kid="stranger")), "unknown_key"),
        (signed(CLAIMS, generate_private_jwk("ES256", kid="k-ES256")), "bad_signature"),
        (signed({**CLAIMS, "ts": "2026-09-30T12:00:00"}, KEYS["ES256"]), "bad_claims"),
        (signed({**CLAIMS, "pa": "not a url"}, KEYS["ES256"]), "bad_claims"),
        (signed({**CLAIMS, "scopesUsed": "orders:read"}, KEYS["ES256"]), "bad_claims"),
        (signed({**CLAIMS, "actions": [{"argsHash": "x"}]}, KEYS["ES256"]), "bad_claims"),
        (signed({k: v for k, v in CLAIMS.items() if k != "grantId"}, KEYS["ES256"]), "bad_claims"),
        (signed({**CLAIMS, "pa": "https://other.example"}, KEYS["ES256"]), "wrong_pa"),
        (signed({**CLAIMS, "brand": BRAND + "-other"}, KEYS["ES256"]), "wrong_brand"),
    ],
)
def test_invalid_receipts(receipt: Any, expected: str) -> None:
    assert reason(receipt) == expected


def test_detached_payload_is_refused() -> None:
    header, _, signature = signed(CLAIMS, KEYS["ES256"])["jws"].split(".")
    assert reason({"jws": f"{header}..{signature}", "claims": CLAIMS}) in {
        "malformed",
        "bad_signature",
    }


def test_a_number_no_double_holds_is_bad_claims() -> None:
    """RFC 8785 compares numbers as IEEE doubles: an integer past their range (valid JSON, as
    a Provider may sign it or return it) raised a bare OverflowError from `canonicalize`."""
    huge = 10**400
    assert reason(signed({**CLAIMS, "extra": huge}, KEYS["ES256"])) == "bad_claims"
    receipt = signed(CLAIMS, KEYS["ES256"])
    assert reason({**receipt, "claims": {**CLAIMS, "extra": huge}}) == "bad_claims"
