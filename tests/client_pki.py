"""Certificate authorities and client certificates for TLS tests, made with cryptography."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, PEM."""

    cert: bytes
    key: bytes

    @property
    def der(self) -> bytes:
        return x509.load_pem_x509_certificate(self.cert).public_bytes(serialization.Encoding.DER)

    def write(self, directory: Path, name: str) -> tuple[str, str]:
        cert, key = directory / f"{name}.crt", directory / f"{name}.key"
        cert.write_bytes(self.cert)
        key.write_bytes(self.key)
        return str(cert), str(key)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def authority(name: str) -> Pair:
    """A self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def client(ca: Pair, common_name: str, organizations: tuple[str, ...] = ()) -> Pair:
    """A client certificate (extendedKeyUsage clientAuth) the CA signed."""
    issuer = x509.load_pem_x509_certificate(ca.cert)
    signer = serialization.load_pem_private_key(ca.key, password=None)
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    names += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(names))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(signer, hashes.SHA256())
    )
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))
