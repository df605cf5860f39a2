"""JSON Web Keys (RFC 7517/7518/8037): import, export, generation, RFC 7638 thumbprints.

Only the key types pactmw verifies with are accepted: EC P-256, RSA (2048 to 8192 bits, with
an exponent of at most 2^31 - 1, so that no key makes a check costly) and OKP Ed25519. Keys
are held as prepared `cryptography` objects so the hot path never re-parses.

One rule decides which member of a JWKS may verify signatures, for every verifier (PACT
identity tokens, delegation and receipts, the Parafé broker's JWKS): `parse_jwks`, through
`verification_key`. Following RFC 7517 §5 ("ignore JWKs that it cannot or must not use"), a
member is skipped, and the others kept, when:

- it is not an object, or its `kty` is `oct` (a symmetric key never verifies here), or its
  `kty`/`crv` is not one of the three above (RSA out of those bounds included);
- it has `use` and that is not exactly `"sig"` (§4.2; `"enc"`, `null`, `1` are all skipped,
  where jose reads `use` only when it is a string: a malformed member, so skipped);
- its `key_ops` is an array without `"verify"` (§4.3; `["encrypt"]`, `["sign"]`, `[]`). A
  `key_ops` that is not an array is ignored, as jose (the Parafé reference's library) ignores
  it: a deliberate interop choice, so that every key the reference verifies with works here;
- its key members or optional members are malformed (`kid` or `alg` not a string, an `alg`
  that does not fit `kty`, bad base64url, a point off the curve, an Ed25519 key of small
  order: OpenSSL accepts a signature by one for any message).

A set in which no member is usable parses to an empty `KeySet`: it verifies nothing, and every
token is refused at key selection (unknown `kid`). It is not refused as a document, so that a
cache replaces the keys it held (an agent that withdraws all its keys is obeyed at once).
The one thing that refuses a whole set is a member of an asymmetric type carrying private
members (`d`, `p`, ...): a published private key is an accident that must not go unnoticed.
`import_public_jwk` (one key given on its own, e.g. from a DID document) applies the import
half of the rule (types, curves, sizes, members) but not `use`/`key_ops`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import field, frozen
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from pactmw.core.encoding import b64url_decode, b64url_encode, json_dumps, json_loads
from pactmw.core.errors import MalformedInput

PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey

#: The JWS algorithms pactmw implements, and the key type each needs.
ALGORITHM_KEY_TYPES: Mapping[str, str] = {"ES256": "EC", "RS256": "RSA", "EdDSA": "OKP"}
MIN_RSA_BITS = 2048
#: Bounds on RSA public keys, so that no key makes a signature check costly: OpenSSL takes an
#: exponent as long as a 3072-bit modulus (8 ms a check, 160 times a 2048-bit key's) and
#: moduli to 16384 bits. Go's limits (crypto/rsa; crypto/tls, CVE-2023-29409); real keys
#: use e = 65537 and at most 4096 bits.
MAX_RSA_BITS = 8192
MAX_RSA_EXPONENT = 2**31 - 1
#: Members that only a private JWK carries (RFC 7518 §6.2.2, §6.3.2; RFC 8037 §2).
PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_KEY_CLASSES: Mapping[str, type] = {
    "EC": ec.EllipticCurvePublicKey,
    "RSA": rsa.RSAPublicKey,
    "OKP": ed25519.Ed25519PublicKey,
}
_THUMBPRINT_MEMBERS: Mapping[str, tuple[str, ...]] = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
}


#: The encodings of the Ed25519 points of small order (libsodium's list): the identity and
#: the points of order 2, 4 and 8, with the non-canonical y = p and y = p + 1; compared with
#: the sign bit (the top bit of the last octet) cleared.
_SMALL_ORDER_ED25519 = frozenset(
    bytes.fromhex(point)
    for point in (
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    )
)


def _b64_int(value: int) -> str:
    return b64url_encode(value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big"))


def _member(obj: Mapping[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise MalformedInput(f"JWK member {name!r} missing or not a string")
    return value


def thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 SHA-256 thumbprint of a JWK, base64url without padding."""
    kty = jwk.get("kty")
    if not isinstance(kty, str) or kty not in _THUMBPRINT_MEMBERS:
        raise MalformedInput(f"unsupported JWK kty {kty!r}")
    required = {name: _member(jwk, name) for name in _THUMBPRINT_MEMBERS[kty]}
    # The members are ASCII and already in lexicographic order, so compact JSON is canonical.
    return b64url_encode(hashlib.sha256(json_dumps(required)).digest())


@frozen
class PublicJWK:
    """A verification key: its `cryptography` object plus the JWK metadata that selects it."""

    kty: str
    key: PublicKey = field(repr=False)
    members: Mapping[str, str] = field(repr=False)  # the public key members, for export
    kid: str | None = None
    alg: str | None = None
    thumbprint: str = ""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.key, _KEY_CLASSES[self.kty]):
            raise MalformedInput(f"a {self.kty} JWK needs a matching key object")

    def fits(self, alg: str) -> bool:
        """Tell whether this key may verify a signature made with `alg`."""
        return ALGORITHM_KEY_TYPES.get(alg) == self.kty and self.alg in (None, alg)

    def to_dict(self) -> dict[str, str]:
        """The public JWK as a JSON-ready dict (with `kid` and `alg` when known)."""
        out = dict(self.members)
        if self.kid is not None:
            out["kid"] = self.kid
        if self.alg is not None:
            out["alg"] = self.alg
        return out


def _public_from_members(kty: str, obj: Mapping[str, Any]) -> tuple[PublicKey, dict[str, str]]:
    if kty == "EC":
        if obj.get("crv") != "P-256":
            raise MalformedInput("EC JWK must use crv P-256")
        x, y = b64url_decode(_member(obj, "x")), b64url_decode(_member(obj, "y"))
        if len(x) != 32 or len(y) != 32:
            raise MalformedInput("EC P-256 coordinates must be 32 bytes")
        try:
            ec_key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + x + y)
        except ValueError as exc:
            raise MalformedInput("EC point is not on P-256") from exc
        return ec_key, {"kty": "EC", "crv": "P-256", "x": obj["x"], "y": obj["y"]}
    if kty == "RSA":
        n_bytes, e_bytes = b64url_decode(_member(obj, "n")), b64url_decode(_member(obj, "e"))
        n, e = int.from_bytes(n_bytes, "big"), int.from_bytes(e_bytes, "big")
        if n.bit_length() < MIN_RSA_BITS:
            raise MalformedInput(f"RSA key shorter than {MIN_RSA_BITS} bits")
        if n.bit_length() > MAX_RSA_BITS or e > MAX_RSA_EXPONENT:
            raise MalformedInput(
                f"RSA key longer than {MAX_RSA_BITS} bits or with an exponent past 2^31 - 1"
            )
        try:
            rsa_key = rsa.RSAPublicNumbers(e, n).public_key()
        except ValueError as exc:
            raise MalformedInput("invalid RSA public key") from exc
        return rsa_key, {"kty": "RSA", "n": obj["n"], "e": obj["e"]}
    if kty == "OKP":
        if obj.get("crv") != "Ed25519":
            raise MalformedInput("OKP JWK must use crv Ed25519")
        x = b64url_decode(_member(obj, "x"))
        if len(x) != 32:
            raise MalformedInput("Ed25519 public key must be 32 bytes")
        # OpenSSL verifies any message under a small-order key with R = identity, S = 0, so
        # such a key (never an honest one) would let anyone sign as its owner.
        if x[:31] + bytes((x[31] & 0x7F,)) in _SMALL_ORDER_ED25519:
            raise MalformedInput("Ed25519 public key of small order")
        return ed25519.Ed25519PublicKey.from_public_bytes(x), {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": obj["x"],
        }
    raise MalformedInput(f"unsupported JWK kty {kty!r}")


def _optional_str(obj: Mapping[str, Any], name: str) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedInput(f"JWK member {name!r} must be a string")
    return value


def import_public_jwk(obj: Any) -> PublicJWK:
    """Import one public JWK; private members are refused (a verifier never holds them)."""
    if not isinstance(obj, Mapping):
        raise MalformedInput("a JWK must be a JSON object")
    if PRIVATE_MEMBERS.intersection(obj):
        raise MalformedInput("JWK contains private key members")
    kty = _member(obj, "kty")
    alg = _optional_str(obj, "alg")
    if alg is not None and ALGORITHM_KEY_TYPES.get(alg) != kty:
        raise MalformedInput(f"JWK alg {alg!r} does not fit kty {kty!r}")
    key, members = _public_from_members(kty, obj)
    return PublicJWK(
        kty=kty,
        key=key,
        members=members,
        kid=_optional_str(obj, "kid"),
        alg=alg,
        thumbprint=thumbprint(members),
    )


@frozen
class KeySet:
    """An immutable set of verification keys, indexed by `kid`."""

    keys: tuple[PublicJWK, ...]
    # (kid or None, alg) -> the keys that may verify; built once, looked up per token.
    _index: Mapping[tuple[str | None, str], tuple[PublicJWK, ...]] = field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        index: dict[tuple[str | None, str], tuple[PublicJWK, ...]] = {}
        for alg in ALGORITHM_KEY_TYPES:
            for key in self.keys:
                if key.fits(alg):
                    index[(None, alg)] = (*index.get((None, alg), ()), key)
                    if key.kid is not None:
                        index[(key.kid, alg)] = (*index.get((key.kid, alg), ()), key)
        object.__setattr__(self, "_index", index)

    def candidates(self, kid: str | None, alg: str) -> tuple[PublicJWK, ...]:
        """The keys that may verify a token with this header `kid` and `alg`.

        With a `kid`, only keys carrying that `kid`; without one, every key that fits `alg`
        (the behaviour of jose's key sets, which the reference uses).
        """
        return self._index.get((kid, alg), ())

    def has_kid(self, kid: str) -> bool:
        """Tell whether any key carries this `kid`."""
        return any(key.kid == kid for key in self.keys)

    def to_dict(self) -> dict[str, list[dict[str, str]]]:
        """The public JWKS document."""
        return {"keys": [key.to_dict() for key in self.keys]}


def _may_verify(entry: Mapping[str, Any]) -> bool:
    """`use` and `key_ops` (RFC 7517 §4.2, §4.3): both, when present, must allow verifying."""
    if "use" in entry and entry["use"] != "sig":
        return False
    key_ops = entry.get("key_ops")
    # Only an array is read, as jose reads it (`Array.isArray(jwk.key_ops)`); any other value
    # is ignored rather than skipping the key. Deliberate interop choice: the Parafé reference
    # verifies with such a key, so we do too (RFC 7517 defines `key_ops` as an array only).
    return not isinstance(key_ops, list) or "verify" in key_ops


def verification_key(entry: Any) -> PublicJWK | None:
    """The key a JWKS member offers for verifying signatures, or None when it must be skipped.

    The one selection rule (see the module docstring): `oct` and unknown types or curves,
    `use` other than "sig", a `key_ops` array without "verify", malformed members.
    """
    if not isinstance(entry, Mapping) or entry.get("kty") == "oct" or not _may_verify(entry):
        return None
    try:
        return import_public_jwk(entry)
    except MalformedInput:
        return None


def parse_jwks(document: Any) -> KeySet:
    """Read a JWKS for verification: every member `verification_key` accepts, in order.

    Unusable members are skipped, not fatal (RFC 7517 §5); a set with none usable is an empty
    `KeySet`. The whole set is refused (`MalformedInput`) when it is not an object with a
    `keys` array, or when a member of an asymmetric type carries private members (a published
    private key is a configuration accident that must not go unnoticed; an `oct` member is
    skipped whatever it holds).
    """
    if isinstance(document, (bytes, str)):
        document = json_loads(document)
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise MalformedInput("a JWKS must be an object with a 'keys' array")
    entries: list[Any] = document["keys"]
    if any(
        isinstance(e, Mapping) and e.get("kty") != "oct" and PRIVATE_MEMBERS.intersection(e)
        for e in entries
    ):
        raise MalformedInput("JWKS contains private key members")
    keys = (verification_key(entry) for entry in entries)
    return KeySet(tuple(key for key in keys if key is not None))


@frozen
class PrivateJWK:
    """A signing key with its algorithm and `kid`, and the matching public JWK."""

    alg: str
    key: PrivateKey = field(repr=False)
    public: PublicJWK

    @property
    def kid(self) -> str | None:
        """The public key's `kid`."""
        return self.public.kid

    def to_dict(self) -> dict[str, str]:
        """The private JWK as a JSON-ready dict. Handle with care: it contains the secret."""
        out = self.public.to_dict()
        key = self.key
        if isinstance(key, ec.EllipticCurvePrivateKey):
            out["d"] = b64url_encode(key.private_numbers().private_value.to_bytes(32, "big"))
        elif isinstance(key, rsa.RSAPrivateKey):
            numbers = key.private_numbers()
            out.update(
                d=_b64_int(numbers.d),
                p=_b64_int(numbers.p),
                q=_b64_int(numbers.q),
                dp=_b64_int(numbers.dmp1),
                dq=_b64_int(numbers.dmq1),
                qi=_b64_int(numbers.iqmp),
            )
        else:
            out["d"] = b64url_encode(
                key.private_bytes(
                    serialization.Encoding.Raw,
                    serialization.PrivateFormat.Raw,
                    serialization.NoEncryption(),
                )
            )
        return out


def _public_members(key: PrivateKey) -> tuple[str, dict[str, str]]:
    public = key.public_key()
    if isinstance(public, ec.EllipticCurvePublicKey):
        if not isinstance(public.curve, ec.SECP256R1):
            raise MalformedInput("only P-256 EC keys are supported")
        nums = public.public_numbers()
        return "ES256", {
            "kty": "EC",
            "crv": "P-256",
            "x": b64url_encode(nums.x.to_bytes(32, "big")),
            "y": b64url_encode(nums.y.to_bytes(32, "big")),
        }
    if isinstance(public, rsa.RSAPublicKey):
        if public.key_size < MIN_RSA_BITS:
            raise MalformedInput(f"RSA key shorter than {MIN_RSA_BITS} bits")
        rnums = public.public_numbers()
        return "RS256", {"kty": "RSA", "n": _b64_int(rnums.n), "e": _b64_int(rnums.e)}
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return "EdDSA", {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(raw)}
    raise MalformedInput("unsupported private key type")


def private_jwk_from_key(key: Any, *, kid: str | None = None, alg: str | None = None) -> PrivateJWK:
    """Wrap a `cryptography` private key. `kid` defaults to the RFC 7638 thumbprint."""
    if not isinstance(
        key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey, ed25519.Ed25519PrivateKey)
    ):
        raise MalformedInput("unsupported private key type")
    natural_alg, members = _public_members(key)
    if alg is not None and alg != natural_alg:
        raise MalformedInput(f"alg {alg!r} does not fit this key (use {natural_alg})")
    tp = thumbprint(members)
    public = _public_from_members(members["kty"], members)[0]
    return PrivateJWK(
        alg=natural_alg,
        key=key,
        public=PublicJWK(
            kty=members["kty"],
            key=public,
            members=members,
            kid=kid if kid is not None else tp,
            alg=natural_alg,
            thumbprint=tp,
        ),
    )


def import_private_jwk(obj: Any) -> PrivateJWK:
    """Import a private JWK (EC P-256, RSA, Ed25519). `kid` defaults to the thumbprint."""
    if isinstance(obj, (bytes, str)):
        obj = json_loads(obj)
    if not isinstance(obj, Mapping):
        raise MalformedInput("a JWK must be a JSON object")
    kty = _member(obj, "kty")
    d = b64url_decode(_member(obj, "d"))
    key: PrivateKey
    try:
        if kty == "EC":
            if obj.get("crv") != "P-256":
                raise MalformedInput("EC JWK must use crv P-256")
            key = ec.derive_private_key(int.from_bytes(d, "big"), ec.SECP256R1())
        elif kty == "OKP":
            if obj.get("crv") != "Ed25519":
                raise MalformedInput("OKP JWK must use crv Ed25519")
            key = ed25519.Ed25519PrivateKey.from_private_bytes(d)
        elif kty == "RSA":

            def num(name: str) -> int:
                return int.from_bytes(b64url_decode(_member(obj, name)), "big")

            public_numbers = rsa.RSAPublicNumbers(num("e"), num("n"))
            key = rsa.RSAPrivateNumbers(
                p=num("p"),
                q=num("q"),
                d=int.from_bytes(d, "big"),
                dmp1=num("dp"),
                dmq1=num("dq"),
                iqmp=num("qi"),
                public_numbers=public_numbers,
            ).private_key()
        else:
            raise MalformedInput(f"unsupported JWK kty {kty!r}")
    except ValueError as exc:
        if isinstance(exc, MalformedInput):
            raise
        raise MalformedInput("invalid private JWK") from exc
    jwk = private_jwk_from_key(key, kid=_optional_str(obj, "kid"), alg=_optional_str(obj, "alg"))
    # The stored public half must be the one derived from `d`, or signatures would not verify.
    for name, value in jwk.public.members.items():
        if name in obj and obj[name] != value:
            raise MalformedInput(f"private JWK member {name!r} does not match its private key")
    return jwk


def load_private_key_pem(pem: bytes, *, kid: str | None = None) -> PrivateJWK:
    """Load an unencrypted PKCS#8 or traditional PEM private key."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise MalformedInput("not an unencrypted PEM private key") from exc
    return private_jwk_from_key(key, kid=kid)


def generate_private_jwk(alg: str = "ES256", *, kid: str | None = None) -> PrivateJWK:
    """Generate a fresh signing key for `alg` (ES256, RS256 with 2048 bits, or EdDSA)."""
    key: PrivateKey
    if alg == "ES256":
        key = ec.generate_private_key(ec.SECP256R1())
    elif alg == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=MIN_RSA_BITS)
    elif alg == "EdDSA":
        key = ed25519.Ed25519PrivateKey.generate()
    else:
        raise MalformedInput(f"cannot generate keys for alg {alg!r}")
    return private_jwk_from_key(key, kid=kid)


def public_key_set(keys: Iterable[PrivateJWK]) -> KeySet:
    """The public `KeySet` for a list of signing keys (for publishing as a JWKS)."""
    return KeySet(tuple(k.public for k in keys))


__all__ = [
    "ALGORITHM_KEY_TYPES",
    "MAX_RSA_BITS",
    "MAX_RSA_EXPONENT",
    "MIN_RSA_BITS",
    "PRIVATE_MEMBERS",
    "KeySet",
    "PrivateJWK",
    "PrivateKey",
    "PublicJWK",
    "PublicKey",
    "generate_private_jwk",
    "import_private_jwk",
    "import_public_jwk",
    "load_private_key_pem",
    "parse_jwks",
    "private_jwk_from_key",
    "public_key_set",
    "thumbprint",
    "verification_key",
]
