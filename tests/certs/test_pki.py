import re
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from certs import pki

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def load(pem):
    return x509.load_pem_x509_certificate(pem)


def test_serving_certificate_is_signed_by_the_ca_and_names_every_san():
    bundle = pki.generate(["tower-webhook.tower-system.svc", "localhost"], ["127.0.0.1"], now=NOW)
    ca, cert = load(bundle.ca_cert), load(bundle.cert)
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["tower-webhook.tower-system.svc", "localhost"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.not_valid_after_utc == NOW + pki.SERVING_VALIDITY


def test_rotation_can_keep_the_ca():
    first = pki.generate(["a"], now=NOW)
    second = pki.generate(
        ["a"], now=NOW + timedelta(days=1), ca_cert=first.ca_cert, ca_key=first.ca_key
    )
    assert second.ca_cert == first.ca_cert
    load(second.cert).verify_directly_issued_by(load(first.ca_cert))
    assert load(second.cert).serial_number != load(first.cert).serial_number


@pytest.mark.parametrize(
    ("now", "names", "want"),
    [
        (NOW + timedelta(days=10), ["a"], False),
        (NOW + timedelta(days=340), ["a"], True),
        (NOW + timedelta(days=10), ["a", "b"], True),
    ],
    ids=["fresh", "within 30 days of expiry", "a name is missing"],
)
def test_needs_renewal(now, names, want):
    bundle = pki.generate(["a"], now=NOW)
    assert pki.needs_renewal(bundle.cert, now=now, dns_names=names) is want


def test_garbage_needs_renewal():
    assert pki.needs_renewal(b"not a certificate", now=NOW)


def test_bad_ip_is_a_clear_error():
    with pytest.raises(ValueError, match="--ip-address 'nope' is not an IP address"):
        pki.generate(["a"], ["nope"], now=NOW)


@pytest.mark.parametrize("name", ["bad name!", "-tower.svc", "tower..svc", "Tower.svc", "a.*.b"])
def test_a_name_that_is_not_a_dns_name_is_a_clear_error(name):
    with pytest.raises(ValueError, match=f"--dns-name '{re.escape(name)}' is not a DNS name"):
        pki.generate([name], now=NOW)


def test_a_wildcard_may_lead():
    cert = load(pki.generate(["*.tower-system.svc"], now=NOW).cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["*.tower-system.svc"]


def test_files_are_written_with_private_keys_unreadable_to_others(tmp_path):
    paths = pki.write(pki.generate(["a"], now=NOW), tmp_path)
    assert paths["tls.key"].stat().st_mode & 0o777 == 0o600
    assert paths["ca.key"].stat().st_mode & 0o777 == 0o600
    assert paths["tls.crt"].read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
