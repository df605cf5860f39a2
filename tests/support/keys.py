"""Throwaway keys and certificates made with `cryptography` alone (not pactmw's own code), so
a test can hand pactmw key material that pactmw did not produce."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

__all__ = ["PrivateKey", "generate_key", "private_pem", "self_signed_certificate"]

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey


def generate_key(alg: str) -> PrivateKey:
    """A new private key for a JWS `alg`: ES256, ES384, RS256 (2048 bits) or EdDSA (Ed25519)."""
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "ES384":
        return ec.generate_private_key(ec.SECP384R1())
    if alg == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(alg)


def private_pem(key: PrivateKey, *, traditional: bool = False) -> bytes:
    """The unencrypted PEM of `key`: PKCS#8, or the traditional OpenSSL form."""
    form = (
        serialization.PrivateFormat.TraditionalOpenSSL
        if traditional
        else serialization.PrivateFormat.PKCS8
    )
    return key.private_bytes(serialization.Encoding.PEM, form, serialization.NoEncryption())


def self_signed_certificate(
    key: PrivateKey,
    common_name: str,
    *,
    ip_addresses: Sequence[str] = (),
    dns_names: Sequence[str] = (),
    ca: bool = False,
    serial: int | None = None,
) -> x509.Certificate:
    """A certificate for `key` signed by itself (SHA-256), valid from a day ago for a day."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial if serial is not None else x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    names: list[x509.GeneralName] = [
        *(x509.IPAddress(ipaddress.ip_address(address)) for address in ip_addresses),
        *(x509.DNSName(dns) for dns in dns_names),
    ]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if ca:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        )
    return builder.sign(key, hashes.SHA256())
