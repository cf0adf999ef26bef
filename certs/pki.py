"""A CA and a serving certificate for the webhook, made with `cryptography`; time passed in."""

from __future__ import annotations

import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from extender.core.api.parse import is_dns1123_subdomain

CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
RENEW_BEFORE = timedelta(days=30)


@dataclass(frozen=True)
class Bundle:
    """PEM bytes of the CA certificate, the serving certificate and its private key."""

    ca_cert: bytes
    cert: bytes
    key: bytes
    ca_key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256: as safe as RSA-3072 and far cheaper per TLS handshake.
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate(
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    *,
    now: datetime,
    ca_cert: bytes | None = None,
    ca_key: bytes | None = None,
) -> Bundle:
    """A serving certificate for the names, signed by the given CA or by a new one."""
    if not dns_names and not ip_addresses:
        raise ValueError("a serving certificate needs at least one --dns-name or --ip-address")
    for dns_name in dns_names:
        # A wildcard may stand for the leftmost label only (RFC 6125).
        if not is_dns1123_subdomain(dns_name.removeprefix("*.")):
            raise ValueError(
                f"--dns-name {dns_name!r} is not a DNS name (lowercase letters, digits, '-' "
                "and '.'; '*.' may lead)"
            )
    ips = []
    for value in ip_addresses:
        try:
            ips.append(ipaddress.ip_address(value))
        except ValueError:
            raise ValueError(f"--ip-address {value!r} is not an IP address") from None
    if ca_cert is not None and ca_key is not None:
        ca = x509.load_pem_x509_certificate(ca_cert)
        loaded = serialization.load_pem_private_key(ca_key, password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key must be an EC key")
        signing_key = loaded
    else:
        signing_key = _key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tower-webhook-ca")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(signing_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(signing_key, hashes.SHA256())
        )
    key = _key()
    common = dns_names[0] if dns_names else str(ips[0])
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(min(now + SERVING_VALIDITY, ca.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(signing_key, hashes.SHA256())
    )
    return Bundle(
        ca_cert=ca.public_bytes(serialization.Encoding.PEM),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=_pem_key(key),
        ca_key=_pem_key(signing_key),
    )


def needs_renewal(
    cert_pem: bytes,
    *,
    now: datetime,
    dns_names: Sequence[str] = (),
    before: timedelta = RENEW_BEFORE,
) -> bool:
    """Whether the certificate expires within `before` or does not cover the names."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return True
    if cert.not_valid_after_utc - before <= now:
        return True
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return bool(dns_names)
    return not set(dns_names) <= set(sans.get_values_for_type(x509.DNSName))


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write(bundle: Bundle, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ca.crt, ca.key, tls.crt and tls.key; each file is replaced atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "ca.crt": out / "ca.crt",
        "ca.key": out / "ca.key",
        "tls.crt": out / "tls.crt",
        "tls.key": out / "tls.key",
    }
    # The key first: a reader that sees the new certificate must find its key already.
    _atomic_write(paths["tls.key"], bundle.key, 0o600)
    _atomic_write(paths["tls.crt"], bundle.cert, 0o644)
    _atomic_write(paths["ca.key"], bundle.ca_key, 0o600)
    _atomic_write(paths["ca.crt"], bundle.ca_cert, 0o644)
    return paths
